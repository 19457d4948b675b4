"""The rules of a run that holds GPUs, written once: when its protection ends and what
its checkpoints saved. The engine, the simulator, the ETA forward runs and the live
translation from the database all call these (pure, no I/O)."""

from __future__ import annotations

import math

from scheduler.core.engine.types import RunningWorkload, Workload

INF = math.inf


def protection_s(workload: Workload, cap: float) -> float:
    """How long a run of `workload` is protected from its start: its minimum runtime, at
    most the policy's cap (`max_min_runtime_s`); 0 for unallocated work."""
    return min(workload.min_runtime_s, cap)


def protection_end(workload: Workload, started_s: float, cap: float) -> float:
    """When the protection of allocated `workload` ends if its run starts at `started_s`:
    `protection_s` from then."""
    return started_s + protection_s(workload, cap)


def protected_until(rw: RunningWorkload, cap: float) -> float:
    """When the protection of running `rw` ends: its explicit `protected_until_s` when it
    has one (a holder the engine must leave alone until then), else its minimum runtime
    from the run's start for allocated work; unallocated work is never protected (-inf)."""
    if rw.protected_until_s is not None:
        return rw.protected_until_s
    if not rw.allocated:
        return -INF
    return protection_end(rw.workload, rw.started_s, cap)


def last_checkpoint_s(started_s: float, now: float, interval_s: float) -> float | None:
    """When a resumable run that started at `started_s` last saved its work (None: not
    yet), with a checkpoint every `interval_s` from its start."""
    if interval_s <= 0 or now <= started_s:
        return None
    k = math.floor((now - started_s) / interval_s)
    return started_s + k * interval_s if k >= 1 else None


def checkpointed(rw: RunningWorkload, saved_s: float) -> RunningWorkload:
    """`rw` with its last checkpoint at `saved_s` (built directly, not with
    dataclasses.replace: the replay and the ETA's forward runs make thousands)."""
    return RunningWorkload(
        workload=rw.workload,
        placements=rw.placements,
        started_s=rw.started_s,
        allocated=rw.allocated,
        last_checkpoint_s=saved_s,
        protected_until_s=rw.protected_until_s,
        idle_since_s=rw.idle_since_s,
    )


def saved_work_s(ran_s: float, interval_s: float) -> float:
    """Work a resumable run of `ran_s` seconds saved at its last checkpoint."""
    if interval_s <= 0 or ran_s <= 0:
        return 0.0
    return min(ran_s, math.floor(ran_s / interval_s) * interval_s)


def idle_reclaimable(rw: RunningWorkload, now: float, after_s: float | None) -> bool:
    """Whether running `rw` is idle long enough to be reclaimed at `now`: its GPUs have
    been idle (`idle_since_s`) for at least `after_s` (None: idle reclaim is off).
    Protection is read apart: a run inside its minimum runtime is never a candidate."""
    since = rw.idle_since_s
    return after_s is not None and since is not None and now - since >= after_s
