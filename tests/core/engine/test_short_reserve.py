"""The fixed short-job reserve (`Policy.short_reserve_hosts`, `short_reserve_auto` off:
the helpers' `cycle` turns it off): hosts where no new allocated job
protected for longer than `short_job_max_s` starts, so that short jobs of any team,
however low it ranks, start within minutes by taking free GPUs or preempting the
unallocated backfill that fills those hosts when idle."""

from __future__ import annotations

from collections import Counter

from hypothesis import HealthCheck, given, settings

from scheduler.core.engine import Policy, Snapshot, StopReason
from scheduler.core.engine.explain import hosts_text
from tests.core.engine.crowded import (
    CAP,
    NOW,
    SHORT,
    check_plan,
    crowded_with_short_jobs,
    started_on,
)
from tests.core.engine.helpers import H, cycle, hosts, job, pending, run, snap, tree


def test_long_work_keeps_off_the_reserve_and_short_work_starts_there():
    long_jobs = [job(f"long{i}", "a", 8, minrt=H, submit=i) for i in range(3)]
    short = job("debug", "b", 8, minrt=10 * 60, submit=5)
    s = snap(hosts(3), [], pending(*long_jobs, short), tree(a=1, b=1), usage={"b": 100 * H})

    out = started_on(cycle(s, short_reserve_hosts=1))

    # the reserve is the highest-indexed host free of long work; project a ranks first
    assert out == {"long0": {"h0"}, "long1": {"h1"}, "debug": {"h2"}}
    # without the reserve, a's third long job takes the last host and the debug job waits
    assert set(started_on(cycle(s))) == {"long0", "long1", "long2"}


def test_a_low_ranked_short_job_preempts_the_backfill_on_the_reserve():
    long_run = run(job("trainer", "a", 8, minrt=4 * H), "h0", tuple(range(8)), started=NOW - H)
    sweep = run(job("sweep", "a", 8, minrt=0), "h1", tuple(range(8)), started=NOW - H)
    waiting = pending(job("long", "a", 8, minrt=H), job("debug", "b", 8, minrt=5 * 60))
    s = snap(hosts(2), [long_run, sweep], waiting, tree(a=1, b=1), usage={"b": 100 * H})

    with_reserve = cycle(s, NOW, short_reserve_hosts=1)
    assert started_on(with_reserve) == {"debug": {"h1"}}
    [stop] = with_reserve.stops
    assert (stop.workload_id, stop.reason_code, stop.for_workload_id) == (
        "sweep",
        StopReason.UNALLOCATED,
        "debug",
    )
    # what the reserve costs: a's long job would have taken the sweep's host first
    assert started_on(cycle(s, NOW)) == {"long": {"h1"}}


def test_the_reserve_stays_on_hosts_free_of_long_protected_work():
    busy = run(job("trainer", "a", 8, minrt=4 * H), "h2", tuple(range(8)), started=NOW - H)
    waiting = [job("long1", "a", 8, minrt=H), job("long2", "a", 8, minrt=H, submit=1)]
    debug = job("debug", "b", 8, minrt=10 * 60, submit=2)
    s = snap(hosts(3), [busy], pending(*waiting, debug), tree(a=1, b=1), usage={"b": 100 * H})
    # h2 runs long protected work, so the reserve is h1: one long job starts, on h0
    assert started_on(cycle(s, NOW, short_reserve_hosts=1)) == {"long1": {"h0"}, "debug": {"h1"}}

    # work whose protection ends within the short limit: by default (room now) the reserve
    # holds only a host a short job can start on now, h0, so the long jobs wait; with the
    # earlier rule (`short_reserve_room_now=False`) that work does not count as long, the
    # reserve is h1 (the highest-indexed host free of long work) and h0 stays open
    ending = run(job("ending", "a", 8, minrt=H), "h1", tuple(range(8)), started=NOW - H + 600)
    s = snap(hosts(3), [busy, ending], pending(*waiting), tree(a=1, b=1))
    now_room = cycle(s, NOW, short_reserve_hosts=1)
    assert now_room.short_reserve == ("h0",) and not now_room.starts
    earlier = cycle(s, NOW, short_reserve_hosts=1, short_reserve_room_now=False)
    assert earlier.short_reserve == ("h1",)
    assert started_on(earlier) == {"long1": {"h0"}}


def test_an_idle_reserve_fills_with_unallocated_work():
    sweeps = [job(f"sweep{i}", "a", 8, minrt=0, submit=i) for i in range(3)]
    s = snap(hosts(3), [], pending(*sweeps), tree(a=1, b=1))
    assert set(started_on(cycle(s, short_reserve_hosts=2))) == {"sweep0", "sweep1", "sweep2"}


