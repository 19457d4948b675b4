"""The steady-state figures: occupancy bound (ideal schedule), time to share, warm-up
and trace-span windows. Every expected value is computed by hand in the docstrings."""

from __future__ import annotations

import math

import pytest

from ledger.accounting import DemandSpan, EndReason, RunInterval
from scheduler.core.engine.types import BudgetNode
from scheduler.core.sim.ideal import ideal_schedule
from scheduler.core.sim.model import ClusterSpec, HostSpec, JobOutcome, JobState, SimResult
from scheduler.core.sim.report import build_report, comparison_table
from scheduler.core.sim.time_to_share import ShareEpisode, share_episodes

H = 3600.0


# -- the ideal schedule -------------------------------------------------------------


def test_ideal_schedule_shares_the_cluster_in_proportion_to_gpus() -> None:
    """8 GPUs; A 4 GPUs x 2 h and B 8 GPUs x 1 h, both at 0.

    12 GPUs asked for on 8: every job runs at 2/3 speed. B's hour of work is done at
    1.5 h; then A runs alone at full speed, its remaining 2 - 1 = 1 h ends at 2.5 h.
    Busy 8 GPUs until 1.5 h, 4 until 2.5 h: 12 + 4 = 16 GPU-h = the work of A and B.
    """
    ideal = ideal_schedule([(0.0, 4, 2 * H), (0.0, 8, H)], [(0.0, 8)])
    assert ideal.busy == [(0.0, 8.0), (1.5 * H, 4.0), (2.5 * H, 0.0)]
    assert ideal.end_s == pytest.approx(2.5 * H)


def test_ideal_schedule_follows_capacity_and_idles_between_arrivals() -> None:
    """8 GPUs, 4 from 1 h on. J 8 GPUs x 2 h at 0: full speed for 1 h, then half speed
    for its last hour of work -> ends at 3 h. K 2 GPUs x 1 h at 5 h: 5 h to 6 h."""
    ideal = ideal_schedule([(0.0, 8, 2 * H), (5 * H, 2, H)], [(0.0, 8), (H, 4)])
    assert ideal.busy == [(0.0, 8.0), (H, 4.0), (3 * H, 0.0), (5 * H, 2.0), (6 * H, 0.0)]
    assert ideal.end_s == pytest.approx(6 * H)


def test_ideal_schedule_never_ends_without_capacity() -> None:
    ideal = ideal_schedule([(0.0, 1, H)], [(0.0, 8), (0.5 * H, 0)])
    assert ideal.busy == [(0.0, 1.0), (0.5 * H, 0.0)]
    assert math.isinf(ideal.end_s)


def test_ideal_schedule_skips_jobs_without_work() -> None:
    ideal = ideal_schedule([(0.0, 4, 0.0), (H, 0, H)], [(0.0, 8)])
    assert ideal.busy == []


# -- time to share ------------------------------------------------------------------

SHARES = {"A": 0.5, "B": 0.3}
CAP = [(0.0, 8.0)]  # A entitled to 4 GPUs, B to 2.4


def iv(project: str, gpus: int, start: float, end: float, allocated: bool = True) -> RunInterval:
    return RunInterval("x", project, "training", gpus, ("h0",), start, end, allocated,
                       EndReason.COMPLETED)  # fmt: skip


def test_a_job_started_on_arrival_takes_no_time_to_share() -> None:
    eps = share_episodes(SHARES, CAP, [DemandSpan("A", 4, 0, H)], [iv("A", 4, 0, H)])
    assert eps == [ShareEpisode("A", 0.0, 0.0)]


def test_time_to_share_ends_at_the_entitled_share_not_the_demand() -> None:
    """A asks for 8 GPUs at 0 and gets 2 at 1 h (2 < 4), 4 more at 2 h (6 >= min(8, 4))."""
    eps = share_episodes(
        SHARES,
        CAP,
        [DemandSpan("A", 2, 0, 5 * H), DemandSpan("A", 4, 0, 5 * H), DemandSpan("A", 2, 0, 5 * H)],
        [iv("A", 2, H, 5 * H), iv("A", 4, 2 * H, 5 * H)],
    )
    assert [(e.start_s, e.length_s) for e in eps] == [(0.0, 2 * H)]


