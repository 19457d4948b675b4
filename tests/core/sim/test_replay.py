"""Hand-computable replays through the real engine (scheduler.core.sim.replay)."""

from __future__ import annotations

import math
import random

import pytest

from ledger.accounting import EndReason
from scheduler.core.engine.types import (
    BudgetNode,
    CyclePlan,
    Placement,
    Policy,
    Snapshot,
    Start,
)
from scheduler.core.sim.model import (
    ClusterSpec,
    HealthEvent,
    HostSpec,
    JobState,
    SimConfig,
    SimResult,
    TraceJob,
)
from scheduler.core.sim.replay import (
    ReplayError,
    feasible_gpus,
    leaf_projects,
    simulate,
    usage_from_intervals,
)

TREE = BudgetNode("org", children=(BudgetNode("a", 1.0), BudgetNode("b", 1.0)))


def cluster(hosts: int = 1, gpus: int = 8, events: tuple[HealthEvent, ...] = ()) -> ClusterSpec:
    return ClusterSpec("c", tuple(HostSpec(f"h{i}", gpus) for i in range(hosts)), events)


def job(
    job_id: str,
    submit: float,
    gpus: int = 8,
    duration: float = 3600.0,
    min_rt: float | None = None,
    *,
    project: str = "a",
    resumable: bool = True,
    priority: int = 0,
    kind: str = "training",
) -> TraceJob:
    return TraceJob(
        job_id=job_id,
        project=project,
        user="",
        submit_s=float(submit),
        gpus=gpus,
        duration_s=float(duration),
        min_runtime_s=float(duration if min_rt is None else min_rt),
        resumable=resumable,
        priority=priority,
        kind=kind,
    )


def runs(result: SimResult, job_id: str) -> list[tuple[float, float, str]]:
    return [
        (iv.start_s, iv.end_s, str(iv.end_reason)) for iv in result.intervals if iv.job_id == job_id
    ]


def outcome(result: SimResult, job_id: str):
    return next(j for j in result.jobs if j.job_id == job_id)


class Spy:
    """Wraps the engine's plan and records every snapshot's time and usage."""

    def __init__(self) -> None:
        from scheduler.core.engine import plan

        self.plan = plan
        self.seen: list[tuple[float, dict[str, float], int]] = []

    def __call__(self, snapshot: Snapshot, policy: Policy, now: float) -> CyclePlan:
        self.seen.append((now, dict(snapshot.usage), len(snapshot.running)))
        return self.plan(snapshot, policy, now)


# -- hand-computed replays ---------------------------------------------------------------


def test_a_job_waits_then_runs() -> None:
    jobs = [job("x", 0, duration=100), job("y", 10, duration=50)]
    r = simulate(cluster(), TREE, jobs, SimConfig())
    assert runs(r, "x") == [(0.0, 100.0, "completed")]
    assert runs(r, "y") == [(100.0, 150.0, "completed")]
    y = outcome(r, "y")
    assert y.state == JobState.COMPLETED and y.end_s == 150.0 and y.waits_s == [90.0]
    assert outcome(r, "x").waits_s == [0.0]
    assert r.preemptions == [] and r.start_s == 0.0 and r.end_s == 150.0
    assert r.capacity == [(0.0, 8)]
    assert all(iv.allocated for iv in r.intervals)


def test_preempted_resumable_job_loses_work_since_checkpoint_and_pays_restart() -> None:
    # u: unallocated, resumable, 3 h; x: allocated, arrives at 2500 s and takes the host.
    jobs = [job("u", 0, duration=10800, min_rt=0), job("x", 2500, min_rt=3600, project="b")]
    r = simulate(cluster(), TREE, jobs, SimConfig())
    assert runs(r, "u") == [(0.0, 2500.0, "preempted"), (6100.0, 15220.0, "completed")]
    # checkpoint at 1800 s: 700 s x 8 GPUs lost; remaining 10800 - 1800 + 120 s restart
    (p,) = r.preemptions
    assert (p.at_s, p.job_id, p.project, p.reason_code) == (2500.0, "u", "a", "unallocated")
    assert p.lost_gpu_s == pytest.approx(700.0 * 8)
    u = outcome(r, "u")
    assert u.waits_s == [0.0, 3600.0] and u.preemptions == 1 and u.state == JobState.COMPLETED
    assert runs(r, "x") == [(2500.0, 6100.0, "completed")]


