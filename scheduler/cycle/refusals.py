"""The hosts each waiting job is kept off, read from the starts the cycle took back
(`scheduler.core.refusals` is the rule; this module reads its input)."""

from __future__ import annotations

import datetime as dt

from django.conf import settings

from scheduler.core.refusals import Avoidance, Refusal, avoidances, memory_s
from scheduler.cycle.adapter_io import START_WITHDRAWN
from scheduler.cycle.context import CycleContext
from scheduler.models import Attempt, AttemptEnd, JobState


def avoid_s() -> tuple[float, float]:
    """(shortest, longest) time a job is kept off a host that refused it."""
    base = float(getattr(settings, "ALLOT_REFUSAL_AVOID_S", 900.0))
    top = float(getattr(settings, "ALLOT_REFUSAL_AVOID_MAX_S", 14400.0))
    return base, max(base, top)


def refusals_of(cluster_id: int, at: dt.datetime, *, job_id: int | None = None) -> list[Refusal]:
    """The starts of waiting jobs the cycle took back within the rule's memory (one
    indexed read: the cluster's attempts ended since then)."""
    _, top = avoid_s()
    rows = Attempt.objects.filter(
        cluster_id=cluster_id,
        ended_at__gte=at - dt.timedelta(seconds=memory_s(top)),
        end_reason=AttemptEnd.START_FAILED,
        end_detail__startswith=START_WITHDRAWN,
    )
    rows = (
        rows.filter(job_id=job_id)
        if job_id is not None
        else rows.filter(job__state=JobState.PENDING)
    )
    return [
        Refusal(str(job), tuple(p["host"] for p in placements), ended.timestamp(), why_of(detail))
        for job, placements, ended, detail in rows.values_list(
            "job_id", "placements", "ended_at", "end_detail"
        )
    ]


def kept_off(cluster_id: int, at: dt.datetime) -> list[Avoidance]:
    """The (job, host) pairs the plan keeps apart at `at`."""
    base, top = avoid_s()
    return avoidances(refusals_of(cluster_id, at), at.timestamp(), base_s=base, max_s=top)


# what `kept_off_note` appends to a withdrawn start's detail (cut off again by `why_of`)
KEPT_OFF = "; kept off "


def why_of(detail: str) -> str:
    """The cluster's reason in a withdrawn start's detail (without Allot's words)."""
    return detail.removeprefix(START_WITHDRAWN).split(KEPT_OFF, 1)[0]


def kept_off_note(ctx: CycleContext, job_id: int, hosts: tuple[str, ...], detail: str) -> str:
    """What a start taken back now (`detail`, on `hosts`) means for the job's next
    plans: "; kept off gpu03 until 23:45 UTC (refused there 2 times)"."""
    base, top = avoid_s()
    now = ctx.at.timestamp()
    earlier = refusals_of(ctx.cluster.pk, ctx.at, job_id=job_id)
    this = Refusal(str(job_id), hosts, now, why_of(detail))
    kept = avoidances([*earlier, this], now, base_s=base, max_s=top)
    if not kept:
        return ""
    until = dt.datetime.fromtimestamp(max(a.until for a in kept), dt.UTC)
    times = max(a.refusals for a in kept)
    return (
        f"{KEPT_OFF}{', '.join(a.host for a in kept)} until {until:%H:%M} UTC "
        f"(refused there {times} time{'s' if times > 1 else ''})"
    )
