"""Reservation admission (`hold_times`, `Policy.reservation_admit_s`): hosts held for a
job that waits for work it may not preempt admit allocated jobs it may preempt whose
protection ends within the bound; nothing else but unallocated backfill."""

from __future__ import annotations

from scheduler.core.engine import BudgetNode
from scheduler.core.engine.hold_times import admit_until

from .helpers import H, apply_plan, cycle, hosts, job, pending, run, snap, tree

NOW = 100 * H
INF = float("inf")


def _held_cluster(**policy):
    # big ranks first, but charged its 16 GPUs x 1 h it would rank below mid (16 h of
    # usage against mid's 10 h): mid's work past its protection is not its to preempt,
    # so its hosts are usable at no foreseeable time. low stays below big either way.
    t = tree(big=1, mid=1, low=1)
    usage = {"big": 0.0, "mid": 10 * H, "low": 200 * H}
    running = [
        run(job("m0", "mid", 8, minrt=H), "h0", tuple(range(8)), NOW - 2 * H),
        run(job("m1", "mid", 4, minrt=H), "h1", (0, 1, 2, 3), NOW - 2 * H),
    ]
    p = pending(
        job("big", "big", 16, minrt=H),
        job("mid2", "mid", 2, minrt=0.5 * H, submit=1),  # big may not preempt mid
        job("fits", "low", 2, minrt=0.5 * H, submit=2),  # big may preempt it in 30 min
        job("long", "low", 2, minrt=2 * H, submit=3),  # protected beyond the bound
        job("free", "low", 2, minrt=0, submit=4),  # unallocated backfill
    )
    return cycle(snap(hosts(2), running, p, t, usage), NOW, **policy)


def test_a_hold_usable_at_no_known_time_admits_short_protected_work_it_may_preempt():
    out = _held_cluster()
    (res,) = out.reservations
    assert res.workload_id == "big" and "may not preempt" in res.reason
    started = {s.workload_id: s for s in out.starts}
    assert "fits" in started and started["fits"].placements[0].host == "h1"
    assert "long" not in started and "mid2" not in started and "big" not in started
    assert not out.stops  # nobody's protection is touched


def test_without_admission_only_unallocated_work_uses_the_held_hosts():
    out = _held_cluster(reservation_admit_s=0.0)
    started = {s.workload_id for s in out.starts}
    assert "fits" not in started and "long" not in started and "mid2" not in started
    assert "free" in started


def test_admit_until_is_the_usable_time_or_the_bound_from_now():
    assert admit_until(NOW + H, NOW, 3600.0) == NOW + H  # foreseeable: unchanged
    assert admit_until(INF, NOW, 3600.0) == NOW + 3600.0
    assert admit_until(INF, NOW, 0.0) == -INF  # the rule before: none


def _floor_cluster():
    # big ranks first and, charged its 16 GPUs x 1 h, below mid: mid's work holds its
    # hosts at no foreseeable time. Fair Tree still puts big above low (low's branch
    # is charged hog's usage), but low has used 2% of its entitled share against big's
    # 13% once charged: a low job started now lands on low's share floor, which big may
    # not take (more than `MARGIN_PCT` points better served).
    t = BudgetNode(
        "root",
        children=(
            BudgetNode("big", 2),
            BudgetNode("mid", 2),
            BudgetNode("branch", 2, (BudgetNode("low", 1), BudgetNode("hog", 1))),
        ),
    )
    usage = {"big": 100 * H, "mid": 110 * H, "low": 10 * H, "hog": 2000 * H}
    running = {
        "m0": run(job("m0", "mid", 8, minrt=H), "h0", tuple(range(8)), NOW - 2 * H),
        "m1": run(job("m1", "mid", 4, minrt=H), "h1", (0, 1, 2, 3), NOW - 2 * H),
    }
    waiting = pending(
        job("big", "big", 16, minrt=H),
        job("fits", "low", 2, minrt=0.5 * H, submit=1),
    )
    return t, usage, running, waiting


def test_a_job_that_would_land_on_its_share_floor_is_not_admitted_so_the_bound_holds():
    t, usage, running, waiting = _floor_cluster()
    out = cycle(snap(hosts(2), running.values(), waiting, t, usage), NOW, share_floor=True)
    (res,) = out.reservations
    assert res.workload_id == "big" and "may not preempt" in res.reason
    apply_plan(out, running, waiting, NOW)
    # mid's work ends; whatever the held hosts admitted is past its protection within
    # the bound: the reserved job starts then, taking it if it must
    running.pop("m0")
    running.pop("m1")
    later = NOW + 3600.0 + 60.0
    out2 = cycle(snap(hosts(2), running.values(), waiting, t, usage), later, share_floor=True)
    assert "big" in {s.workload_id for s in out2.starts}


def test_without_the_share_floor_the_same_job_is_admitted():
    t, usage, running, waiting = _floor_cluster()
    out = cycle(snap(hosts(2), running.values(), waiting, t, usage), NOW, share_floor=False)
    started = {s.workload_id: s for s in out.starts}
    assert "fits" in started and started["fits"].placements[0].host == "h1"
