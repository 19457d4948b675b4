"""Hypothesis invariants of fair-share cycles on crowded clusters, with generators built
to reach the decisions that matter (and a check that they did): fair-share,
unallocated and priority preemption, whole-host jobs over several hosts, the 8 h cap
on protection, and checkpoints.

Invariants checked on every example:
- every victim's preemptor starts in the same plan;
- no preemption cycle: after a fair-share preemption (the preemptor's project charged
  for what it started so far in the cycle), the victim's project does not rank above
  the preemptor's, so it could not preempt back at once;
- nothing inside its protection (min runtime, capped at 8 h) is stopped;
- a job larger than one host gets whole hosts of one size, all of them;
- the work a stop says is lost is what was run since the last checkpoint;
- the share floor: a fair-share preemption takes a job of a project below 100% of its
  entitled share over the window while the GPUs of its older allocated jobs on
  healthy hosts are below its entitled share of the healthy GPUs (so a gang larger
  than its project's share is not preempted again and again) only for a project
  whose usage relative to its share, charged for what it started, stays below the
  victim's.
"""

from __future__ import annotations

from collections import Counter

from hypothesis import HealthCheck, given, settings

from scheduler.core.engine import Policy, Snapshot
from tests.core.engine.crowded import CAP, check_plan, crowded


def test_crowded_cycles_keep_every_invariant_and_reach_every_case():
    seen: Counter[str] = Counter()

    @settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck))
    @given(crowded())
    def check(s: Snapshot) -> None:
        check_plan(s, seen)

    check()
    # The generator reaches these on purpose (each in well over 5% of the examples).
    for case in (
        "stop fair_share",
        "stop unallocated",
        "stop priority",
        "multi-host start",
        "preempted thanks to the 8 h cap",
        "victim with a checkpoint",
        "reservation",
    ):
        assert seen[case] >= 10, (case, dict(seen))


def test_crowded_cycles_with_the_share_floor_keep_every_invariant():
    """The same with the share floor on (`Policy.share_floor`): floor jobs that Fair Tree
    ranks below a waiting project are met, and taken only by projects further below
    their share."""
    seen: Counter[str] = Counter()
    policy = Policy(max_min_runtime_s=CAP, share_floor=True)

    @settings(max_examples=200, deadline=None, suppress_health_check=list(HealthCheck))
    @given(crowded())
    def check(s: Snapshot) -> None:
        check_plan(s, seen, policy)

    check()
    for case in ("floor job that fair share would rank below", "stop fair_share"):
        assert seen[case] >= 10, (case, dict(seen))
