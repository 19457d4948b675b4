"""The ETA of a pending job: runtime forecast from history, forward simulation through
the engine, the backfill-style baseline, and the replay's probe that the bench uses."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from scheduler.core.engine import Host, Policy, Snapshot, Workload
from scheduler.core.sim.eta import (
    CALIBRATION_MIN,
    DEFAULT_RUNTIME_S,
    RANGE_COVERAGE,
    REL_STEP,
    SPREAD,
    Estimate,
    RuntimeForecast,
    baseline_starts,
    busiest_arrivals,
    estimate,
    forward_starts,
    moved_beyond_range,
    range_widening,
    repeat_arrivals,
    spread_points,
    spread_quantiles,
    steady,
    widened,
)
from scheduler.core.sim.model import ClusterSpec, HostSpec, SimConfig, TraceJob
from scheduler.core.sim.replay import simulate
from tests.core.engine.helpers import hosts, job, pending, run, tree

H = 3600.0


def fixed(seconds: float):
    """A forecast that says every run lasts `seconds` in all (minus what ran)."""

    def remaining(w: Workload, elapsed: float) -> float:
        return max(0.0, seconds - elapsed)

    return remaining


# ------------------------------------------------------------------ the forecast


def test_quantiles_come_from_the_finest_key_with_enough_runtimes() -> None:
    history = [("a", "ann", "training", 1, float(s)) for s in range(100, 2100, 100)]  # 20
    history += [("b", "bob", "training", 1, 50_000.0)] * 30
    f = RuntimeForecast(history, min_samples=20)
    # project a, user ann: her own 20 runtimes (100..2000 s), median between 1000 and 1100
    assert f.remaining("a", "ann", "training", 1, 0.0, 0.5) == 1050.0
    # another user of a has no runtimes of his own: the project's (the same 20)
    assert f.remaining("a", "cid", "training", 1, 0.0, 0.5) == 1050.0
    # a new project falls back to (kind, gpus): all 50 runtimes, mostly bob's
    assert f.remaining("new", "x", "training", 1, 0.0, 0.5) == 50_000.0
    # quantiles grow with q
    lo, mid, hi = (f.remaining("a", "ann", "training", 1, 0.0, q) for q in (0.25, 0.5, 0.75))
    assert lo < mid < hi


def test_running_jobs_are_forecast_from_the_runtimes_longer_than_their_elapsed_time() -> None:
    history = [("a", "", "training", 1, float(s)) for s in range(1, 101)]  # 1..100 s
    f = RuntimeForecast(history, min_samples=10)
    # after 80 s only 81..100 remain possible: the median of those is 90.5, so 10.5 s left
    assert f.remaining("a", "", "training", 1, 80.0, 0.5) == 10.5
    # longer than nearly all history: the scale-free rule, "as long again" at the median
    assert f.remaining("a", "", "training", 1, 1000.0, 0.5) == 1000.0
    assert f.remaining("a", "", "training", 1, 1000.0, 0.75) == 3000.0


def test_a_running_job_is_forecast_from_the_key_s_most_recent_longer_runtimes() -> None:
    """A project ran 3,600 s jobs for weeks, then a sweep of 5,500 s jobs: a job of the
    key that has run 4,000 s is forecast from the last `recent` runtimes longer than that
    (the sweep's), not from all of them (mostly the old regime's 10,000 s tail)."""
    old = [("a", "", "training", 1, 3600.0)] * 300 + [("a", "", "training", 1, 10_000.0)] * 200
    sweep = [("a", "", "training", 1, 5500.0)] * 50
    f = RuntimeForecast(old + sweep, min_samples=20, recent=50)
    assert f.remaining("a", "", "training", 1, 4000.0, 0.5) == 1500.0
    # all of them: mostly the 10,000 s tail
    assert (
        RuntimeForecast(old + sweep, recent=None).remaining("a", "", "training", 1, 4000.0, 0.5)
        == 6000.0
    )
    # a job that outlived the sweep: the last runtimes longer than its 6,000 s, the old tail
    assert f.remaining("a", "", "training", 1, 6000.0, 0.5) == 4000.0


def test_runs_still_going_count_as_runtimes_at_least_that_long() -> None:
    """A young key: its 20 short runs (100 s) ended, its 40 long ones are still going
    after 5,000 s. From the ended runs alone a new job runs 100 s; with the runs going
    now as censored runtimes (Kaplan-Meier) two in three of its runs last past 5,000 s,
    so its median lies beyond them (the scale-free tail: 5,000 x 2/3 / 0.5 s)."""
    history = [("a", "", "training", 1, 100.0)] * 20
    going = [("a", "", "training", 1, 5000.0)] * 40
    ended_only = RuntimeForecast(history, min_samples=20)
    f = ended_only.with_running(going)
    assert ended_only.remaining("a", "", "training", 1, 0.0, 0.5) == 100.0
    assert f.remaining("a", "", "training", 1, 0.0, 0.5) == pytest.approx(5000.0 * (2 / 3) / 0.5)
    # a third of the runs end at 100 s: the 25th percentile still does
    assert f.remaining("a", "", "training", 1, 0.0, 0.25) == 100.0
    # the forecast it came from is unchanged
    assert ended_only.remaining("a", "", "training", 1, 0.0, 0.5) == 100.0


def test_a_long_history_moves_little_with_a_few_runs_going() -> None:
    history = [("a", "", "training", 1, float(s)) for s in range(100, 10_100, 100)]  # 100
    f = RuntimeForecast(history, min_samples=20)
    going = f.with_running([("a", "", "training", 1, 9000.0)] * 3)
    # a running job at 2,000 s: the ended runs past it, 81 of them; 3 more at risk
    before = f.remaining("a", "", "training", 1, 2000.0, 0.5)
    after = going.remaining("a", "", "training", 1, 2000.0, 0.5)
    assert before <= after <= before + 200.0


def test_a_run_going_shorter_than_the_elapsed_time_changes_nothing() -> None:
    history = [("a", "", "training", 1, float(s)) for s in range(1, 101)]
    f = RuntimeForecast(history, min_samples=10)
    g = f.with_running([("a", "", "training", 1, 50.0)] * 10)
    assert g.remaining("a", "", "training", 1, 80.0, 0.5) == f.remaining(
        "a", "", "training", 1, 80.0, 0.5
    )


def test_the_estimate_counts_the_snapshot_s_running_jobs_as_runs_going() -> None:
    """`estimate` hands the forecast the running jobs' elapsed times (with the work a
    requeued job saved), as the live service and the bench both call it."""
    seen: list[list[tuple[str, str, str, int, float]]] = []

    class Spy(RuntimeForecast):
        def with_running(self, running):  # type: ignore[no-untyped-def]
            seen.append(list(running))
            return super().with_running(seen[-1])

    snap = _one_host_held_by_one_job()
    snap = dataclasses.replace(snap, worked={"r1": 500.0})
    estimate(snap, Policy(), 1000.0, Spy([]), users={"r1": "ann"})
    assert seen == [[("a", "ann", "", 8, 1500.0)]]


def test_no_history_gives_a_default_runtime() -> None:
    f = RuntimeForecast([])
    assert len(f) == 0
    assert f.remaining("a", "", "debug", 1, 0.0, 0.5) == DEFAULT_RUNTIME_S


# ------------------------------------------------------------------ forward simulation


def test_a_job_that_fits_now_starts_now() -> None:
    w = job("j1", "a", 4, submit=0.0)
    snap = Snapshot(hosts=hosts(1), running=[], pending=pending(w), tree=tree(a=1))
    assert forward_starts(snap, Policy(), 500.0, fixed(H)) == {"j1": 500.0}


def _one_host_held_by_one_job() -> Snapshot:
    """An 8-GPU host held by r1 (started at 0, protected for an hour) and j1, an 8-GPU
    job of the same project, waiting for it."""
    holder = job("r1", "a", 8)
    return Snapshot(
        hosts=hosts(1),
        running=[run(holder, "h0", tuple(range(8)), 0.0)],
        pending=pending(job("j1", "a", 8, submit=10.0)),
        tree=tree(a=1),
    )


def test_a_job_waits_for_the_forecast_end_of_the_job_holding_its_gpus() -> None:
    snap = _one_host_held_by_one_job()
    # the holder has run 1000 s of its 3000 s forecast: 2000 s left
    assert forward_starts(snap, Policy(), 1000.0, fixed(3000.0)) == {"j1": 3000.0}


def test_a_restarted_job_is_forecast_from_all_the_work_it_has_done() -> None:
    """A requeued job restarted at 0 s that saved 2000 s in earlier runs has 1000 s
    left of its 3000 s, not 3000 s (`Snapshot.worked`); a requeued pending job too."""
    snap = _one_host_held_by_one_job()
    restarted = dataclasses.replace(snap, worked={"r1": 2000.0})
    assert forward_starts(snap, Policy(), 0.0, fixed(3000.0)) == {"j1": 3000.0}
    assert forward_starts(restarted, Policy(), 0.0, fixed(3000.0)) == {"j1": 1000.0}
    first, second = job("q1", "a", 8, submit=0.0), job("q2", "a", 8, submit=5.0)
    queue = Snapshot(
        hosts=hosts(1),
        running=[],
        pending=pending(first, second),
        tree=tree(a=1),
        worked={"q1": 2500.0},
    )
    assert forward_starts(queue, Policy(), 10.0, fixed(3000.0)) == {"q1": 10.0, "q2": 510.0}


def test_a_job_refused_on_every_host_starts_when_its_avoidance_lapses() -> None:
    """The cluster refused j1 on both free hosts: the live cycle keeps it off them until
    each avoidance lapses, so the ETA says the first lapse, not now (issue 25)."""
    w = job("j1", "a", 4, submit=0.0)
    snap = Snapshot(hosts=hosts(2), running=[], pending=pending(w), tree=tree(a=1))
    until = {"j1": {"h0": 500.0 + 2 * H, "h1": 500.0 + H}}
    for mode in ("fairshare", "fifo"):
        policy = Policy(mode=mode)
        start = forward_starts(snap, policy, 500.0, fixed(H), avoid_until=until)["j1"]
        # no sooner than the lapse, and within the run's relative precision of it
        assert 500.0 + H <= start <= 500.0 + H * (1 + REL_STEP)
        (est,) = estimate(snap, policy, 500.0, RuntimeForecast([]), avoid_until=until).values()
        assert est.start is not None and est.earliest is not None
        assert est.earliest >= 500.0 + H and est.start >= 500.0 + H


def test_a_job_refused_on_one_host_of_two_starts_now_on_the_other() -> None:
    w = job("j1", "a", 4, submit=0.0)
    busy = run(job("r1", "a", 4), "h1", (0, 1, 2, 3), 0.0)  # h1 is the best fit
    snap = Snapshot(hosts=hosts(2), running=[busy], pending=pending(w), tree=tree(a=1))
    until = {"j1": {"h1": 500.0 + 4 * H}}
    assert forward_starts(snap, Policy(), 500.0, fixed(10 * H), avoid_until=until) == {"j1": 500.0}


def test_a_lapsed_avoidance_changes_nothing_and_none_is_the_same_as_no_refusals() -> None:
    w = job("j1", "a", 8, submit=0.0)
    snap = _one_host_held_by_one_job()
    expected = forward_starts(snap, Policy(), 1000.0, fixed(3000.0))
    assert expected == {"j1": 3000.0}
    for until in ({}, {"j1": {"h0": 900.0}}, {"gone": {"h0": 5000.0}}):
        assert forward_starts(snap, Policy(), 1000.0, fixed(3000.0), avoid_until=until) == expected
    # refused on the host it waits for, until after that host frees: it starts at the lapse
    later = {"j1": {"h0": 4000.0}}
    assert forward_starts(snap, Policy(), 1000.0, fixed(3000.0), avoid_until=later) == {
        w.id: pytest.approx(4000.0, rel=REL_STEP)
    }


def test_a_snapshot_avoidance_without_an_end_holds_the_whole_run() -> None:
    w = job("j1", "a", 4, submit=0.0)
    snap = Snapshot(
        hosts=hosts(1),
        running=[],
        pending=pending(w),
        tree=tree(a=1),
        avoid={"j1": frozenset({"h0"})},
    )
    assert forward_starts(snap, Policy(), 0.0, fixed(H), horizon_s=10 * H) == {}


def test_jobs_ahead_in_the_queue_come_first() -> None:
    first = job("j1", "a", 8, submit=0.0)
    second = job("j2", "a", 8, submit=5.0)
    snap = Snapshot(hosts=hosts(1), running=[], pending=pending(first, second), tree=tree(a=1))
    starts = forward_starts(snap, Policy(), 10.0, fixed(600.0))
    assert starts == {"j1": 10.0, "j2": 610.0}


def _host_held_and_a_rival_due() -> tuple[Snapshot, Workload]:
    """One 8-GPU host held for an hour by project a, a's job j1 waiting for it, and
    project b's job b1 (b has no usage) expected 50 s later."""
    holder = job("r1", "a", 8, minrt=H)
    mine = job("j1", "a", 8, submit=0.0)
    theirs = job("b1", "b", 8, submit=50.0)
    snap = Snapshot(
        hosts=hosts(1),
        running=[run(holder, "h0", tuple(range(8)), 0.0)],
        pending=pending(mine),
        tree=tree(a=1, b=1),
        usage={"a": 1e6},
    )
    return snap, theirs


