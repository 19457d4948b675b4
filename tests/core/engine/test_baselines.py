"""The simulator's baselines run through the same engine."""

from __future__ import annotations

from scheduler.core.engine import StopReason

from .helpers import H, cycle, hosts, job, pending, run, snap, tree

NOW = 100 * H


def test_fifo_arrival_order_skips_what_does_not_fit_and_never_preempts():
    t = tree(a=1, b=1)
    busy = run(job("r", "b", 4, minrt=0), "h0", (0, 1, 2, 3), NOW - 60)
    p = pending(
        job("b8", "b", 8, submit=1, prio=9),
        job("a2", "a", 2, submit=2),
        job("a4", "a", 4, submit=0, prio=0),
        job("b1", "b", 1, submit=3),
    )
    out = cycle(snap(hosts(1), [busy], p, t), mode="fifo")
    assert out.stops == ()
    # a4 (oldest) takes the free half; b8 cannot fit; a2 and b1 find nothing left
    assert [s.workload_id for s in out.starts] == ["a4"]
    assert [q.workload_id for q in out.queue] == ["b8", "a2", "b1"]


def test_fifo_smaller_later_jobs_may_start():
    t = tree(a=1)
    p = pending(job("big", "a", 16, submit=0), job("small", "a", 2, submit=1))
    out = cycle(snap(hosts(1), [], p, t), mode="fifo")
    assert [s.workload_id for s in out.starts] == ["small"]


def test_static_confines_each_project_to_its_share():
    t = tree(a=3, b=1)  # a: 12 of 16 GPUs, b: 4
    p = pending(*(job(f"b{i}", "b", 2, submit=i) for i in range(4)), job("a8", "a", 8, submit=9))
    out = cycle(snap(hosts(2), [], p, t), mode="static")
    started = sorted(s.workload_id for s in out.starts)
    assert started == ["a8", "b0", "b1"]  # b stops at 4 GPUs although GPUs stay free
    assert out.stops == ()


def test_priority_in_limit_jobs_preempt_opportunistic_ones_only():
    t = tree(a=1, b=1)  # limits: 8 GPUs each on 2 hosts
    # b runs 16 GPUs: the first 8 (earliest) are inside its limit, the later 8 opportunistic
    inlim = run(job("b_in", "b", 8, minrt=0), "h0", tuple(range(8)), NOW - 5 * H)
    opp = run(job("b_opp", "b", 8, minrt=0), "h1", tuple(range(8)), NOW - H)
    out = cycle(snap(hosts(2), [inlim, opp], pending(job("a8", "a", 8)), t), mode="priority")
    assert [(s.workload_id, s.reason_code) for s in out.stops] == [("b_opp", StopReason.PRIORITY)]
    assert [s.workload_id for s in out.starts] == ["a8"]
    # the job it gives way to is named as a job, as every reason names one ("job a8")
    assert "gives way to job a8, which is inside project a's limit;" in out.stops[0].reason
    # a job beyond a's own limit cannot preempt anyone
    out = cycle(snap(hosts(2), [inlim, opp], pending(job("a16", "a", 16)), t), mode="priority")
    assert out.stops == () and out.starts == ()


def test_priority_opportunistic_start_when_free():
    t = tree(a=1, b=1)
    out = cycle(snap(hosts(2), [], pending(job("a16", "a", 16)), t), mode="priority")
    assert [s.workload_id for s in out.starts] == ["a16"]
    assert "opportunistically" in out.starts[0].reason


def test_unknown_mode_is_rejected():
    import pytest

    with pytest.raises(ValueError, match="unknown policy mode"):
        cycle(snap(hosts(1), [], {}, tree(a=1)), mode="lottery")


def test_priority_jobs_beyond_their_limit_wait_for_the_opportunistic_fill():
    t = tree(a=1, b=1)  # limits: 8 GPUs each on 2 hosts
    held = run(job("b_in", "b", 8, minrt=0), "h0", tuple(range(8)), NOW - H)
    # b's waiting jobs come first in priority order but are beyond its limit: the pass
    # leaves them out, starts a's job inside its limit, then fills what is left with b's
    p = pending(*(job(f"b{i}", "b", 4, submit=i) for i in range(3)), job("a4", "a", 4, submit=9))
    out = cycle(snap(hosts(2), [held], p, t), mode="priority")
    assert [s.workload_id for s in out.starts] == ["a4", "b0"]
    assert "inside project a's limit" in out.starts[0].reason
    assert "opportunistically" in out.starts[1].reason
    assert out.stops == ()


def test_static_unexplained_pass_starts_what_the_explained_one_does():
    t = tree(a=3, b=1)  # a: 12 of 16 GPUs, b: 4
    sizes = {"b2": 2, "b4": 4, "b4x": 4, "b1": 1, "b1y": 1, "b1z": 1}
    jobs = [job(k, "b", g, submit=i) for i, (k, g) in enumerate(sizes.items())]
    s = snap(hosts(2), [], pending(*jobs, job("a8", "a", 8, submit=9)), t)
    # once b2 runs, b's 4-GPU jobs are beyond its limit all pass; its 1-GPU jobs still fit
    explained = cycle(s, mode="static")
    unexplained = cycle(s, mode="static", explain_queue=False)
    assert [x.workload_id for x in unexplained.starts] == ["b2", "b1", "b1y", "a8"]
    assert unexplained.starts == explained.starts
    assert "at its static limit of 4 GPUs" in next(
        q.reason for q in explained.queue if q.workload_id == "b4"
    )