def test_one_host_always_stays_open_to_long_work():
    s = snap(hosts(2), [], pending(job("long", "a", 8, minrt=H)), tree(a=1, b=1))
    assert set(started_on(cycle(s, short_reserve_hosts=5))) == {"long"}


def test_a_waiting_job_is_told_which_hosts_the_reserve_holds():
    trainer = run(job("trainer", "a", 8, minrt=4 * H), "h0", tuple(range(8)), started=NOW - H)
    s = snap(hosts(2), [trainer], pending(job("long", "b", 4, minrt=H)), tree(a=1, b=1))
    (entry,) = cycle(s, short_reserve_hosts=1).queue
    assert entry.reason.endswith(
        "; h1 held for jobs with a min runtime of at most 15 min (short-job reserve)"
    )
    assert [x.workload_id for x in cycle(s).starts] == ["long"]  # h1, without the reserve


def test_the_reserve_shrinks_while_a_job_needs_its_hosts():
    # a 16-GPU gang job needs 2 of the 3 hosts; a reserve of 2 would leave it 1 for ever
    gang = job("gang", "a", 16, minrt=H)
    waiting = pending(gang, job("debug", "b", 8, minrt=60))
    s = snap(hosts(3), [], waiting, tree(a=1, b=1), usage={"b": 100 * H})
    out = started_on(cycle(s, short_reserve_hosts=2))
    assert out == {"gang": {"h0", "h1"}, "debug": {"h2"}}
    # the whole cluster: no reserve while it waits
    whole = snap(hosts(3), [], pending(job("whole", "a", 24, minrt=H)), tree(a=1, b=1))
    assert started_on(cycle(whole, short_reserve_hosts=1)) == {"whole": {"h0", "h1", "h2"}}


def test_the_reserve_grows_while_short_work_outgrows_it():
    # the reserve (h2) runs a 4-GPU debug job; an 8-GPU one of a low-ranked team waits
    trainer = run(job("trainer", "a", 8, minrt=4 * H), "h0", tuple(range(8)), started=NOW - H)
    small = run(job("small", "b", 4, minrt=10 * 60), "h2", (0, 1, 2, 3), started=NOW - 60)
    debug = job("debug", "b", 8, minrt=5 * 60, prio=2)
    waiting = pending(job("long", "a", 8, minrt=H), debug)
    s = snap(hosts(3), [trainer, small], waiting, tree(a=1, b=1), usage={"b": 100 * H})

    # 12 GPUs of short work need two hosts: h1 is held too, and the debug job takes it
    assert started_on(cycle(s, NOW, short_reserve_hosts=1)) == {"debug": {"h1"}}
    # a reserve that keeps to one host gives h1 to a's long job (a ranks first)
    assert started_on(cycle(s, NOW)) == {"long": {"h1"}}

    # while both debug jobs run, h1 stays held; once the short work fits one host, the
    # reserve shrinks back and h1 opens to long work again
    both = run(debug, "h1", tuple(range(8)), started=NOW - 60)
    s = snap(
        hosts(3),
        [trainer, small, both],
        pending(job("long", "a", 8, minrt=H)),
        tree(a=1, b=1),
        usage={"b": 100 * H},
    )
    (entry,) = cycle(s, NOW + 120, short_reserve_hosts=1).queue
    assert "h1, h2 held for jobs" in entry.reason
    s = snap(
        hosts(3),
        [trainer, small],
        pending(job("long", "a", 8, minrt=H)),
        tree(a=1, b=1),
        usage={"b": 100 * H},
    )
    assert started_on(cycle(s, NOW, short_reserve_hosts=1)) == {"long": {"h1"}}


def test_a_host_added_for_short_work_is_one_short_jobs_can_use_soonest():
    # h1 runs a sweep (preemptible by any allocated job), h2 allocated work of a past its
    # protection (which b, ranked below a, may not preempt); h3 is the reserve
    trainer = run(job("trainer", "a", 8, minrt=4 * H), "h0", tuple(range(8)), started=NOW - H)
    sweep = run(job("sweep", "c", 8, minrt=0), "h1", tuple(range(8)), started=NOW - H)
    past = run(job("past", "a", 8, minrt=H), "h2", tuple(range(8)), started=NOW - 2 * H)
    small = run(job("small", "b", 4, minrt=10 * 60), "h3", (0, 1, 2, 3), started=NOW - 60)
    debug = job("debug", "b", 8, minrt=5 * 60, prio=2)
    waiting = pending(job("long", "a", 8, minrt=H), debug)
    s = snap(
        hosts(4),
        [trainer, sweep, past, small],
        waiting,
        tree(a=1, b=1, c=1),
        usage={"b": 100 * H, "c": 200 * H},
    )

    out = cycle(s, NOW, short_reserve_hosts=1)
    # h1 is added (not h2, the higher index): the debug job preempts the sweep there
    assert started_on(out) == {"debug": {"h1"}}
    assert [x.workload_id for x in out.stops] == ["sweep"]