def test_expected_arrivals_of_an_underserved_project_go_first() -> None:
    snap, theirs = _host_held_and_a_rival_due()
    alone = forward_starts(snap, Policy(), 0.0, fixed(H), targets={"j1"})
    crowded = forward_starts(snap, Policy(), 0.0, fixed(H), targets={"j1"}, arrivals=[theirs])
    assert alone == {"j1": H}
    assert crowded == {"j1": 2 * H}


def test_repeat_arrivals_shifts_the_last_window() -> None:
    recent = [job("x", "a", submit=100.0), job("old", "a", submit=-10.0)]
    out = repeat_arrivals(recent, now=200.0, window_s=200.0)
    assert [(w.id, w.submit_s) for w in out] == [("x~next", 300.0)]


def test_averaged_arrivals_keep_the_mean_rate_of_the_past_windows_and_their_time_of_day() -> None:
    day = 86400.0
    now = 7 * day
    # a busy day (yesterday: 700 jobs) after six quiet ones (none): the average of the
    # seven is 100 a day, not the last day's 700
    recent = [job(f"y{i}", "a", submit=now - day + 60.0 * i) for i in range(700)]
    last_day = repeat_arrivals(recent, now, day)
    week = repeat_arrivals(recent, now, day, periods=7)
    assert len(last_day) == 700
    assert 60 <= len(week) <= 140
    assert all(now <= w.submit_s < now + day for w in week)
    # each keeps its time of day, and the choice is the same in every call
    assert all(
        w.submit_s == dict((r.id, r.submit_s) for r in recent)[w.id[:-5]] + day for w in week
    )
    assert week == repeat_arrivals(list(reversed(recent)), now, day, periods=7)[::-1]
    # jobs of three days back land in the next day too, at their own time of day
    older = [job(f"o{i}", "a", submit=now - 3 * day + 10.0 * i) for i in range(300)]
    kept = repeat_arrivals(older, now, day, periods=3)
    assert 60 <= len(kept) <= 140
    assert all(w.submit_s == now + 10.0 * int(w.id[1:-5]) for w in kept)
    # a cluster with three days of records averages those three, not seven
    young = repeat_arrivals(older, now, day, periods=7, since=now - 3 * day)
    assert young == kept