def test_no_episode_when_the_project_already_runs_its_share() -> None:
    """A runs 4 GPUs (its share) from 0; a second job arriving at 1 h waits: no episode."""
    eps = share_episodes(
        SHARES,
        CAP,
        [DemandSpan("A", 4, 0, 3 * H), DemandSpan("A", 4, H, 3 * H)],
        [iv("A", 4, 0, 3 * H), iv("A", 4, 2 * H, 3 * H)],
    )
    assert [(e.start_s, e.length_s) for e in eps] == [(0.0, 0.0)]


def test_arrivals_during_an_open_episode_join_it() -> None:
    """Nothing runs; A 1 GPU arrives at 0 and 1 GPU at 0.5 h; both start at 1 h: one
    episode of 1 h (target min(2, 4) = 2)."""
    eps = share_episodes(
        SHARES,
        CAP,
        [DemandSpan("A", 1, 0, 2 * H), DemandSpan("A", 1, 0.5 * H, 2 * H)],
        [iv("A", 1, H, 2 * H), iv("A", 1, H, 2 * H)],
    )
    assert [(e.start_s, e.length_s) for e in eps] == [(0.0, H)]


def test_whole_jobs_must_reach_a_fractional_share() -> None:
    """B is entitled to 2.4 GPUs and asks for three 2-GPU jobs at 0: 2 running at 1 h is
    not its share, 4 at 3 h is."""
    eps = share_episodes(
        SHARES,
        CAP,
        [DemandSpan("B", 2, 0, 9 * H)] * 3,
        [iv("B", 2, H, 9 * H), iv("B", 2, 3 * H, 9 * H)],
    )
    assert [(e.start_s, e.length_s) for e in eps] == [(0.0, 3 * H)]


def test_unallocated_runs_do_not_count_and_open_episodes_are_kept_open() -> None:
    """A's job runs unallocated from 0 and is still there when the run ends at 2 h."""
    demand, runs = [DemandSpan("A", 4, 0, 2 * H)], [iv("A", 4, 0, 2 * H, allocated=False)]
    assert share_episodes(SHARES, CAP, demand, runs, end_s=2 * H) == [ShareEpisode("A", 0.0, None)]
    # had the job ended at 2 h, A would have been asking for nothing from then on
    assert share_episodes(SHARES, CAP, demand, runs) == [ShareEpisode("A", 0.0, 2 * H)]


def test_less_capacity_means_a_smaller_share_to_reach() -> None:
    """A runs 2 GPUs and asks for 6 at 0; capacity drops to 4 at 1 h: A's share is 2."""
    eps = share_episodes(
        SHARES,
        [(0.0, 8.0), (H, 4.0)],
        [DemandSpan("A", 2, 0, 5 * H), DemandSpan("A", 4, 0, 5 * H)],
        [iv("A", 2, 0, 5 * H)],
    )
    assert [(e.start_s, e.length_s) for e in eps] == [(0.0, H)]


def test_projects_without_a_share_have_no_episodes() -> None:
    assert share_episodes({"Z": 0.0}, CAP, [DemandSpan("Z", 1, 0, H)], []) == []


# -- the report's windows -----------------------------------------------------------

TREE = BudgetNode("org", 1, (BudgetNode("A", 1), BudgetNode("B", 1)))
ONE_HOST = ClusterSpec("c", (HostSpec("h0", 8),))


