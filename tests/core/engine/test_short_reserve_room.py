"""Room on the short-job reserve's hosts (issue 24, overload): the reserve ranks above
every job, so a short job may take there, besides free GPUs and unallocated backfill,
allocated work past its protection (rule `short_reserve`), whatever the projects' ranks;
protected work keeps its GPUs. And every waiting short job is looked at for the
reserve, however long its project's queue of long work ahead of it."""

from __future__ import annotations

from collections import Counter
from dataclasses import replace

from hypothesis import HealthCheck, given, settings

from scheduler.core.engine import Policy, Snapshot, StopReason, plan, stop_rule
from scheduler.core.engine.fairshare import compute_fair_share
from scheduler.core.engine.types import rule_label
from tests.core.engine.crowded import (
    CAP,
    NOW,
    check_plan,
    crowded_with_short_jobs,
    long_work_off_held_hosts,
    started_on,
)
from tests.core.engine.helpers import H, hosts, job, pending, run, snap, tree

SHORT = 15 * 60.0


def _full(n: int, started: float, project: str = "a") -> list:
    """`n` hosts each run by an 8-GPU trainer of `project` (min runtime 1 h)."""
    return [
        run(job(f"t{i}", project, 8, minrt=H, submit=i), f"h{i}", tuple(range(8)), started=started)
        for i in range(n)
    ]


def test_a_low_ranked_short_job_takes_long_work_past_its_protection_on_the_reserve():
    # every host runs a's trainers past their protection; a has had its share (level
    # fair share 1), b ranks below it and may preempt none of them, but the reserve's
    # host is open to its debug job
    busy = _full(64, NOW - 2 * H)
    debug = job("debug", "b", 1, minrt=5 * 60, submit=NOW)
    usage = {"a": 500 * H, "b": 1000 * H}
    s = snap(hosts(64), busy, pending(debug), tree(a=1, b=1, c=1), usage=usage)
    out = plan(s, Policy(), NOW)
    assert set(started_on(out)) == {"debug"}
    [stop] = out.stops
    assert stop.reason_code == StopReason.SHORT_RESERVE and stop.for_workload_id == "debug"
    [host] = started_on(out)["debug"]
    assert host in out.short_reserve and f"t{host[1:]}" == stop.workload_id
    assert stop_rule(stop.reason_code) == "short_reserve"
    assert rule_label("short_reserve").startswith("Short-job reserve")
    assert "held by the short-job reserve" in stop.reason
    # the old behaviour one setting away: without the reserve, the debug job waits
    assert not plan(s, Policy(short_reserve_auto=False), NOW).starts
    # an under-served project's work (a without usage) is the reserve's to take only up
    # to the short jobs' share of the allocated demand (here nearly the whole cluster)
    assert {
        x.workload_id for x in plan(replace(s, usage={"b": 1000 * H}), Policy(), NOW).starts
    } == {"debug"}


def test_under_served_work_goes_to_short_jobs_only_up_to_their_share_of_demand():
    # 10x overload: a (without usage: under-served) runs every host past protection and
    # waits with 9 times the cluster; b's 20 one-GPU debug jobs are 20 of the 5,140 GPUs
    # of allocated demand, so short jobs may take a's work for 2 GPUs of their own this
    # cycle: two trainers stop, their hosts' 16 GPUs start 16 debug jobs, 4 wait
    busy = _full(64, NOW - 2 * H)
    longs = [job(f"l{i}", "a", 8, minrt=H, submit=NOW) for i in range(576)]
    debug = [job(f"d{i}", "b", 1, minrt=5 * 60, submit=NOW) for i in range(20)]
    s = snap(hosts(64), busy, pending(*longs, *debug), tree(a=1, b=1, c=1), usage={"b": 1000 * H})
    out = plan(s, Policy(), NOW)
    assert len(out.stops) == 2
    assert {x.workload_id for x in out.starts} <= {w.id for w in debug}
    assert len(out.starts) == 16


