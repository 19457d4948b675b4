"""What the short-job reserve did in one cycle, read from the cycle's input and plan
(pure): the GPUs it held, those of them that waiting longer allocated work could not
use because of it, and the short jobs it started at once. The live cycle stores these
per cycle (`CycleRecord`); `scheduler.selectors.now.short_reserve_cost` sums them
(docs/concepts.md, "short-job reserve cost")."""

from __future__ import annotations

import math
from typing import NamedTuple

from scheduler.core.engine.types import CyclePlan, Policy, Snapshot, Workload

__all__ = ["ReserveEffect", "reserve_effect"]


class ReserveEffect(NamedTuple):
    """One cycle of the short-job reserve.

    - held_gpus: GPUs of the hosts it held;
    - unused_gpus: of those, GPUs that no short job used after the cycle (free, or
      running unallocated backfill) while longer allocated work waited, at most that
      work's GPUs: what allocated work could not use because of it;
    - short_starts: short jobs the cycle started on its hosts while longer allocated
      work waited (each would have waited for a host behind that work otherwise)."""

    held_gpus: int = 0
    unused_gpus: int = 0
    short_starts: int = 0


def _is_short(w: Workload, limit: float) -> bool:
    return 0.0 < w.min_runtime_s <= limit


def reserve_effect(snapshot: Snapshot, policy: Policy, plan: CyclePlan) -> ReserveEffect:
    """The reserve's effect in the cycle that planned `plan` from `snapshot`."""
    held = set(plan.short_reserve)
    if not held:
        return ReserveEffect()
    size = {h.name: h.gpus for h in snapshot.hosts}
    held_gpus = sum(size.get(h, 0) for h in held)
    cap = policy.max_min_runtime_s
    short_s = min(policy.short_job_max_s, cap)
    limit = math.inf if cap <= short_s else short_s
    started = {s.workload_id for s in plan.starts}
    waiting = sum(
        w.gpus
        for jobs in snapshot.pending.values()
        for w in jobs
        if w.min_runtime_s > limit and w.id not in started
    )
    if waiting <= 0:
        return ReserveEffect(held_gpus=held_gpus)
    stopped = {s.workload_id for s in plan.stops}
    used = sum(
        len(p.gpu_indices)
        for r in snapshot.running
        if r.allocated and _is_short(r.workload, limit) and r.workload.id not in stopped
        for p in r.placements
        if p.host in held
    )
    pending = {w.id: w for jobs in snapshot.pending.values() for w in jobs}
    short_starts = 0
    for s in plan.starts:
        w = pending.get(s.workload_id)
        on_held = [p for p in s.placements if p.host in held]
        if w is None or not s.allocated or not on_held or not _is_short(w, limit):
            continue
        short_starts += 1
        used += sum(len(p.gpu_indices) for p in on_held)
    unused = min(max(0, held_gpus - used), waiting)
    return ReserveEffect(held_gpus, unused, short_starts)