@pytest.mark.timeout(60, method="signal")  # fails alone; the run goes on
def test_a_checkpoint_that_float_division_puts_short_of_its_time_is_still_passed() -> None:
    # (31522.18...+3600) - 31522.18... is a hair under 3600: floor() says no checkpoint yet,
    # and the replay used to re-queue that checkpoint at the same instant for ever.
    start = 31522.183049595395
    assert math.floor(((start + 3600.0) - start) / 3600.0) == 0
    # y's arrival brings a cycle at exactly x's first checkpoint
    jobs = [job("x", start, 1, 3 * 3600.0, 600.0), job("y", start + 3600.0, 1, 60.0)]
    r = simulate(cluster(), TREE, jobs, SimConfig(checkpoint_interval_s=3600.0))
    assert runs(r, "x") == [(start, start + 3 * 3600.0, "completed")]
    assert runs(r, "y") == [(start + 3600.0, start + 3660.0, "completed")]


def test_preempted_non_resumable_job_ends_terminated() -> None:
    jobs = [
        job("u", 0, duration=10800, min_rt=0, resumable=False),
        job("x", 2500, min_rt=3600, project="b"),
    ]
    r = simulate(cluster(), TREE, jobs, SimConfig())
    assert runs(r, "u") == [(0.0, 2500.0, "preempted")]
    u = outcome(r, "u")
    assert u.state == JobState.TERMINATED and u.end_s == 2500.0 and u.preemptions == 1
    assert r.preemptions[0].lost_gpu_s == pytest.approx(2500.0 * 8)
    assert outcome(r, "x").state == JobState.COMPLETED


def test_unhealthy_host_drains_after_min_runtime_and_is_recorded() -> None:
    # x (8 GPUs, protected for 600 s) fills one host, y the other; learn which is x's.
    jobs = [job("x", 0, duration=3600, min_rt=600), job("y", 0, duration=20000, project="b")]
    first = simulate(cluster(hosts=2), TREE, jobs, SimConfig())
    (host,) = runs_hosts(first, "x")
    events = (HealthEvent(100.0, host, False), HealthEvent(5000.0, host, True))
    r = simulate(cluster(hosts=2, events=events), TREE, jobs, SimConfig())
    x0, x1 = (iv for iv in r.intervals if iv.job_id == "x")
    assert (x0.start_s, x0.end_s, x0.end_reason) == (0.0, 600.0, EndReason.DRAINED)
    (p,) = r.preemptions
    assert (p.job_id, p.reason_code, p.at_s) == ("x", "drain", 600.0)
    assert p.lost_gpu_s == pytest.approx(600.0 * 8)  # no checkpoint before 1800 s
    (d,) = r.drains
    assert (d.host, d.start_s, d.ready_s) == (host, 100.0, 600.0)
    assert r.capacity == [(0.0, 16), (100.0, 8), (5000.0, 16)]
    # x is requeued and restarts when its host is back: 3600 + 120 s of work left
    assert (x1.start_s, x1.end_s, x1.end_reason) == (5000.0, 8720.0, EndReason.COMPLETED)
    assert outcome(r, "x").waits_s == [0.0, 4400.0]
    assert runs(r, "y") == [(0.0, 20000.0, "completed")]


def runs_hosts(result: SimResult, job_id: str) -> list[str]:
    return [h for iv in result.intervals if iv.job_id == job_id for h in iv.hosts]


def test_empty_unhealthy_host_is_ready_at_once() -> None:
    c = cluster(hosts=2, events=(HealthEvent(50.0, "h1", False),))
    r = simulate(c, TREE, [job("x", 0, gpus=1, duration=100)], SimConfig())
    assert [(d.host, d.start_s, d.ready_s) for d in r.drains] == [("h1", 50.0, 50.0)]