def test_the_busiest_past_window_comes_again_for_the_latest_start() -> None:
    day = 86400.0
    now = 3 * day
    quiet = [job("q", "a", 1, submit=now - day + 5.0)]  # yesterday: 1 GPU
    busy = [job(f"b{i}", "b", 8, submit=now - 2 * day + 100.0 + i) for i in range(3)]  # 24
    out = busiest_arrivals(quiet + busy, now, day, periods=3)
    assert sorted((w.id, w.submit_s) for w in out) == [
        (f"b{i}~next", now + 100.0 + i) for i in range(3)
    ]
    assert busiest_arrivals([], now, day, periods=3) == []


def test_the_latest_start_expects_the_busy_arrivals() -> None:
    snap, theirs = _host_held_and_a_rival_due()
    f = RuntimeForecast([("a", "", "", 8, H)] * 30 + [("b", "", "", 8, H)] * 30)
    calm = estimate(snap, Policy(), 0.0, f, targets={"j1"})["j1"]
    wary = estimate(snap, Policy(), 0.0, f, targets={"j1"}, busy_arrivals=[theirs])["j1"]
    assert calm.start == wary.start == calm.latest == H
    assert wary.latest == 2 * H  # b's job goes first in the busy case only


def test_baseline_books_the_queue_on_the_gpus_that_free_first() -> None:
    holder = job("r1", "a", 8, minrt=H)
    w1 = job("j1", "a", 4, submit=0.0)
    w2 = job("j2", "a", 8, submit=1.0)
    snap = Snapshot(
        hosts=hosts(2),
        running=[run(holder, "h0", tuple(range(8)), 0.0)],
        pending=pending(w1, w2),
        tree=tree(a=1),
    )
    starts = baseline_starts(snap, Policy(), 100.0, fixed(1000.0))
    # j1 and j2 both fit on h1 now; the engine starts j1 there; j2 waits for h0 at 1000
    # or h1 at 100 + 1000: the earlier is h0's
    assert starts["j1"] == 100.0
    assert starts["j2"] == 1000.0


