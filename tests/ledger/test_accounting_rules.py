"""Occupancy accounting (`ledger.accounting`) at its boundaries: the split of one hour
into the occupancy buckets, entitlement without demand or share, the threshold of
`projects_at_95`, and the hourly ratio's cap.

Written for the mutants that survived the simulator's accounting tests
(`tools/mutants.py`, docs/testing.md "How the suite was checked"): `occupancy_hour`,
which the live ledger's hourly rollup calls, had no test of its own."""

from __future__ import annotations

import math

import pytest

from ledger.accounting import (
    HOUR_S,
    DemandSpan,
    EndReason,
    RunInterval,
    bucket_spans,
    capacity_hourly,
    entitlement_hourly,
    entitlement_summary,
    hour_count,
    occupancy_hour,
)


def hour(**kw):
    base = dict(
        capacity=16.0,
        healthy=16.0,
        down=0.0,
        draining_idle=0.0,
        allocated={},
        entitled={},
        unallocated=0.0,
        demand=0.0,
    )
    return occupancy_hour(**(base | kw))


def buckets(h) -> float:
    return math.fsum(
        [h.within_entitlement, h.borrowed, h.unallocated, h.idle_demand, h.idle, h.draining, h.down]
    )


def test_an_hour_splits_allocated_time_at_each_projects_entitlement():
    """Allocated GPU-time up to the project's entitlement is within, the rest borrowed;
    a project without an entitlement borrows all it ran; the buckets sum to capacity."""
    h = hour(allocated={"a": 6.0, "b": 3.0, "c": 1.0}, entitled={"a": 4.0, "b": 5.0}, demand=10.0)
    assert (h.within_entitlement, h.borrowed) == (7.0, 3.0)
    assert (h.capacity, h.healthy) == (16.0, 16.0)
    assert h.idle == 6.0 and h.idle_demand == 0.0
    assert buckets(h) == 16.0


def test_idle_time_is_idle_demand_up_to_the_work_that_waited():
    """Free GPU-time is idle demand up to the allocated demand that did not run (demand
    minus allocated), plain idle for the rest; never negative."""
    h = hour(
        allocated={"a": 4.0},
        entitled={"a": 4.0},
        unallocated=2.0,
        demand=7.0,
        down=2.0,
        draining_idle=1.0,
    )
    assert (h.idle_demand, h.idle, h.down, h.draining, h.unallocated) == (3.0, 4.0, 2.0, 1.0, 2.0)
    assert buckets(h) == 16.0
    crowded = hour(allocated={"a": 4.0}, entitled={"a": 4.0}, demand=40.0)
    assert (crowded.idle_demand, crowded.idle) == (12.0, 0.0)
    served = hour(allocated={"a": 4.0}, entitled={"a": 4.0}, demand=1.0)
    assert (served.idle_demand, served.idle) == (0.0, 12.0)


def test_less_than_a_gpu_hour_free_is_idle_not_taken_from_draining():
    """Free time under one GPU-hour is still free: it is idle, and draining keeps its
    time (only time over the capacity is taken out of draining and down)."""
    h = hour(allocated={"a": 12.5}, entitled={"a": 16.0}, draining_idle=3.0)
    assert (h.draining, h.idle, h.down) == (3.0, 0.5, 0.0)
    assert buckets(h) == 16.0


def test_runs_on_down_or_draining_hosts_come_out_of_draining_first_then_down():
    """When runs, down and draining time exceed the capacity (runs recorded on a host
    counted down or draining), the excess comes out of draining first, then out of down,
    so the buckets still sum to the capacity and none is negative."""
    h = hour(allocated={"a": 12.0}, entitled={"a": 16.0}, down=4.0, draining_idle=3.0)
    assert (h.draining, h.down, h.idle, h.idle_demand) == (0.0, 4.0, 0.0, 0.0)
    assert buckets(h) == 16.0
    h = hour(allocated={"a": 14.0}, entitled={"a": 16.0}, down=4.0, draining_idle=1.0)
    assert (h.draining, h.down, h.idle) == (0.0, 2.0, 0.0)
    assert buckets(h) == 16.0
    h = hour(allocated={"a": 10.0}, unallocated=2.0, down=4.0, draining_idle=3.0, demand=20.0)
    assert (h.draining, h.down, h.idle_demand, h.idle) == (0.0, 4.0, 0.0, 0.0)
    assert buckets(h) == 16.0


