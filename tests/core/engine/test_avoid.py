"""`Snapshot.avoid`: a job the cluster refused to start on a host is never placed,
preempted for or reserved there again while it is kept off it (scheduler.core.refusals)."""

from __future__ import annotations

import dataclasses

import pytest

from .helpers import H, cycle, hosts, job, pending, run, snap, tree


@pytest.mark.parametrize("mode", ["fairshare", "fifo", "priority"])
def test_a_job_kept_off_its_best_fit_host_starts_on_another(mode):
    t = tree(a=1)
    busy = run(job("r", "a", 4), "h0", (0, 1, 2, 3), 0.0)  # h0 is the best fit for 4 GPUs
    s = snap(hosts(2), [busy], pending(job("j", "a", 4)), t)
    (start,) = cycle(s, mode=mode).starts
    assert start.placements[0].host == "h0"
    (start,) = cycle(dataclasses.replace(s, avoid={"j": frozenset({"h0"})}), mode=mode).starts
    assert start.workload_id == "j"
    assert start.placements[0].host == "h1"


def test_a_job_kept_off_the_only_free_host_waits_and_the_next_one_starts_there():
    t = tree(a=1)
    busy = run(job("r", "a", 8), "h1", tuple(range(8)), 0.0)
    p = pending(job("j", "a", 2, submit=1), job("k", "a", 2, submit=2))
    s = snap(hosts(2), [busy], p, t, usage={})
    out = cycle(dataclasses.replace(s, avoid={"j": frozenset({"h0"})}))
    assert [(st.workload_id, st.placements[0].host) for st in out.starts] == [("k", "h0")]
    assert not out.stops


def test_no_preemption_for_a_job_on_a_host_it_is_kept_off():
    # b runs unallocated work on h0 (preemptible at once by allocated work); j of
    # project a would take it, but is kept off h0: nothing is stopped for it
    t = tree(a=1, b=1)
    victim = run(job("v", "b", 8, minrt=0.0), "h0", tuple(range(8)), 0.0)
    s = snap(hosts(1), [victim], pending(job("j", "a", 8)), t)
    out = cycle(s)
    assert [st.workload_id for st in out.stops] == ["v"]
    out = cycle(dataclasses.replace(s, avoid={"j": frozenset({"h0"})}))
    assert not out.stops
    assert not out.starts


def test_an_unknown_host_in_avoid_is_ignored():
    t = tree(a=1)
    s = snap(hosts(1), [], pending(job("j", "a", 1)), t)
    (start,) = cycle(dataclasses.replace(s, avoid={"j": frozenset({"gone"})})).starts
    assert start.placements[0].host == "h0"


def test_the_plan_is_unchanged_without_avoid():
    t = tree(a=1, b=2)
    p = pending(*(job(f"j{i}", "ab"[i % 2], 1 + i % 4, submit=i) for i in range(12)))
    s = snap(hosts(3), [], p, t)
    assert cycle(s) == cycle(dataclasses.replace(s, avoid={}))


@pytest.mark.parametrize("mode", ["fairshare", "priority"])
def test_a_job_kept_off_the_cheapest_preemption_host_preempts_on_the_next_cheapest(mode):
    # b runs unallocated work on both hosts; v0 on h0 has run for less time (the
    # cheapest to stop), v1 on h1 longer. j, kept off h0, preempts v1 on h1 instead
    # of waiting, and is never placed on h0 (b is over its 4-GPU limit in both).
    t = tree(a=3, b=1)
    v0 = run(job("v0", "b", 8, minrt=0.0), "h0", tuple(range(8)), 99 * H)
    v1 = run(job("v1", "b", 8, minrt=0.0), "h1", tuple(range(8)), 0.0)
    s = snap(hosts(2), [v0, v1], pending(job("j", "a", 8)), t)
    out = cycle(s, mode=mode)
    assert [st.workload_id for st in out.stops] == ["v0"]
    out = cycle(dataclasses.replace(s, avoid={"j": frozenset({"h0"})}), mode=mode)
    assert [st.workload_id for st in out.stops] == ["v1"]
    (start,) = out.starts
    assert (start.workload_id, start.placements[0].host) == ("j", "h1")


@pytest.mark.parametrize("mode", ["fairshare", "priority"])
def test_no_reservation_on_the_hosts_a_job_is_kept_off(mode):
    # j needs the whole cluster and is kept off every host: nothing is held for it, so
    # k, behind it, starts on the free hosts (it used to reserve all four and idle them)
    t = tree(a=3, b=1)
    s = snap(hosts(4), [], pending(job("j", "a", 32), job("k", "b", 8)), t)
    kept_off = dataclasses.replace(s, avoid={"j": frozenset({"h0", "h1", "h2", "h3"})})
    out = cycle(kept_off, mode=mode)
    assert [st.workload_id for st in out.starts] == ["k"]
    assert not out.reservations


def test_a_reservation_takes_other_hosts_than_those_a_job_is_kept_off():
    # j (two whole hosts) is kept off h0 and h1, free; h2 and h3 run b's protected work:
    # j holds h2 and h3 for when it ends, and k starts on a host j is kept off
    t = tree(a=3, b=1)
    busy = [run(job(f"r{h}", "b", 8), f"h{h}", tuple(range(8)), 100 * H - 60) for h in (2, 3)]
    s = snap(hosts(4), busy, pending(job("j", "a", 16), job("k", "b", 8)), t)
    out = cycle(dataclasses.replace(s, avoid={"j": frozenset({"h0", "h1"})}))
    (held,) = out.reservations
    assert (held.workload_id, sorted(held.hosts)) == ("j", ["h2", "h3"])
    (start,) = out.starts
    assert start.workload_id == "k" and start.placements[0].host in ("h0", "h1")