def test_estimate_range_brackets_the_point() -> None:
    history = [("a", "", "", 8, float(s)) for s in range(600, 6600, 100)]
    f = RuntimeForecast(history)
    holder = job("r1", "a", 8, minrt=0.0)
    w = job("j1", "a", 8, submit=0.0, minrt=0.0)
    snap = Snapshot(
        hosts=hosts(1),
        running=[run(holder, "h0", tuple(range(8)), 0.0)],
        pending=pending(w),
        tree=tree(a=1),
    )
    est = estimate(snap, Policy(), 100.0, f)["j1"]
    assert est.earliest is not None and est.start is not None and est.latest is not None
    assert 100.0 < est.earliest < est.start < est.latest
    assert est.baseline_start == est.start  # one job, no preemption: the same answer


# ------------------------------------------------------------------ the middle run's spread


def _eight_running_and_four_waiting() -> tuple[Snapshot, RuntimeForecast, float]:
    """One 8-GPU host full of eight 1-GPU jobs of project a that all started at 0, four
    more of a's 1-GPU jobs waiting, and a history of 100 runtimes 60, 120, ... 6000 s
    (median 3030 s)."""
    running = [run(job(f"r{i}", "a"), "h0", (i,), 0.0) for i in range(8)]
    waiting = [job(f"j{i}", "a", submit=10.0 + i) for i in range(4)]
    snap = Snapshot(hosts=hosts(1), running=running, pending=pending(*waiting), tree=tree(a=1))
    f = RuntimeForecast([("a", "", "", 1, 60.0 * k) for k in range(1, 101)])
    return snap, f, f.remaining("a", "", "", 1, 0.0, 0.5)