def test_hour_count_covers_a_partial_last_hour_and_nothing_for_an_empty_window():
    """One bucket per started hour of the window, wherever it starts; none for an empty
    or reversed window."""
    t0 = 1000 * HOUR_S
    assert hour_count(t0, t0) == 0
    assert hour_count(t0 + 10.0, t0 + 5.0) == 0
    assert hour_count(t0, t0 + 1.0) == 1
    assert hour_count(t0, t0 + HOUR_S) == 1
    assert hour_count(t0, t0 + HOUR_S + 1.0) == 2


def test_spans_are_clipped_to_the_window_and_weighted():
    """A span before the window starts counts from its start, a zero-weight or empty
    span not at all (and does not stop the spans after it); the weight multiplies the
    overlap; hours count from the window's start."""
    t0 = 1000 * HOUR_S
    got = bucket_spans(
        [
            ("b", 0.0, t0, t0 + HOUR_S),
            ("c", 3.0, t0 + 5.0, t0 + 5.0),
            ("a", 2.0, t0 - HOUR_S, t0 + 1.5 * HOUR_S),
        ],
        t0,
        t0 + 2 * HOUR_S,
    )
    assert got == {"a": [2.0, 1.0]}
    # a span inside the first of three hours stays in it
    assert bucket_spans(
        [("a", 1.0, t0 + 0.25 * HOUR_S, t0 + 0.75 * HOUR_S)], t0, t0 + 3 * HOUR_S
    ) == {"a": [0.5, 0.0, 0.0]}
    # a span over three hours: its middle hour is whole
    assert bucket_spans(
        [("a", 1.0, t0 + 0.5 * HOUR_S, t0 + 2.5 * HOUR_S)], t0, t0 + 3 * HOUR_S
    ) == {"a": [0.5, 1.0, 0.5]}


def test_capacity_before_the_first_step_is_zero():
    """Capacity counts from its first step; an hour before it had none."""
    assert capacity_hourly([(HOUR_S, 8)], 0.0, 2 * HOUR_S) == [0.0, 8.0]
    assert capacity_hourly([], 0.0, 2 * HOUR_S) == [0.0, 0.0]
    # each step holds until the next one
    assert capacity_hourly([(0.0, 8), (HOUR_S, 4), (2 * HOUR_S, 6)], 0.0, 3 * HOUR_S) == [
        8.0,
        4.0,
        6.0,
    ]


def test_a_project_without_share_or_demand_is_entitled_to_nothing():
    """Entitlement is min(share x capacity, demand) per hour; 0 for a project with no
    share (or a negative one) or no demand at all."""
    got = entitlement_hourly(
        {"a": 0.5, "b": 0.0, "c": -0.1, "d": 0.5},
        [10.0, 10.0],
        {"a": [2.0, 9.0], "b": [5.0, 5.0], "c": [5.0, 5.0]},
    )
    assert got == {"a": [2.0, 5.0], "b": [0.0, 0.0], "c": [0.0, 0.0], "d": [0.0, 0.0]}


def run(project: str, gpus: int, start: float, end: float, allocated: bool = True) -> RunInterval:
    return RunInterval(
        project, project, "train", gpus, ("h",), start, end, allocated, EndReason.COMPLETED
    )


