"""The rules of a run that holds GPUs (`scheduler.core.engine.runs`), each at its
boundaries: the values the engine, the simulator and the ETA read.

Written for the mutants that survived the engine's and the simulator's tests
(`tools/mutants.py`, docs/testing.md "How the suite was checked"): a checkpoint that
dropped a run's explicit protection, an unallocated run protected forever, a checkpoint
time off by its arithmetic, a 1 s interval treated as none."""

from __future__ import annotations

import math

import pytest

from scheduler.core.engine.runs import (
    checkpointed,
    idle_reclaimable,
    last_checkpoint_s,
    protected_until,
    saved_work_s,
)
from scheduler.core.engine.types import Placement, RunningWorkload, Workload

H = 3600.0


def running(
    *, allocated: bool = True, protected_until_s=None, idle_since_s=None
) -> RunningWorkload:
    return RunningWorkload(
        workload=Workload("j", "a", 2, 0.0, min_runtime_s=2 * H, resumable=True),
        placements=(Placement("h0", (0, 1)),),
        started_s=10 * H,
        allocated=allocated,
        last_checkpoint_s=None,
        protected_until_s=protected_until_s,
        idle_since_s=idle_since_s,
    )


def test_an_unallocated_run_is_never_protected():
    """Unallocated work is preemptible at once: its protection ended before any time
    (-inf), whatever its minimum runtime; allocated work is protected for it (at most the
    cap) from its start."""
    assert protected_until(running(allocated=False), cap=4 * H) == -math.inf
    assert protected_until(running(), cap=4 * H) == 12 * H
    assert protected_until(running(), cap=1 * H) == 11 * H


def test_a_checkpoint_keeps_the_runs_explicit_protection_and_idle_time():
    """Recording a checkpoint changes the run's last save only: a holder the engine must
    leave alone (`protected_until_s`) stays protected, and an idle run stays idle since
    the same time (else a checkpoint would make a stopping run preemptible, or restart
    its idle clock)."""
    rw = running(protected_until_s=30 * H, idle_since_s=11 * H)
    saved = checkpointed(rw, 11.5 * H)
    assert saved.last_checkpoint_s == 11.5 * H
    assert saved.protected_until_s == 30 * H
    assert saved.idle_since_s == 11 * H
    assert (saved.workload, saved.placements, saved.started_s, saved.allocated) == (
        rw.workload,
        rw.placements,
        rw.started_s,
        rw.allocated,
    )
    assert protected_until(saved, cap=4 * H) == 30 * H


@pytest.mark.parametrize(
    ("now", "interval", "expected"),
    [
        (100.0 + 59.0, 60.0, None),  # before the first checkpoint
        (100.0 + 60.0, 60.0, 160.0),  # the first, exactly at one interval
        (100.0 + 150.0, 60.0, 220.0),  # the second: start + 2 intervals
        (100.0 + 2.5, 1.0, 102.0),  # a 1 s interval is an interval
        (100.0 + 500.0, 0.0, None),  # no checkpoints at all
        (100.0, 60.0, None),  # not started yet
        (40.0, 60.0, None),  # a start in the future
    ],
)
def test_last_checkpoint_is_the_last_whole_interval_since_the_start(now, interval, expected):
    """A resumable run saves every `interval_s` from its start: its last save is the
    start plus the whole intervals run so far, None before the first one or when it does
    not checkpoint (interval 0)."""
    assert last_checkpoint_s(100.0, now, interval) == expected


@pytest.mark.parametrize(
    ("ran", "interval", "expected"),
    [
        (150.0, 60.0, 120.0),
        (59.0, 60.0, 0.0),
        (2.5, 1.0, 2.0),  # a 1 s interval is an interval
        (0.5, 0.25, 0.5),  # sub-second runs save too
        (500.0, 0.0, 0.0),  # no checkpoints: nothing saved
        (0.0, 60.0, 0.0),
    ],
)
def test_saved_work_is_the_whole_intervals_run(ran, interval, expected):
    """The work a preempted resumable run keeps: its run time rounded down to whole
    checkpoint intervals; nothing without checkpoints or without a run."""
    assert saved_work_s(ran, interval) == expected


def test_a_run_idle_exactly_the_reclaim_time_is_reclaimable():
    """Idle reclaim takes a run idle for at least `after_s`: at exactly `after_s` it is a
    candidate, a second earlier it is not; never while it is not idle or reclaim is off."""
    rw = running(idle_since_s=10 * H)
    assert idle_reclaimable(rw, 10 * H + 1800.0, 1800.0)
    assert not idle_reclaimable(rw, 10 * H + 1799.0, 1800.0)
    assert not idle_reclaimable(rw, 20 * H, None)
    assert not idle_reclaimable(running(), 20 * H, 1800.0)
