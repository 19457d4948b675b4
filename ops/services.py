"""Writes of the operations app: heartbeats and the scheduling gate."""

from __future__ import annotations

import datetime as dt
import logging
import os

from django.db import transaction
from django.utils import timezone

from ops.models import Heartbeat, SchedulingGate
from ops.selectors import database_identity

log = logging.getLogger(__name__)
GATE_ID = 1
HEARTBEAT_KEPT = dt.timedelta(days=1)


def heartbeat_record(
    *, kind: str, name: str, host: str, started_at: dt.datetime, now: dt.datetime | None = None
) -> None:
    """Record that process `name` of `kind` is alive now (one upsert)."""
    Heartbeat.objects.bulk_create(
        [
            Heartbeat(
                kind=kind,
                name=name[:200],
                host=host[:200],
                pid=os.getpid(),
                started_at=started_at,
                seen_at=now or timezone.now(),
            )
        ],
        update_conflicts=True,
        unique_fields=["kind", "name"],
        update_fields=["host", "pid", "started_at", "seen_at"],
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


def scheduling_gate_check(*, now: dt.datetime | None = None) -> str:
    """Why scheduling is paused ("" when it may run). A gate row written in another
    database (a restore, a copy, a promoted replica) pauses it here, once; a database
    without a row (a new installation) gets one."""
    identity = database_identity()
    gate = SchedulingGate.objects.filter(pk=GATE_ID).first()
    if gate is None:
        SchedulingGate.objects.get_or_create(pk=GATE_ID, defaults={"database": identity})
        return ""
    if gate.paused_reason or gate.database == identity:
        return gate.paused_reason
    with transaction.atomic():
        gate = SchedulingGate.objects.select_for_update().get(pk=GATE_ID)
        if not gate.paused_reason and gate.database != identity:
            gate.paused_reason = _restored_reason(gate.database, identity)[:500]
            gate.paused_at = now or timezone.now()
            gate.save(update_fields=["paused_reason", "paused_at"])
            log.error("scheduling paused: %s", gate.paused_reason)
    return gate.paused_reason


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
    log.warning("scheduling resumed by %s", by)
