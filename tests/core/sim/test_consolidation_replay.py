"""Consolidation in a replay (`SimConfig.consolidate`, on by default): a moved job stops
and starts again elsewhere at the same instant, loses only the work since its last
checkpoint (plus the restart overhead), and gets no new protection from the move."""

from __future__ import annotations

from scheduler.core.engine import CyclePlan, Policy, Snapshot, StopReason, plan
from scheduler.core.engine.types import BudgetNode
from scheduler.core.sim.model import ClusterSpec, HostSpec, RunningAtStart, SimConfig, TraceJob
from scheduler.core.sim.replay import simulate

HOUR = 3600.0
# h2 is the short-job reserve's (`RESERVE`): consolidation runs only while it holds a host
CLUSTER = ClusterSpec("c", (HostSpec("h0", 8), HostSpec("h1", 8), HostSpec("h2", 8)))
RESERVE = 1
TREE = BudgetNode("org", children=(BudgetNode("a", 1.0), BudgetNode("b", 1.0)))
# b has used far more than its share: it may preempt none of a's work
PRIOR = (("b", -6 * 86400.0, -1.0, 16),)


def _jobs() -> list[TraceJob]:
    """h0: `m` (a, 2 GPUs, resumable, past its 1 h protection); h1: session `s` (a,
    6 GPUs, not resumable, protected 8 h); `w` (b, 8 GPUs) arrives at 0, `x` (b, 1 GPU)
    at 1 h (a cycle that sees the moved run)."""
    m = RunningAtStart(started_s=-3 * HOUR, placements=(("h0", (0, 1)),))
    s = RunningAtStart(started_s=-HOUR, placements=(("h1", tuple(range(6))),))
    return [
        TraceJob("m", "a", "u", 0.0, 2, 20 * HOUR, HOUR, True, 0, "training", running=m),
        TraceJob("s", "a", "u", 0.0, 6, 20 * HOUR, 8 * HOUR, False, 0, "interactive", running=s),
        TraceJob("w", "b", "u", 0.0, 8, 2 * HOUR, HOUR, True, 0, "training"),
        TraceJob("x", "b", "u", HOUR, 1, HOUR, HOUR, True, 0, "training"),
    ]


def _intervals(result, job_id: str) -> list[tuple[float, float, tuple[str, ...]]]:
    return [(v.start_s, v.end_s, v.hosts) for v in result.intervals if v.job_id == job_id]


def test_a_moved_job_restarts_at_once_elsewhere_and_stays_unprotected():
    seen: list[tuple[float, float | None]] = []

    def planner(snapshot: Snapshot, policy: Policy, now: float) -> CyclePlan:
        for rw in snapshot.running:
            if rw.workload.id == "m" and rw.placements[0].host == "h1":
                seen.append((now, rw.protected_until_s))
        return plan(snapshot, policy, now)

    config = SimConfig(until_s=4 * HOUR, prior_usage=PRIOR, short_reserve_hosts=RESERVE)
    result = simulate(CLUSTER, TREE, _jobs(), config, planner=planner)
    assert _intervals(result, "m")[:2] == [(0.0, 0.0, ("h0",)), (0.0, 4 * HOUR, ("h1",))]
    assert _intervals(result, "w") == [(0.0, 2 * HOUR, ("h0",))]
    (stop,) = result.preemptions
    assert (stop.job_id, stop.reason_code) == ("m", StopReason.MIGRATE)
    # the last checkpoint was at the replay's start: nothing but the restart is lost
    assert stop.lost_gpu_s == 0.0
    # the engine sees the moved run past its protection from the move on
    assert seen and all(until is not None and until <= now for now, until in seen)


def test_without_consolidation_the_job_waits_for_the_pieces_to_end():
    config = SimConfig(
        until_s=4 * HOUR, prior_usage=PRIOR, short_reserve_hosts=RESERVE, consolidate=False
    )
    result = simulate(CLUSTER, TREE, _jobs(), config)
    assert not result.preemptions
    assert _intervals(result, "w")[0][0] >= HOUR  # not before the reserve gives way


def test_no_move_while_the_short_job_reserve_holds_no_host():
    """The adaptive reserve alone holds no host on three hosts without short work: the
    free pieces stay for the next short job, nothing moves, `w` starts on h2."""
    result = simulate(CLUSTER, TREE, _jobs(), SimConfig(until_s=4 * HOUR, prior_usage=PRIOR))
    assert not result.preemptions
    assert _intervals(result, "w") == [(0.0, 2 * HOUR, ("h2",))]
