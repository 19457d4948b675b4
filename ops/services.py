"""Writes of the operations app: heartbeats and the scheduling gate."""

from __future__ import annotations

import datetime as dt
import logging
import os
from collections.abc import Iterable

from django.db import transaction
from django.utils import timezone

from ops.models import Heartbeat, SchedulingGate
from ops.selectors import cycle_sequence_value, database_identity, high_water_key
from scheduler.cycle_requests import redis_client

log = logging.getLogger(__name__)
GATE_ID = 1
HEARTBEAT_KEPT = dt.timedelta(days=1)


def heartbeat_record(
    *,
    kind: str,
    name: str,
    host: str,
    started_at: dt.datetime,
    now: dt.datetime | None = None,
    queues: Iterable[str] = (),
) -> None:
    """Record that process `name` of `kind` (a worker: consuming `queues`) is alive now
    (one upsert)."""
    Heartbeat.objects.bulk_create(
        [
            Heartbeat(
                kind=kind,
                name=name[:200],
                host=host[:200],
                pid=os.getpid(),
                started_at=started_at,
                seen_at=now or timezone.now(),
                queues=",".join(sorted(queues))[:500],
            )
        ],
        update_conflicts=True,
        unique_fields=["kind", "name"],
        update_fields=["host", "pid", "started_at", "seen_at", "queues"],
    )


def heartbeats_prune(*, now: dt.datetime | None = None) -> int:
    """Forget processes not seen for a day (renamed or retired workers)."""
    cutoff = (now or timezone.now()) - HEARTBEAT_KEPT
    return Heartbeat.objects.filter(seen_at__lt=cutoff).delete()[0]


def _restored_reason(before: str, now_identity: str) -> str:
    return (
        "this database was restored or copied from another one (it was written in "
        f"{before}, this is {now_identity}): the clusters may have run, finished or "
        "cancelled jobs since; run `manage.py reconcile_restore` to reconcile every "
        "cluster and resume scheduling"
    )


def _went_back_reason(remembered: int, here: int) -> str:
    return (
        "this database is older than its own last cycle (Redis remembers cycle "
        f"{remembered}, the database's cycles end at {here}): it was restored in place "
        "(a volume snapshot); the clusters may have run, finished or cancelled jobs "
        "since; run `manage.py reconcile_restore` to reconcile every cluster and resume "
        "scheduling"
    )


# Raise the remembered cycle id, never lower it (two clusters' cycles end in any order).
_RAISE_HIGH_WATER = """
local known = tonumber(redis.call('GET', KEYS[1]) or '0')
if tonumber(ARGV[1]) > known then redis.call('SET', KEYS[1], ARGV[1]) end
return 0
"""


def cycle_high_water_record(cycle_id: int, *, identity: str | None = None) -> None:
    """Remember in Redis, outside the database, the highest cycle id this database
    gave: a database restored in place (a volume snapshot keeps its identity) is caught
    by its cycle sequence being below it (`scheduling_gate_check`). Redis being down
    only skips this."""
    key = high_water_key(identity or database_identity())
    try:
        redis_client().eval(_RAISE_HIGH_WATER, 1, key, int(cycle_id))
    except Exception as exc:  # the cycle ran; the check resumes with Redis
        log.warning("could not record the cycle high water: %s", exc)


def _remembered_high_water(identity: str) -> int | None:
    try:
        value = redis_client().get(high_water_key(identity))
    except Exception as exc:
        log.warning("could not read the cycle high water: %s", exc)
        return None
    return int(value) if value is not None else None


def _pause_once(reason: str, now: dt.datetime | None, *, unless_identity: str = "") -> str:
    """Pause with `reason` unless already paused (or, with `unless_identity`, unless
    the gate row now belongs to that database): under the gate row's lock."""
    with transaction.atomic():
        gate = SchedulingGate.objects.select_for_update().get(pk=GATE_ID)
        if not gate.paused_reason and gate.database != unless_identity:
            gate.paused_reason = reason[:500]
            gate.paused_at = now or timezone.now()
            gate.save(update_fields=["paused_reason", "paused_at"])
            log.error("scheduling paused: %s", gate.paused_reason)
    return gate.paused_reason


def scheduling_gate_check(*, now: dt.datetime | None = None) -> str:
    """Why scheduling is paused ("" when it may run). A gate row written in another
    database (a restore, a copy, a promoted replica), or a database whose cycle ids
    went back below the highest Redis remembers for it (restored in place), pauses it
    here, once; a database without a row (a new installation) gets one."""
    identity = database_identity()
    gate = SchedulingGate.objects.filter(pk=GATE_ID).first()
    if gate is None:
        SchedulingGate.objects.get_or_create(pk=GATE_ID, defaults={"database": identity})
        return ""
    if gate.paused_reason:
        return gate.paused_reason
    if gate.database != identity:
        return _pause_once(_restored_reason(gate.database, identity), now, unless_identity=identity)
    remembered = _remembered_high_water(identity)
    if remembered is not None:
        here = cycle_sequence_value()
        if remembered > here:
            return _pause_once(_went_back_reason(remembered, here), now)
    return ""


def scheduling_pause(*, reason: str, now: dt.datetime | None = None) -> None:
    """Pause scheduling on this database until `scheduling_resume`."""
    SchedulingGate.objects.update_or_create(
        pk=GATE_ID,
        defaults={
            "database": database_identity(),
            "paused_reason": reason[:500],
            "paused_at": now or timezone.now(),
        },
    )
    log.warning("scheduling paused: %s", reason)


def scheduling_resume(*, by: str, now: dt.datetime | None = None) -> None:
    """Resume scheduling, and make this database the one the gate row belongs to (for
    the reconcile after a restore: `scheduler.services.restore`)."""
    SchedulingGate.objects.update_or_create(
        pk=GATE_ID,
        defaults={
            "database": database_identity(),
            "paused_reason": "",
            "paused_at": None,
            "resumed_at": now or timezone.now(),
            "resumed_by": by[:150],
        },
    )
    _high_water_reset()
    log.warning("scheduling resumed by %s", by)


def _high_water_reset() -> None:
    """After a reconcile the restored database is the truth: Redis remembers its cycle
    ids from here (the ones the lost history gave are forgotten)."""
    try:
        redis_client().set(high_water_key(database_identity()), cycle_sequence_value())
    except Exception as exc:
        log.warning("could not reset the cycle high water: %s", exc)