def cut_run() -> SimResult:
    """One host of 8 GPUs, cut off at 2.5 h.

    X (A, 8 GPUs, 1 h work) and Y (B, 8 GPUs, 1 h) arrive at 0; Z (A, 4 GPUs, 1 h) at 1 h.
    The run: X 0-1 h, nothing 1-1.5 h, Y 1.5-2.5 h; Z still pending at the cut.
    Occupancy over [0, 2.5 h]: 16 / 20 = 0.8.
    The ideal schedule: X and Y at half speed until 1 h (half done each); with Z 20 GPUs
    on 8, speed 0.4: X and Y finish at 1 + 0.5 / 0.4 = 2.25 h; Z has 0.5 h left at full
    speed -> 2.75 h. Busy 8 until 2.25 h, then 4. Over [0, 2.5 h]: 18 + 1 = 19 -> 0.95.
    Trace span [0, 1 h] (last submission): run 8 / 8, ideal 8 / 8.
    After a 1 h warm-up, [1 h, 2.5 h]: run 8 / 12, ideal (10 + 1) / 12.
    """
    jobs = [
        JobOutcome("X", "A", "training", 8, 600, 0, JobState.COMPLETED, H, [0.0], duration_s=H),
        JobOutcome(
            "Y", "B", "training", 8, 600, 0, JobState.RUNNING, None, [1.5 * H], duration_s=H
        ),  # fmt: skip
        JobOutcome(
            "Z", "A", "training", 4, 600, H, JobState.PENDING, None, [], 0, H, duration_s=H
        ),  # fmt: skip
    ]
    intervals = [
        RunInterval("X", "A", "training", 8, ("h0",), 0, H, True, EndReason.COMPLETED),
        RunInterval(
            "Y", "B", "training", 8, ("h0",), 1.5 * H, 2.5 * H, True, EndReason.RUNNING_AT_END
        ),  # fmt: skip
    ]
    return SimResult("fairshare", ONE_HOST, 0.0, 2.5 * H, intervals, jobs, [], [], [(0.0, 8)])


def test_occupancy_bound_and_trace_span_over_a_cut_run() -> None:
    rep = build_report(cut_run(), TREE)
    assert rep["occupancy"] == pytest.approx(0.8)
    assert rep["occupancy_bound"] == pytest.approx(0.95)
    assert rep["occupancy_of_bound"] == pytest.approx(0.8 / 0.95)
    span = rep["trace_span"]
    assert (span["start_s"], span["end_s"]) == (0.0, H)
    assert span["occupancy"] == pytest.approx(1.0) and span["occupancy_bound"] == pytest.approx(1)
    assert rep["last_submit_s"] == H and rep["ideal_end_s"] == pytest.approx(2.75 * H)
    assert "after_warmup" not in rep


def test_warmup_repeats_the_figures_without_the_first_days() -> None:
    """After 1 h: occupancy 8/12, bound 11/12; Y's wait began at 0 (left out); A's share
    episodes: X at 0 (0 s: left out), Z at 1 h (A runs 0 < 4, still open at the cut)."""
    rep = build_report(cut_run(), TREE, warmup_s=H)
    after = rep["after_warmup"]
    assert after["warmup_s"] == H and (after["start_s"], after["end_s"]) == (H, 2.5 * H)
    assert after["occupancy"] == pytest.approx(8 / 12)
    assert after["occupancy_bound"] == pytest.approx(11 / 12)
    assert after["wait_per_start_s"]["all"]["count"] == 0
    assert rep["wait_per_start_s"]["all"]["count"] == 2
    assert after["time_to_share"]["count"] == 0 and after["time_to_share"]["open_at_end"] == 1
    # the full-run figures are unchanged by the warm-up
    assert rep["occupancy"] == pytest.approx(0.8)
    assert rep["time_to_share"]["count"] == 2  # X at 0 (0 s) and Y at 0 (1.5 h)
    assert rep["time_to_share"]["max"] == pytest.approx(1.5 * H)
    assert rep["time_to_share"]["worst_project"] == "B"
    table = comparison_table({"fairshare": rep})
    assert "after 0.0416667 d: occupancy " in table and "occupancy / bound" in table
    days = next(line for line in table.splitlines() if "run / trace span / ideal end" in line)
    assert days.endswith(" 0.1 / 0.0 / 0.1 d |")


def test_no_bound_without_durations() -> None:
    res = cut_run()
    res.jobs[0].duration_s = None
    rep = build_report(res, TREE)
    assert rep["occupancy_bound"] is None and rep["occupancy_of_bound"] is None
    assert rep["occupancy"] == pytest.approx(0.8)