def test_waiting_jobs_start_one_by_one_as_the_running_jobs_end_at_spread_times() -> None:
    snap, f, median = _eight_running_and_four_waiting()
    est = estimate(snap, Policy(), 0.0, f)
    starts = [est[f"j{i}"].start for i in range(4)]
    assert all(s is not None for s in starts)
    # the first of eight running jobs ends well before the median runtime: the first
    # waiting job starts then, each next one when the next running job ends
    assert starts == sorted(starts) and len(set(starts)) == 4
    assert starts[0] < 0.6 * median and starts[3] < median
    for i in range(4):  # the range still spans all short and all long runtimes
        e = est[f"j{i}"]
        assert e.earliest is not None and e.latest is not None
        assert e.earliest <= e.start <= e.latest  # type: ignore[operator]
    # every job at its median (spread 0, the model before): all four at the median
    flat = estimate(snap, Policy(), 0.0, f, spread=0.0)
    assert {flat[f"j{i}"].start for i in range(4)} == {median}


def test_a_job_that_waits_for_one_running_job_expects_its_median_end() -> None:
    snap = _one_host_held_by_one_job()
    f = RuntimeForecast([("a", "", "", 8, 60.0 * k) for k in range(1, 101)])
    est = estimate(snap, Policy(), 100.0, f)["j1"]
    # the only running job takes the first quantile of the sequence: the median itself
    assert est.start == f.remaining("a", "", "", 8, 100.0, 0.5) + 100.0


def test_kept_spread_points_stay_and_new_jobs_take_the_lowest_free_ones() -> None:
    ids = [f"r{i}" for i in range(6)]
    fresh = spread_points(ids, {})
    assert sorted(fresh.values()) == list(range(1, 7))  # 1..n, in an order fixed by hashes
    assert spread_points(reversed(ids), {}) == fresh
    # r2 ended and n1 started: the others keep their points, n1 takes r2's
    later = spread_points([*(i for i in ids if i != "r2"), "n1"], fresh)
    assert {i: later[i] for i in ids if i != "r2"} == {i: fresh[i] for i in ids if i != "r2"}
    assert later["n1"] == fresh["r2"]


def _one_big_job_behind_two_holders_and_four_small_runs(gone: str | None) -> Snapshot:
    """j (8 GPUs, project a) waits for h0 or h1 (each held by an 8-GPU job of a); the
    4-GPU host h2 runs four 1-GPU jobs of b (without `gone`), which j can never use."""
    small = [f"x{i}" for i in range(4) if f"x{i}" != gone]
    running = [
        run(job("ra", "a", 8), "h0", tuple(range(8)), 0.0),
        run(job("rb", "a", 8), "h1", tuple(range(8)), 0.0),
        *(run(job(x, "b", 1), "h2", (int(x[1]),), 0.0) for x in small),
    ]
    return Snapshot(
        hosts=[*hosts(2), Host("h2", 4)],
        running=running,
        pending=pending(job("j", "a", 8, submit=10.0)),
        tree=tree(a=1, b=1),
    )


