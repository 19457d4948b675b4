"""What a start taken back means for its job's next plans, in words
(`scheduler.selectors.refusals` reads the refusals; `scheduler.core.refusals` is the rule)."""

from __future__ import annotations

import datetime as dt

from scheduler.core.refusals import Refusal, avoidances
from scheduler.cycle.context import CycleContext
from scheduler.selectors.refusals import KEPT_OFF, avoid_s, refusals_of, why_of


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