def test_usage_window_excludes_old_usage() -> None:
    spy = Spy()
    cfg = SimConfig(lookback_s=7200.0)
    jobs = [
        job("x", 0, duration=3600, project="a"),  # 8 GPU-hours charged to a in [0, 3600)
        job("p1", 7200, gpus=1, duration=10, project="b"),  # probes at 7200 and 14400
        job("p2", 14400, gpus=1, duration=10, project="b"),
    ]
    simulate(cluster(), TREE, jobs, cfg, planner=spy)
    usage = {t: u for t, u, _ in spy.seen}
    assert usage[7200.0]["a"] == pytest.approx(8 * 3600.0)
    assert usage[14400.0].get("a", 0.0) == 0.0  # window [7200, 14400]: all of it aged out
    assert usage[14400.0]["b"] == pytest.approx(10.0)  # p1's run is still inside


def test_unallocated_runs_are_never_charged() -> None:
    spy = Spy()
    jobs = [
        job("u", 0, gpus=4, duration=7200, min_rt=0),
        job("v", 100, gpus=1, duration=60),
        job("probe", 3000, gpus=1, duration=10, project="b"),
    ]
    r = simulate(cluster(), TREE, jobs, SimConfig(), planner=spy)
    assert runs(r, "u") == [(0.0, 7200.0, "completed")]
    assert [iv.allocated for iv in r.intervals if iv.job_id == "u"] == [False]
    # at 3000 s u has run 3000 s unallocated: only v's 60 GPU-seconds are charged to a
    usage = {t: u for t, u, _ in spy.seen}
    assert usage[3000.0]["a"] == pytest.approx(60.0)


def test_until_cuts_the_run_with_running_at_end_intervals() -> None:
    jobs = [job("x", 0, duration=10000), job("y", 10, duration=100)]
    r = simulate(cluster(), TREE, jobs, SimConfig(until_s=5000.0))
    assert r.end_s == 5000.0
    assert runs(r, "x") == [(0.0, 5000.0, "running_at_end")]
    x, y = outcome(r, "x"), outcome(r, "y")
    assert x.state == JobState.RUNNING and x.end_s is None
    assert y.state == JobState.PENDING and y.pending_since_s == 10.0 and y.waits_s == []


def test_impossible_shapes_are_rejected_and_do_not_hang() -> None:
    jobs = [
        job("huge", 0, gpus=64),  # more than the cluster
        job("odd", 0, gpus=12),  # above one host, not whole hosts
        job("ok", 5, gpus=16, duration=60),
    ]
    r = simulate(cluster(hosts=2), TREE, jobs, SimConfig())
    for jid in ("huge", "odd"):
        o = outcome(r, jid)
        assert o.state == JobState.TERMINATED and o.rejected and o.waits_s == []
    assert outcome(r, "ok").state == JobState.COMPLETED
    assert r.end_s == 65.0


def test_job_that_only_a_dead_host_could_hold_leaves_the_loop() -> None:
    c = cluster(hosts=2, events=(HealthEvent(0.0, "h1", False),))
    jobs = [job("big", 10, gpus=16), job("small", 20, gpus=8, duration=100)]
    r = simulate(c, TREE, jobs, SimConfig())
    assert outcome(r, "big").state == JobState.PENDING
    assert outcome(r, "small").state == JobState.COMPLETED
    assert r.end_s == 120.0


def test_feasible_shapes() -> None:
    assert feasible_gpus(8, [8, 8])
    assert feasible_gpus(16, [8, 8])
    assert not feasible_gpus(24, [8, 8])
    assert not feasible_gpus(12, [8, 8])
    assert not feasible_gpus(0, [8])
    assert leaf_projects(TREE) == ["a", "b"]


