"""Idle work in the replay: a job's idle pattern (`TraceJob.idle_after_s`) marks each of
its runs idle to the engine; with `SimConfig.idle_reclaim` the run is preempted like any
other once idle long enough past its min runtime (resumable: requeued); off, nothing
changes."""

from __future__ import annotations

import random
from dataclasses import replace

import pytest

from ledger.accounting import EndReason
from scheduler.core.engine.types import BudgetNode
from scheduler.core.sim.io import InputError, load_trace
from scheduler.core.sim.model import ClusterSpec, HostSpec, JobState, SimConfig, TraceJob
from scheduler.core.sim.replay import simulate
from scheduler.core.sim.report import build_report
from tests.support.sim import busy_trace

H = 3600.0
TREE = BudgetNode("org", children=(BudgetNode("a", 1.0), BudgetNode("b", 1.0)))
CLUSTER = ClusterSpec("c", (HostSpec("h0", 8),))


def trace(idle_after_s: float | None) -> list[TraceJob]:
    # a 10 h job of a that goes idle after an hour, then a job of the same project and
    # priority that needs the host: only idle reclaim lets it in before 10 h
    return [
        TraceJob("idle", "a", "u", 0.0, 8, 10 * H, H, True, 0, "training", idle_after_s),
        TraceJob("next", "a", "u", 0.5 * H, 8, H, H, True, 0, "training"),
    ]


def first_start(result, job_id: str) -> float:
    return min(iv.start_s for iv in result.intervals if iv.job_id == job_id)


def test_off_the_idle_pattern_changes_nothing() -> None:
    plain = simulate(CLUSTER, TREE, trace(None), SimConfig())
    idle = simulate(CLUSTER, TREE, trace(H), SimConfig())
    assert [(iv.job_id, iv.start_s, iv.end_s) for iv in idle.intervals] == [
        (iv.job_id, iv.start_s, iv.end_s) for iv in plain.intervals
    ]
    assert first_start(idle, "next") == 10 * H and idle.preemptions == []
    # not even a cycle of its own: one at the idle instant (1 h, "next" waiting) could
    # plan otherwise, so a replay whose idle points are read from the record (a preview)
    # drifted from the history played with the profile's (the demo's back-fill)
    assert idle.cycles == plain.cycles


@pytest.mark.parametrize("seed", range(5))
def test_off_idle_points_anywhere_leave_a_busy_replay_as_it_was(seed: int) -> None:
    cluster = ClusterSpec("c", tuple(HostSpec(f"h{i}", 8) for i in range(3)))
    jobs = busy_trace(seed)
    rng = random.Random(seed)
    idle = [replace(j, idle_after_s=rng.choice((None, 0.0, rng.uniform(0, H)))) for j in jobs]
    plain, marked = (simulate(cluster, TREE, t, SimConfig()) for t in (jobs, idle))
    assert [(iv.job_id, iv.start_s, iv.end_s) for iv in marked.intervals] == [
        (iv.job_id, iv.start_s, iv.end_s) for iv in plain.intervals
    ]


def test_on_the_idle_run_is_reclaimed_once_idle_long_enough_and_requeued() -> None:
    config = SimConfig(idle_reclaim=True, idle_reclaim_after_s=1800.0)
    result = simulate(CLUSTER, TREE, trace(H), config)
    # idle from 1 h, reclaimable at 1.5 h: the waiting job starts then
    [stop, *_] = result.preemptions
    assert (stop.job_id, stop.reason_code, stop.at_s) == ("idle", "idle", 1.5 * H)
    assert first_start(result, "next") == 1.5 * H
    first = next(iv for iv in result.intervals if iv.job_id == "idle")
    assert (first.end_s, first.end_reason) == (1.5 * H, EndReason.PREEMPTED)
    # resumable: requeued, it runs again (and goes idle again an hour into that run)
    runs = [iv for iv in result.intervals if iv.job_id == "idle"]
    assert len(runs) >= 2
    outcome = next(j for j in result.jobs if j.job_id == "idle")
    assert outcome.state == JobState.COMPLETED
    report = build_report(result, TREE)
    assert report["preemptions"]["by_reason"].get("idle_reclaim", 0) >= 1


def test_min_runtime_protects_an_idle_run() -> None:
    # protected for 4 h: idle from 1 h but reclaimed only once the 4 h are over
    jobs = [
        TraceJob("idle", "a", "u", 0.0, 8, 10 * H, 4 * H, True, 0, "training", H),
        TraceJob("next", "a", "u", 0.5 * H, 8, H, H, True, 0, "training"),
    ]
    result = simulate(CLUSTER, TREE, jobs, SimConfig(idle_reclaim=True))
    assert result.preemptions[0].at_s == 4 * H
    assert first_start(result, "next") == 4 * H


def test_the_trace_may_carry_the_idle_pattern(tmp_path) -> None:
    path = tmp_path / "trace.csv"
    path.write_text(
        "job_id,project,user,submit_s,gpus,duration_s,min_runtime_s,resumable,priority,kind,"
        "idle_after_s\n"
        "j1,a,u,0,8,36000,3600,1,0,training,3600\n"
        "j2,a,u,0,8,3600,3600,1,0,training,\n"
    )
    jobs = load_trace(path, ["a", "b"])
    assert [j.idle_after_s for j in jobs] == [3600.0, None]
    path.write_text(
        "job_id,project,user,submit_s,gpus,duration_s,min_runtime_s,resumable,priority,kind,"
        "idle_after_s\nj1,a,u,0,8,36000,3600,1,0,training,soon\n"
    )
    with pytest.raises(InputError, match="idle_after_s"):
        load_trace(path, ["a", "b"])