def test_a_small_job_ending_elsewhere_leaves_a_waiting_jobs_estimate_alone() -> None:
    """Two consecutive refreshes, one of b's 1-GPU jobs on h2 ended between them:
    nothing j waits for changed. With the running jobs' spread points kept (as the
    live service keeps them), j's estimate is the same; numbered afresh, the jobs
    hashed after the one that ended moved one point on, the holders' quantiles with
    them, and j's estimate jumped (issue 25)."""
    f = RuntimeForecast(
        [(p, "", "", g, 60.0 * k) for k in range(1, 101) for p, g in (("a", 8), ("b", 1))]
    )
    first = _one_big_job_behind_two_holders_and_four_small_runs(None)
    kept = spread_points((rw.workload.id for rw in first.running), {})
    before = estimate(first, Policy(), 100.0, f, points=kept)["j"]
    moved = 0
    for gone in ("x0", "x1", "x2", "x3"):
        snap = _one_big_job_behind_two_holders_and_four_small_runs(gone)
        points = spread_points((rw.workload.id for rw in snap.running), kept)
        assert estimate(snap, Policy(), 100.0, f, points=points)["j"] == before
        moved += estimate(snap, Policy(), 100.0, f)["j"].start != before.start
    assert moved  # numbered afresh, some end moved it


@settings(max_examples=80, deadline=None)
@given(st.floats(0.02, 0.98), st.floats(0.05, 1.0), st.integers(1, 6))
def test_spread_quantiles_are_stratified_around_the_center(center, spread, k) -> None:
    n = 2**k - 1
    qs = spread_quantiles(center, spread, 1, n)
    assert qs[0] == center  # the first job: the center
    assert all(0.0 < q < 1.0 for q in qs)
    # n = 2^k - 1 points: as many below the center as above it
    assert sum(q < center for q in qs) == sum(q > center for q in qs) == (n - 1) // 2
    # consecutive calls continue the same sequence (the run asks job by job)
    assert qs == [spread_quantiles(center, spread, i, 1)[0] for i in range(1, n + 1)]
    # a wider spread moves every point further from the center, 0 moves none
    wider = spread_quantiles(center, min(1.0, spread + 0.25), 1, n)
    assert all(abs(w - center) >= abs(q - center) - 1e-12 for q, w in zip(qs, wider, strict=True))
    assert spread_quantiles(center, 0.0, 1, n) == [center] * n


def test_full_spread_around_the_median_is_the_evenly_spaced_quantiles() -> None:
    qs = spread_quantiles(0.5, 1.0, 1, 15)
    assert sorted(round(q, 9) for q in qs) == [i / 16 for i in range(1, 16)]
    assert 0.0 < SPREAD < 1.0


@st.composite
def states(draw):
    n_hosts = draw(st.integers(1, 3))
    hs = hosts(n_hosts)
    now = draw(st.floats(0.0, 10 * H))
    free = {h.name: list(range(8)) for h in hs}
    running = []
    for i in range(draw(st.integers(0, 6))):
        h = draw(st.sampled_from(hs)).name
        k = draw(st.sampled_from([1, 2, 4, 8]))
        if len(free[h]) < k:
            continue
        idx = tuple(free[h][:k])
        free[h] = free[h][k:]
        w = job(f"r{i}", draw(st.sampled_from("ab")), k, minrt=draw(st.sampled_from([0.0, H])))
        running.append(run(w, h, idx, draw(st.floats(0.0, now))))
    waiting = [
        job(
            f"p{i}",
            draw(st.sampled_from("ab")),
            draw(st.sampled_from([1, 2, 4, 8, 16])),
            submit=draw(st.floats(0.0, now)),
            minrt=draw(st.sampled_from([0.0, H])),
        )
        for i in range(draw(st.integers(1, 8)))
    ]
    usage = {"a": draw(st.floats(0.0, 1e6)), "b": draw(st.floats(0.0, 1e6))}
    snap = Snapshot(hosts=hs, running=running, pending=pending(*waiting), tree=tree(a=1, b=2))
    snap = Snapshot(
        hosts=snap.hosts, running=running, pending=snap.pending, tree=snap.tree, usage=usage
    )
    history = [
        ("a", "", "", g, draw(st.floats(1.0, 10 * H)))
        for g in (1, 2, 4, 8)
        for _ in range(draw(st.integers(0, 25)))
    ]
    return snap, now, RuntimeForecast(history)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(states())