def test_a_double_booked_gpu_is_an_engine_error() -> None:
    def bad(snapshot: Snapshot, policy: Policy, now: float) -> CyclePlan:
        starts = tuple(
            Start(w.id, (Placement("h0", (0,)),), True, "bad")
            for ws in snapshot.pending.values()
            for w in ws
        )
        return CyclePlan(starts=starts)

    with pytest.raises(ReplayError, match="busy GPU"):
        simulate(
            cluster(), TREE, [job("x", 0, gpus=1), job("y", 0, gpus=1)], SimConfig(), planner=bad
        )


# -- invariants over random traces ---------------------------------------------------------


def random_trace(seed: int, n: int = 150, hosts: int = 4) -> list[TraceJob]:
    rng = random.Random(seed)
    out = []
    for i in range(n):
        g = rng.choice([1, 1, 2, 4, 8, 8, 16])
        d = float(rng.randint(60, 4 * 3600))
        kind = rng.choice(["training", "training", "debug", "sweep"])
        min_rt = {"training": min(d, 1800.0), "debug": min(d, 600.0), "sweep": 0.0}[kind]
        out.append(
            TraceJob(
                job_id=f"j{i}",
                project=rng.choice(["a", "a", "b", "c"]),
                user="",
                submit_s=float(rng.randint(0, 6 * 3600)),
                gpus=g,
                duration_s=d,
                min_runtime_s=min_rt,
                resumable=rng.random() < 0.7,
                priority=rng.choice([0, 0, 1]),
                kind=kind,
            )
        )
    return out


TREE3 = BudgetNode(
    "org",
    children=(
        BudgetNode("p", 2.0, (BudgetNode("a", 3.0), BudgetNode("b", 1.0))),
        BudgetNode("c", 1.0),
    ),
)


def test_same_input_gives_an_identical_result() -> None:
    c = cluster(hosts=4, events=(HealthEvent(3000.0, "h2", False), HealthEvent(9000.0, "h2", True)))
    trace = random_trace(7)
    a = simulate(c, TREE3, trace, SimConfig(until_s=8 * 3600.0))
    b = simulate(c, TREE3, trace, SimConfig(until_s=8 * 3600.0))
    assert a.intervals == b.intervals
    assert a.jobs == b.jobs
    assert a.preemptions == b.preemptions
    assert a.drains == b.drains and a.capacity == b.capacity
    assert a.cycles == b.cycles and a.cycles > 0


@pytest.mark.parametrize("policy", ["fairshare", "fifo", "priority", "static"])
def test_invariants_on_a_random_trace(policy: str) -> None:
    """Usage fed to the engine equals the charged time of the intervals (window longer
    than the run); no GPU busy twice; every job accounted for."""
    spy = Spy()
    hosts = 4
    c = cluster(hosts=hosts, events=(HealthEvent(4000.0, "h1", False),))
    trace = random_trace(3, hosts=hosts)
    r = simulate(c, TREE3, trace, SimConfig(policy=policy, lookback_s=30 * 86400.0), planner=spy)
    # usage conservation at every cycle
    for now, usage, _ in spy.seen:
        done = [iv for iv in r.intervals if iv.start_s < now]
        ref = usage_from_intervals(done, now, 30 * 86400.0)
        for p in ("a", "b", "c"):
            assert usage.get(p, 0.0) == pytest.approx(ref.get(p, 0.0), abs=1e-6)
    # no GPU busy twice at any instant (checked per host with a sweep)
    edges: dict[str, list[tuple[float, int]]] = {}
    for iv in r.intervals:
        per_host = iv.gpus // len(iv.hosts) if iv.gpus >= 8 else iv.gpus
        for h in iv.hosts:
            edges.setdefault(h, []).extend([(iv.start_s, per_host), (iv.end_s, -per_host)])
    for es in edges.values():
        busy = 0
        for _, d in sorted(es, key=lambda e: (e[0], e[1])):
            busy += d
            assert busy <= 8
    # every job ends in exactly one state; completed jobs ran their full duration
    for o, tj in zip(r.jobs, trace, strict=True):
        assert o.job_id == tj.job_id
        ran = sum(e - s for s, e, why in runs(r, o.job_id))
        if o.state == JobState.COMPLETED and o.preemptions == 0:
            assert ran == pytest.approx(tj.duration_s)
        if o.state == JobState.COMPLETED and o.preemptions:
            assert ran >= tj.duration_s
        assert len(o.waits_s) == len(runs(r, o.job_id))
    if policy == "fifo":
        assert all(p.reason_code in ("drain", "host_down") for p in r.preemptions)