def test_the_reserve_does_not_grow_onto_hosts_that_would_have_to_drain():
    # every host but the reserve (h2) runs long allocated work: none is added, h1's
    # GPUs stay open to long work as they free
    trainer = run(job("trainer", "a", 8, minrt=4 * H), "h0", tuple(range(8)), started=NOW - H)
    past = run(job("past", "a", 4, minrt=H), "h1", (0, 1, 2, 3), started=NOW - 2 * H)
    small = run(job("small", "b", 4, minrt=10 * 60), "h2", (0, 1, 2, 3), started=NOW - 60)
    waiting = pending(job("long", "a", 4, minrt=H), job("debug", "b", 8, minrt=5 * 60, prio=2))
    s = snap(hosts(3), [trainer, past, small], waiting, tree(a=1, b=1), usage={"b": 100 * H})

    out = cycle(s, NOW, short_reserve_hosts=1)
    assert started_on(out) == {"long": {"h1"}}
    [entry] = out.queue
    assert entry.workload_id == "debug"


def test_short_work_wider_than_a_host_does_not_grow_the_reserve():
    # a 16-GPU short job cannot start on held hosts (whole hosts): holding two for it
    # would leave it one free host, for ever while the trainer runs
    trainer = run(job("trainer", "a", 8, minrt=4 * H), "h0", tuple(range(8)), started=NOW - H)
    wide = job("wide", "b", 16, minrt=10 * 60)
    s = snap(hosts(4), [trainer], pending(wide), tree(a=1, b=1))
    assert started_on(cycle(s, NOW, short_reserve_hosts=1)) == {"wide": {"h1", "h2"}}


def _long_hosts(s: Snapshot, result=None) -> set[str]:
    """Hosts holding allocated work protected beyond the short limit: before the cycle,
    or after its `result`."""
    stopped = {x.workload_id for x in result.stops} if result else set()
    held: set[str] = set()
    for r in s.running:
        w = r.workload
        protected_until = r.started_s + min(w.min_runtime_s, CAP)
        if r.allocated and w.id not in stopped and protected_until > NOW + SHORT:
            held |= {p.host for p in r.placements}
    wanted = {w.id: w for lst in s.pending.values() for w in lst}
    for x in result.starts if result else ():
        if x.allocated and min(wanted[x.workload_id].min_runtime_s, CAP) > SHORT:
            held |= {p.host for p in x.placements}
    return held


def test_the_reserve_keeps_its_hosts_free_of_long_work_and_every_invariant_holds():
    seen: Counter[str] = Counter()

    @settings(max_examples=200, deadline=None, suppress_health_check=list(HealthCheck))
    @given(crowded_with_short_jobs())
    def check(case: tuple[Snapshot, int]) -> None:
        s, reserve = case
        policy = Policy(
            max_min_runtime_s=CAP,
            short_reserve_hosts=reserve,
            short_job_max_s=SHORT,
            short_reserve_auto=False,
        )
        out = check_plan(s, seen, policy)
        healthy = {h.name for h in s.hosts if h.healthy}
        clean_before = healthy - _long_hosts(s)
        clean_after = healthy - _long_hosts(s, out)
        # the reserve leaves room for the widest pending job, and at least one host
        size = max(h.gpus for h in s.hosts if h.healthy)
        widest = max(w.gpus for lst in s.pending.values() for w in lst)
        kept = min(reserve, len(healthy) - max(1, -(-widest // size)))
        assert len(clean_after) >= min(len(clean_before), kept)
        if kept < reserve:
            seen["reserve shrunk for a wide job"] += 1
        for stop in out.stops:
            if stop.reason_code == StopReason.UNALLOCATED and stop.for_workload_id.startswith("s"):
                seen["short job preempted backfill"] += 1
        if any(x.workload_id.startswith("s") for x in out.starts):
            seen["short job started"] += 1

    check()
    assert seen["short job started"] >= 50, dict(seen)
    assert seen["short job preempted backfill"] >= 10, dict(seen)
    assert seen["reserve shrunk for a wide job"] >= 10, dict(seen)


def test_a_long_reserve_is_named_by_its_first_hosts_and_a_count():
    assert hosts_text(("h1", "h2")) == "h1, h2"
    six = tuple(f"h{i}" for i in range(6))
    assert hosts_text(six) == ", ".join(six)
    many = tuple(f"h{i:04d}" for i in range(1246))
    assert hosts_text(many) == "h0000, h0001, h0002, h0003, h0004 and 1,241 more hosts"