def test_an_eta_is_never_before_now_and_its_range_holds_it(state) -> None:
    snap, now, forecast = state
    for wid, est in estimate(snap, Policy(), now, forecast).items():
        for t in (est.start, est.earliest, est.latest, est.baseline_start):
            assert t is None or t >= now, wid
        if est.start is not None:
            assert est.earliest is not None and est.earliest <= est.start
            if est.latest is not None:
                assert est.start <= est.latest


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(states())
def test_what_the_engine_starts_now_has_eta_now(state) -> None:
    from scheduler.core.engine import plan

    snap, now, forecast = state
    started = {s.workload_id for s in plan(snap, Policy(), now).starts}
    ests = estimate(snap, Policy(), now, forecast)
    for wid in started:
        assert ests[wid].start == now
        assert ests[wid].earliest == now


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(st.floats(-10 * H, 10 * H), max_size=60),
    st.floats(0.0, 10 * H),
    st.sampled_from([H, 6 * H]),
    st.integers(1, 8),
    st.none() | st.floats(-20 * H, 10 * H),
)
def test_expected_arrivals_come_in_the_next_window_from_whole_windows_back(
    submits, now, window, periods, since
) -> None:
    recent = [job(f"j{i}", "ab"[i % 2], 1 + i % 8, submit=t) for i, t in enumerate(submits)]
    by_id = {w.id: w for w in recent}
    for out in (
        repeat_arrivals(recent, now, window, periods, since=since),
        busiest_arrivals(recent, now, window, periods),
    ):
        assert len({w.id for w in out}) == len(out)
        for w in out:
            assert now - 1e-6 <= w.submit_s <= now + window + 1e-6  # float rounding aside
            original = by_id[w.id.removesuffix("~next")]
            shift = (w.submit_s - original.submit_s) / window
            assert abs(shift - round(shift)) < 1e-6 and 1 <= round(shift) <= periods
            assert (w.project, w.gpus) == (original.project, original.gpus)
    # one window: every job of it comes again, none thinned
    one = repeat_arrivals(recent, now, window)
    # (its age in (0, window], as `_windows_back` computes it: `now - window <= t` can
    # round the other way)
    assert len(one) == sum(1 for t in submits if 0 < now - t <= window)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(states(), st.lists(st.tuples(st.floats(0.0, 4 * H), st.sampled_from([1, 8])), max_size=6))
def test_expected_and_busy_arrivals_keep_every_eta_inside_its_range(state, later) -> None:
    snap, now, forecast = state
    arrivals = [job(f"x{i}~next", "b", g, submit=now + dt) for i, (dt, g) in enumerate(later)]
    busy = arrivals + [job("y~next", "b", 8, submit=now + 1.0)]
    for est in estimate(
        snap, Policy(), now, forecast, arrivals=arrivals, busy_arrivals=busy
    ).values():
        if est.start is not None:
            assert est.earliest is not None and now <= est.earliest <= est.start
            assert est.latest is None or est.start <= est.latest


# ------------------------------------------------------------------ the replay's probe


def test_the_replay_probe_sees_a_job_pending_at_its_submission() -> None:
    cluster = ClusterSpec("c", (HostSpec("h0", 8),))
    jobs = [
        TraceJob("j1", "a", "", 0.0, 8, 1000.0, 0.0, False, 0, "training"),
        TraceJob("j2", "a", "", 10.0, 8, 500.0, 0.0, False, 0, "training"),
    ]
    seen = {}

    def probe(now, ids, snapshot):
        seen[tuple(ids)] = (
            now,
            [w.id for v in snapshot.pending.values() for w in v],
            [r.workload.id for r in snapshot.running],
        )

    result = simulate(cluster, tree(a=1), jobs, SimConfig(), probe=(frozenset({"j2"}), probe))
    assert seen == {("j2",): (10.0, ["j2"], ["j1"])}
    j2 = next(o for o in result.jobs if o.job_id == "j2")
    assert j2.waits_s == [990.0]