def test_the_threshold_counts_a_project_exactly_at_it_and_the_hourly_ratio_is_capped():
    """`projects_at_95` counts a ratio of exactly 0.95; the hourly ratio is capped at 1
    and hour by hour while the ratio is not; the worst project is the lowest ratio; a project entitled to
    nothing has no ratio and is not the worst."""
    shares = {"a": 0.5, "b": 0.5, "z": 0.0}
    demand = [DemandSpan("a", 10, 0.0, 2 * HOUR_S), DemandSpan("b", 10, 0.0, 2 * HOUR_S)]
    runs = [
        run("a", 19, 0.0, 2 * HOUR_S),  # 38 of 20 entitled
        run("b", 19, 0.0, HOUR_S),  # 19 of 20: 0.95
    ]
    s = entitlement_summary(shares, runs, demand, [(0.0, 20)], 0.0, 2 * HOUR_S)
    a, b, z = s.projects["a"], s.projects["b"], s.projects["z"]
    assert (a.entitled_gpu_h, a.delivered_gpu_h, a.ratio, a.ratio_hourly) == (20.0, 38.0, 1.9, 1.0)
    # b ran 19 GPU-h in its first hour and none in its second: the hourly ratio does not
    # let the first hour's excess make up for the second
    assert b.ratio == pytest.approx(0.95) and b.ratio_hourly == pytest.approx(0.5)
    assert (z.ratio, z.ratio_hourly, z.entitled_gpu_h) == (None, None, 0.0)
    assert (s.worst_project, s.projects_at_95) == ("b", 2)
    assert s.worst == pytest.approx(0.95)
    assert s.overall == pytest.approx((20 + 19) / 40)


def test_a_summary_without_entitlement_has_no_ratios():
    """With nothing entitled (no demand), overall and worst are None, not 0 or an error."""
    s = entitlement_summary(
        {"a": 1.0}, [run("a", 4, 0.0, HOUR_S, allocated=False)], [], [(0.0, 8)], 0.0, HOUR_S
    )
    assert (s.overall, s.worst, s.worst_project, s.projects_at_95) == (None, None, None, 0)
    assert s.projects["a"].delivered_gpu_h == 0.0  # an unallocated run is charged to no one


def test_a_project_that_ran_nothing_or_is_not_in_the_shares_is_reported_as_it_is():
    """A project entitled to GPU-hours that ran nothing delivered 0 (ratio 0, hourly
    ratio 0); one that ran without a share is reported with nothing entitled and no
    ratio; a total entitlement below one GPU-hour still has an overall figure."""
    demand = [DemandSpan("a", 1, 0.0, HOUR_S), DemandSpan("b", 1, 0.0, HOUR_S)]
    s = entitlement_summary(
        {"a": 0.25, "b": 0.25},
        [run("b", 1, 0.0, HOUR_S), run("x", 2, 0.0, HOUR_S)],
        demand,
        [(0.0, 2)],
        0.0,
        HOUR_S,
    )
    a, b, x = s.projects["a"], s.projects["b"], s.projects["x"]
    assert (a.entitled_gpu_h, a.delivered_gpu_h, a.ratio, a.ratio_hourly) == (0.5, 0.0, 0.0, 0.0)
    assert (b.ratio, b.ratio_hourly) == (2.0, 1.0)
    assert (x.entitled_gpu_h, x.delivered_gpu_h, x.ratio, x.ratio_hourly) == (0.0, 2.0, None, None)
    assert s.overall == 0.5  # (0 + 0.5) of 1 entitled GPU-hour


def test_of_projects_with_the_same_ratio_the_first_listed_is_the_worst():
    """Ties for the worst ratio name the project listed first in the shares."""
    demand = [DemandSpan("b", 1, 0.0, HOUR_S), DemandSpan("a", 1, 0.0, HOUR_S)]
    s = entitlement_summary({"b": 0.5, "a": 0.5}, [], demand, [(0.0, 2)], 0.0, HOUR_S)
    assert (s.worst, s.worst_project) == (0.0, "b")
