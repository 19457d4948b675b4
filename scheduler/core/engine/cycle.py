"""One scheduling cycle: `plan(snapshot, policy, now, state=None) -> CyclePlan`.

Pure and deterministic: no clock, no I/O, no Django; ties are broken by a seeded hash
(see `fairshare`), by list order of the inputs or by host index, never by `hash(str)`.
The caller applies the plan's stops before its starts (starts may use GPUs that the
stops free).

A cycle builds the cluster state (`cluster`), stops work on unhealthy hosts (`drain`),
then runs the policy's pass: ours (`fairshare_cycle`: fair-share order, `placement`,
`reservations`, `preemption`) or a baseline (`baselines`); `explain` writes the
reasons. What is kept warm between cycles lives in the caller's `EngineState`.
"""

from __future__ import annotations

from scheduler.core.engine.baselines import BaselineCycle
from scheduler.core.engine.cluster import ClusterState, Decisions
from scheduler.core.engine.drain import drain
from scheduler.core.engine.fairshare_cycle import FairShareCycle
from scheduler.core.engine.state import EngineState
from scheduler.core.engine.types import CyclePlan, Policy, Snapshot

__all__ = ["MODES", "plan"]

MODES = ("fairshare", "fifo", "priority", "static")


def plan(
    snapshot: Snapshot, policy: Policy, now: float, state: EngineState | None = None
) -> CyclePlan:
    """One scheduling cycle: the starts, stops, reservations, ready hosts and queue.

    `policy.mode` selects our fair-share scheduler ("fairshare") or a baseline
    ("fifo", "priority", "static"). `state` is the caller's `EngineState` (warm caches
    across cycles); without it the cycle is cold and decides the same. Pure and
    deterministic; apply stops before starts.
    """
    mode = policy.mode
    if mode not in MODES:
        raise ValueError(f"unknown policy mode {mode!r}; expected one of {', '.join(MODES)}")
    if state is None:
        state = EngineState()
    cap = policy.max_min_runtime_s
    layout = state.host_layout(snapshot.hosts)
    cluster = ClusterState(
        snapshot, layout, cap, now, state.runs, state.blocks, state.masks, state.free_index(layout)
    )
    decisions = Decisions()
    drain(cluster, decisions, cap, now)
    if mode == "fairshare":
        return FairShareCycle(snapshot, policy, now, state, cluster, decisions).run()
    return BaselineCycle(snapshot, policy, now, state, cluster, decisions).run()