def test_the_replay_probe_sees_the_work_a_requeued_job_saved() -> None:
    """Unallocated j1 (resumable, 5000 s) runs from 0 s; allocated j2 preempts it at
    1000 s, when it has saved one 600 s checkpoint; at j3's arrival the probe sees the
    600 s j1 saved (`Snapshot.worked`), which its forecast counts as run."""
    cluster = ClusterSpec("c", (HostSpec("h0", 8),))
    jobs = [
        TraceJob("j1", "a", "", 0.0, 8, 5000.0, 0.0, True, 0, "sweep"),
        TraceJob("j2", "a", "", 1000.0, 8, 500.0, 100.0, False, 0, "training"),
        TraceJob("j3", "a", "", 1200.0, 8, 500.0, 100.0, False, 0, "training"),
    ]
    seen = {}

    def probe(now, ids, snapshot):
        seen[now] = dict(snapshot.worked)

    config = SimConfig(checkpoint_interval_s=600.0, restart_overhead_s=0.0)
    simulate(cluster, tree(a=1), jobs, config, probe=(frozenset({"j3"}), probe))
    assert seen == {1200.0: {"j1": 600.0}}


# ---------------------------------------------------------------- a steady shown start


def _est(start, lo, hi):
    return Estimate(start=start, earliest=lo, latest=hi, baseline_start=None)


def test_the_shown_start_stays_while_the_new_range_holds_it() -> None:
    shown = steady(_est(500.0, 400.0, 700.0), _est(560.0, 450.0, 800.0), now=100.0)
    assert (shown.start, shown.earliest, shown.latest) == (500.0, 450.0, 800.0)
    assert not moved_beyond_range(_est(500.0, 400.0, 700.0), shown)


def test_the_shown_start_moves_when_the_new_range_leaves_it_or_it_passed() -> None:
    out_of_range = steady(_est(500.0, 400.0, 700.0), _est(1500.0, 1200.0, 1800.0), now=100.0)
    assert out_of_range.start == 1500.0
    assert moved_beyond_range(_est(500.0, 400.0, 700.0), out_of_range)  # 1000 s > 300 s wide
    passed = steady(_est(500.0, 400.0, 700.0), _est(650.0, 450.0, 800.0), now=600.0)
    assert passed.start == 650.0  # still in range, but no longer ahead
    assert not moved_beyond_range(_est(500.0, 400.0, 700.0), passed)


@given(
    st.lists(
        st.tuples(st.floats(0, 1e5), st.floats(0, 1e4), st.floats(0, 1e4), st.floats(0, 50.0)),
        min_size=1,
        max_size=30,
    )
)
def test_a_steady_start_is_always_inside_the_latest_range_and_ahead(runs) -> None:
    """Whatever the sequence of fresh estimates, the shown start lies in the fresh range
    and is never a time that already passed unless the fresh start is."""
    shown, now = None, 0.0
    for mid, below, above, step in runs:
        now += step
        fresh = _est(now + mid, now + mid - below, now + mid + above)
        shown = steady(shown, fresh, now)
        assert fresh.earliest <= shown.start <= fresh.latest
        assert shown.start >= now
        assert (shown.earliest, shown.latest) == (fresh.earliest, fresh.latest)


# ---------------------------------------------------------------- a calibrated range


@given(
    st.lists(
        st.tuples(st.floats(0, 1e4), st.floats(0, 1e4), st.floats(0, 1e4), st.floats(0, 3e4)),
        min_size=0,
        max_size=80,
    )
)
def test_the_widening_puts_the_coverage_share_of_known_starts_inside_their_ranges(raw) -> None:
    records = [(0.0, mid, mid - below, mid + above, real) for mid, below, above, real in raw]
    widening = range_widening(records)
    if len(records) < CALIBRATION_MIN:
        assert widening == 0.0
        return
    inside = 0
    for at, mid, lo, hi, real in records:
        est = widened(_est(mid, lo, hi), at, widening)
        inside += est.earliest - 1e-6 <= real <= est.latest + 1e-6 or (
            real < est.earliest and est.earliest == at  # never before the time stated
        )
    assert inside >= RANGE_COVERAGE * len(records)


def test_no_widening_while_the_known_starts_fell_inside() -> None:
    records = [(0.0, 100.0, 50.0, 150.0, 120.0)] * CALIBRATION_MIN
    assert range_widening(records) == 0.0
    assert widened(_est(100.0, 50.0, 150.0), 0.0, 0.0) == _est(100.0, 50.0, 150.0)