def test_a_short_job_trades_with_its_own_projects_longer_work_past_its_protection():
    # a's trainers past their protection, a's own debug job of the same priority: a
    # has had its share and may preempt no other project's work; its short job takes the
    # GPUs of one of a's own trainers (a's usage does not change with the trade, so no
    # other project's share does); a lower-priority trainer of a is the project's own
    # ordering to preempt (project_priority)
    busy = _full(64, NOW - 2 * H)
    debug = job("debug", "a", 1, minrt=5 * 60, submit=NOW)
    s = snap(hosts(64), busy, pending(debug), tree(a=1, b=1, c=1), usage={"a": 500 * H})
    out = plan(s, Policy(), NOW)
    assert set(started_on(out)) == {"debug"}
    [stop] = out.stops
    assert stop.reason_code == StopReason.SHORT_RESERVE and stop.for_workload_id == "debug"
    assert "of the same project a" in stop.reason
    # the old behaviour one setting away: without the reserve, no trade
    assert not plan(s, Policy(short_reserve_auto=False), NOW).starts
    # an under-served project (a without usage, b and c with) does not trade: its
    # short jobs outrank other projects' work in the fair-share pass
    under = replace(s, usage={"b": 1000 * H, "c": 1000 * H})
    assert not plan(under, Policy(), NOW).stops
    [host] = started_on(out)["debug"]
    assert f"t{host[1:]}" == stop.workload_id
    # another short job is never traded away for it, nor a gang
    shorts = [
        run(job(f"s{i}", "a", 8, minrt=10 * 60, submit=i), f"h{i}", tuple(range(8)), NOW - H)
        for i in range(64)
    ]
    assert not plan(replace(s, running=shorts), Policy(), NOW).stops
    gangs = [
        run(
            job(f"g{i}", "a", 16, minrt=H, submit=i),
            "",
            [(f"h{2 * i}", tuple(range(8))), (f"h{2 * i + 1}", tuple(range(8)))],
            NOW - 2 * H,
        )
        for i in range(32)
    ]
    assert not plan(replace(s, running=gangs), Policy(), NOW).stops
    urgent = replace(debug, priority=1)
    out = plan(replace(s, pending=pending(urgent)), Policy(), NOW)
    assert set(started_on(out)) == {"debug"}
    [stop] = out.stops
    assert stop_rule(stop.reason_code) == "project_priority"


def test_protected_work_on_the_reserve_keeps_its_gpus():
    busy = _full(64, NOW - 0.5 * H)  # every trainer inside its 1 h protection
    debug = job("debug", "b", 1, minrt=5 * 60, submit=NOW)
    s = snap(hosts(64), busy, pending(debug), tree(a=1, b=1), usage={"b": 1000 * H})
    out = plan(s, Policy(), NOW)
    assert not out.starts and not out.stops


def test_a_short_job_behind_a_long_queue_of_its_project_starts_on_the_reserve():
    # b's own queue: 600 long jobs submitted before its debug job, same priority; the
    # fair-share pass looks at a bounded number of them (SCAN_PER_CYCLE), the reserve at
    # every short job
    busy = _full(63, NOW - 0.5 * H)
    busy.append(run(job("sweep", "a", 8, minrt=0), "h63", tuple(range(8)), started=NOW - H))
    # (submitted a minute ago: the reserve does not yet give way to the first of them)
    backlog = [job(f"long{i}", "b", 1, minrt=H, submit=NOW - 60 + i / 20) for i in range(600)]
    debug = job("debug", "b", 1, minrt=5 * 60, submit=NOW)
    s = snap(hosts(64), busy, pending(*backlog, debug), tree(a=1, b=1), usage={"b": 1000 * H})
    out = plan(s, Policy(), NOW)
    assert started_on(out) == {"debug": {"h63"}}
    assert [(x.workload_id, x.reason_code) for x in out.stops] == [
        ("sweep", StopReason.UNALLOCATED)
    ]