def test_progress_reaches_one() -> None:
    seen: list[float] = []
    simulate(cluster(hosts=2), TREE3, random_trace(1, n=40), SimConfig(), progress=seen.append)
    assert seen and seen[-1] == 1.0 and all(0.0 <= f <= 1.0 for f in seen)
    assert seen == sorted(seen)


def test_half_life_usage_is_fed_when_configured() -> None:
    spy = Spy()
    jobs = [job("x", 0, duration=3600), job("p", 7200, gpus=1, duration=10, project="b")]
    simulate(cluster(), TREE, jobs, SimConfig(half_life_s=3600.0), planner=spy)
    usage = {t: u for t, u, _ in spy.seen}
    k = math.log(2) / 3600.0
    expected = 8 * (1 - math.exp(-k * 3600)) / k * 0.5  # accrued over [0, 3600), halved by 7200
    assert usage[7200.0]["a"] == pytest.approx(expected)


def test_min_cycle_gap_spaces_cycles_but_keeps_event_times() -> None:
    jobs = [job("x", 0, duration=100), job("y", 10, duration=50)]
    r = simulate(cluster(), TREE, jobs, SimConfig(min_cycle_gap_s=60.0))
    assert runs(r, "x") == [(0.0, 100.0, "completed")]  # the finish is applied on time
    # y arrives at 10: its cycle waits until 60 (and is skipped: x is protected);
    # x ends at 100, more than 60 s after the last cycle, so y starts at once
    assert runs(r, "y") == [(100.0, 150.0, "completed")]
    assert r.cycles == 2
    jobs = [job("x", 0, duration=100), job("y", 70, duration=50, project="b")]
    r = simulate(cluster(), TREE, jobs, SimConfig(min_cycle_gap_s=60.0))
    assert runs(r, "y") == [(100.0, 150.0, "completed")]
    r = simulate(
        cluster(),
        TREE,
        [job("x", 0, duration=30), job("y", 10, duration=50)],
        SimConfig(min_cycle_gap_s=60.0),
    )
    assert runs(r, "x") == [(0.0, 30.0, "completed")]
    assert runs(r, "y") == [(60.0, 110.0, "completed")]  # x ended at 30, cycle at 60


def test_fifo_skips_cycles_that_cannot_start_anything() -> None:
    # one long job fills the host; 50 arrivals cannot fit and fifo never preempts
    jobs = [job("x", 0, duration=10000)] + [job(f"q{i}", 10 + i, duration=10) for i in range(50)]
    r = simulate(cluster(), TREE, jobs, SimConfig(policy="fifo"))
    assert r.skipped_cycles >= 50
    assert r.cycles <= 52  # x's start, then one cycle per finish
    assert outcome(r, "q49").state == JobState.COMPLETED


def test_result_does_not_depend_on_the_process_hash_seed() -> None:
    import os
    import subprocess
    import sys

    code = (
        "import hashlib, sys; sys.path[:0] = ['.', 'tests/core/sim'];"
        "from test_replay import random_trace, cluster, TREE3;"
        "from scheduler.core.sim.replay import simulate;"
        "from scheduler.core.sim.model import SimConfig;"
        "r = simulate(cluster(hosts=4), TREE3, random_trace(11, n=120), SimConfig());"
        "print(hashlib.sha256(repr((r.intervals, r.jobs, r.preemptions)).encode()).hexdigest())"
    )
    root = os.path.dirname(
        os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    )
    digests = {
        subprocess.run(
            [sys.executable, "-c", code],
            cwd=root,
            env={**os.environ, "PYTHONHASHSEED": seed},
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        for seed in ("1", "2")
    }
    assert len(digests) == 1