def test_the_reserve_takes_allocated_work_only_where_it_holds_and_keeps_every_contract():
    seen: Counter[str] = Counter()

    @settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck))
    @given(crowded_with_short_jobs())
    def check(case: tuple[Snapshot, int]) -> None:
        s, _ = case
        policy = Policy(max_min_runtime_s=CAP, short_job_max_s=SHORT)
        # no protected job stopped; a `short_reserve` stop only of allocated work on a
        # held host, for a short job that starts there (check_plan)
        out = check_plan(s, seen, policy)
        held = long_work_off_held_hosts(s, out)  # long work never starts on a held host
        wanted = {w.id: w for lst in s.pending.values() for w in lst}
        if held:
            seen["reserve held"] += 1
        fs = compute_fair_share(s.tree, s.usage, policy.seed)
        running = {r.workload.id: r.workload for r in s.running}
        under_served = 0  # GPUs of short jobs that took an under-served project's work
        for stop in out.stops:
            if stop.reason_code == StopReason.SHORT_RESERVE:
                # an under-served project's work (level fair share above 1) only up to
                # the short jobs' share of the allocated demand (below)
                victim = running[stop.workload_id]
                if fs.lf[fs.tree.leaf_index[victim.project]] > 1.0:
                    under_served += wanted[stop.for_workload_id].gpus
                # its own project's work at its priority or above only by the short-job
                # trade: longer work, never another short job (check_plan)
                starter = wanted[stop.for_workload_id]
                if victim.project == starter.project and victim.priority >= starter.priority:
                    assert min(victim.min_runtime_s, CAP) > SHORT
        if under_served:
            allocated = [r.workload for r in s.running if r.allocated] + [
                w for w in wanted.values() if w.min_runtime_s > 0
            ]
            short = sum(w.gpus for w in allocated if min(w.min_runtime_s, CAP) <= SHORT)
            total = sum(h.gpus for h in s.hosts)
            # each take is of at least the taker's GPUs, within ceil(share of the cluster)
            assert under_served <= -(-total * short // sum(w.gpus for w in allocated)) + 8

    check()
    assert seen["stop short_reserve"] >= 10, dict(seen)
    assert seen["reserve held"] >= 50, dict(seen)


def test_a_gang_reaching_beyond_the_reserve_is_not_stopped_for_a_short_job():
    # a 16-GPU gang runs on h62 and h63: stopping it for one GPU would empty a host
    # outside, so the reserve counts its GPUs as untakeable and holds h61 instead (the
    # highest index of the others, all past their protection); a (without usage) is
    # under-served: its trainer there goes within the short jobs' share of the demand
    busy = _full(62, NOW - 2 * H)
    gang = job("gang", "a", 16, minrt=H, submit=99)
    busy.append(run(gang, "", [("h62", tuple(range(8))), ("h63", tuple(range(8)))], NOW - 2 * H))
    debug = job("debug", "b", 1, minrt=5 * 60, submit=NOW)
    s = snap(hosts(64), busy, pending(debug), tree(a=1, b=1), usage={"b": 1000 * H})
    out = plan(s, Policy(), NOW)
    assert out.short_reserve == ("h61",)
    assert [x.workload_id for x in out.stops] == ["t61"]
    assert started_on(out) == {"debug": {"h61"}}


def test_a_demand_window_leaves_an_old_backlog_out_of_the_short_jobs_budget():
    # the overload above, but a's 576 waiting trainers were submitted 2 h ago: with the
    # reserve's demand window (an experiment, off by default) only the work submitted
    # in its last 30 min counts as waiting demand, so b's 20 debug jobs are 20 of the 532
    # GPUs of running and recent demand: their budget holds all 20 (three trainers stop);
    # by default the backlog keeps it to 2 GPUs of their own, as above (the debug jobs
    # were just submitted: within the take-after bound, the budget alone decides)
    busy = _full(64, NOW - 2 * H)
    longs = [job(f"l{i}", "a", 8, minrt=H, submit=NOW - 2 * H) for i in range(576)]
    debug = [job(f"d{i}", "b", 1, minrt=5 * 60, submit=NOW) for i in range(20)]
    s = snap(hosts(64), busy, pending(*longs, *debug), tree(a=1, b=1, c=1), usage={"b": 1000 * H})
    windowed = plan(s, Policy(short_reserve_demand_window_s=30 * 60.0), NOW)
    assert {x.workload_id for x in windowed.starts} == {w.id for w in debug}
    assert len(windowed.stops) == 3
    assert all(x.reason_code == StopReason.SHORT_RESERVE for x in windowed.stops)
    default = plan(s, Policy(), NOW)
    assert len(default.stops) == 2 and len(default.starts) == 16
    # a recent backlog counts within the window too
    fresh = replace(s, pending=pending(*[replace(w, submit_s=NOW) for w in longs], *debug))
    assert len(plan(fresh, Policy(short_reserve_demand_window_s=30 * 60.0), NOW).starts) == 16


def _contracts_hold(policy: Policy, *, one_host_open: bool = False) -> Counter[str]:
    """Over crowded snapshots with short jobs: no protected job stopped, no GPU given
    twice, short-reserve stops only for a short job that starts on a held host
    (check_plan), no long work placed on a held host; `one_host_open`: one host of the
    largest size stays open to long work (never a job made impossible). The cases seen."""
    seen: Counter[str] = Counter()

    @settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
    @given(crowded_with_short_jobs())
    def check(case: tuple[Snapshot, int]) -> None:
        s, _ = case
        out = check_plan(s, seen, policy)
        held = long_work_off_held_hosts(s, out)
        if one_host_open and held:
            size = max(h.gpus for h in s.hosts if h.healthy)
            assert len(held) < sum(1 for h in s.hosts if h.healthy and h.gpus == size)

    check()
    return seen


def test_the_demand_window_and_sparing_the_floor_keep_every_contract():
    policy = Policy(
        max_min_runtime_s=CAP,
        short_job_max_s=SHORT,
        short_reserve_demand_window_s=30 * 60.0,
        short_reserve_spares_floor=True,
    )
    seen = _contracts_hold(policy)
    assert seen["stop short_reserve"] >= 5, dict(seen)


def test_a_short_job_that_waited_past_the_take_after_bound_goes_beyond_the_budget():
    # the overload of the demand-window test: the backlog keeps the budget to 2 GPUs of
    # b's 20 debug jobs (16 start, two trainers stop). With `short_reserve_take_after_s`
    # (15 s by default; 60 s here) the debug jobs that have waited 60 s take a's work
    # beyond it; the fresh ones only within it
    busy = _full(64, NOW - 2 * H)
    longs = [job(f"l{i}", "a", 8, minrt=H, submit=NOW - 2 * H) for i in range(576)]
    old = [job(f"d{i}", "b", 1, minrt=5 * 60, submit=NOW - 60) for i in range(20)]
    s = snap(hosts(64), busy, pending(*longs, *old), tree(a=1, b=1, c=1), usage={"b": 1000 * H})
    policy = Policy(short_reserve_take_after_s=60.0, short_reserve_fewest_gpus=False)
    out = plan(s, policy, NOW)
    assert {x.workload_id for x in out.starts} == {w.id for w in old}
    assert len(out.stops) == 3
    assert all(x.reason_code == StopReason.SHORT_RESERVE for x in out.stops)
    fresh = replace(s, pending=pending(*longs, *[replace(w, submit_s=NOW) for w in old]))
    assert len(plan(fresh, policy, NOW).starts) == 16
    # the fewest GPUs of under-served work first: the same stops, here all 8-GPU trainers
    both = Policy(short_reserve_take_after_s=60.0)  # fewest GPUs: the default
    assert len(plan(s, both, NOW).starts) == 20


def test_the_take_after_bound_the_fewest_gpus_order_and_room_now_keep_every_contract():
    policy = Policy(
        max_min_runtime_s=CAP,
        short_job_max_s=SHORT,
        short_reserve_take_after_s=0.0,
        short_reserve_fewest_gpus=True,
        short_reserve_room_now=True,
    )
    seen = _contracts_hold(policy, one_host_open=True)
    assert seen["stop short_reserve"] >= 5, dict(seen)


def test_with_room_now_the_reserve_holds_a_host_a_short_job_can_start_on_at_once():
    # h0-h59 run a's trainers past their protection; h60-h63 run trainers whose
    # protection ends in 5 min. By default (`short_reserve_room_now`) the reserve holds a
    # host the debug job starts on now; the earlier rule (room_now off) counts both as
    # room within the short limit and holds the highest index (h63), where it waits 5 min
    busy = _full(60, NOW - 2 * H) + [
        run(
            job(f"t{i}", "a", 8, minrt=H, submit=i), f"h{i}", tuple(range(8)), started=NOW - 55 * 60
        )
        for i in range(60, 64)
    ]
    debug = job("debug", "b", 1, minrt=5 * 60, submit=NOW)
    s = snap(hosts(64), busy, pending(debug), tree(a=1, b=1), usage={"a": 500 * H, "b": 1000 * H})
    earlier = plan(s, Policy(short_reserve_room_now=False), NOW)
    assert earlier.short_reserve == ("h63",) and not earlier.starts
    out = plan(s, Policy(), NOW)
    assert out.short_reserve == ("h59",)
    assert started_on(out) == {"debug": {"h59"}}
    assert [x.workload_id for x in out.stops] == ["t59"]
