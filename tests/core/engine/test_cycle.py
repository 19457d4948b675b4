"""One fair-share cycle: order, contracts, preemption rules, drain, reservations."""

from __future__ import annotations

from scheduler.core.engine import BudgetNode, StopReason
from scheduler.core.engine.explain import no_block_note

from .helpers import H, apply_plan, cycle, gpus_of, hosts, job, pending, run, snap, tree

NOW = 100 * H


def test_queue_order_projects_by_fair_tree_then_unallocated_last():
    t = tree(a=1, b=1)
    usage = {"a": 100 * H, "b": 10 * H}  # b less served -> first
    p = pending(
        job("a1", "a", minrt=H, submit=1),
        job("a0", "a", minrt=0, submit=0),
        job("b1", "b", minrt=H, prio=1, submit=5),
        job("b2", "b", minrt=H, prio=0, submit=2),
    )
    full = [
        run(job(f"r{i}", "a", 8, minrt=8 * H), f"h{i}", tuple(range(8)), NOW - H) for i in range(1)
    ]
    out = cycle(snap(hosts(1), full, p, t, usage))
    order = [q.workload_id for q in out.queue]
    assert order == ["b1", "b2", "a1", "a0"]
    assert [q.position for q in out.queue] == [1, 2, 3, 4]
    assert out.queue[0].project_rank == 1 and out.queue[2].project_rank == 2
    assert out.queue[0].metric == 1.0
    # a, ranked below b, waits behind it: its reason quotes its standing; b, ranked
    # first, waits behind no other project: its reason does not
    reason = out.queue[2].reason
    assert "a is at" in reason and "of its entitled share over 7 days" in reason
    assert "(fair-share rank 2 of 2); 1 project ranks above it" in reason
    assert out.queue[0].reason.startswith(
        "waiting for GPUs: no project ranks above project b (fair-share rank 1 of 2)"
    )
    assert "of its entitled share" not in out.queue[0].reason
    assert "unallocated" in out.queue[3].reason
    assert [p for p, _ in out.project_order] == ["b", "a"]


def test_zero_weight_project_runs_only_unallocated_jobs():
    t = tree(z=0, a=1)
    p = pending(job("za", "z", minrt=H), job("zu", "z", minrt=0, submit=1))
    out = cycle(snap(hosts(1), [], p, t))
    started = {s.workload_id: s.allocated for s in out.starts}
    assert started == {"zu": False}
    (q,) = out.queue
    assert q.workload_id == "za" and "no entitlement (weight 0 on its path)" in q.reason


def test_protected_jobs_are_never_preempted():
    t = tree(a=1, b=1)
    usage = {"a": 1.0, "b": 1000 * H}
    # b's job is inside its min runtime (started 1 h ago, min runtime 4 h)
    r = run(job("rb", "b", 8, minrt=4 * H), "h0", tuple(range(8)), NOW - H)
    out = cycle(snap(hosts(1), [r], pending(job("ja", "a", 8, minrt=H)), t, usage))
    assert out.stops == () and out.starts == ()


def test_min_runtime_protection_is_capped_by_policy():
    t = tree(a=1, b=1)
    usage = {"a": 1.0, "b": 1000 * H}
    r = run(job("rb", "b", 8, minrt=100 * H), "h0", tuple(range(8)), NOW - 3 * H)
    p = pending(job("ja", "a", 8, minrt=H))
    assert cycle(snap(hosts(1), [r], p, t, usage)).stops == ()  # 8 h cap: still protected
    out = cycle(snap(hosts(1), [r], p, t, usage), max_min_runtime_s=2 * H)
    assert [s.workload_id for s in out.stops] == ["rb"]
    assert out.stops[0].reason_code == StopReason.FAIR_SHARE


def test_unallocated_job_preempted_at_once_and_requeue_follows_resumable():
    t = tree(a=1, b=1)
    r = run(job("free", "b", 8, minrt=0, resumable=False), "h0", tuple(range(8)), NOW - 60)
    out = cycle(snap(hosts(1), [r], pending(job("ja", "a", 4, minrt=H)), t))
    (stop,) = out.stops
    assert stop.reason_code == StopReason.UNALLOCATED
    assert stop.requeue is False and stop.for_workload_id == "ja"
    assert [s.workload_id for s in out.starts] == ["ja"]
    assert "unallocated" in stop.reason


def test_unallocated_jobs_never_preempt():
    t = tree(a=1, b=1)
    r = run(job("free", "b", 8, minrt=0), "h0", tuple(range(8)), NOW - 60)
    out = cycle(snap(hosts(1), [r], pending(job("ua", "a", 4, minrt=0)), t))
    assert out.stops == () and out.starts == ()


def test_fair_share_preemption_only_of_lower_ranked_projects():
    t = tree(a=1, b=1)
    rb = run(job("rb", "b", 8, minrt=H), "h0", tuple(range(8)), NOW - 5 * H)
    p = pending(job("ja", "a", 8, minrt=H))
    # a is far less served than b: b's job is past its min runtime -> preempted
    out = cycle(snap(hosts(1), [rb], p, t, {"a": 0.0, "b": 500 * H}))
    assert [(s.workload_id, s.reason_code) for s in out.stops] == [("rb", StopReason.FAIR_SHARE)]
    assert "ranks below" in out.stops[0].reason
    # the job it gives way to is named as a job ("with job ja running", not "with ja")
    assert "which it would still do with job ja running;" in out.stops[0].reason
    # a ranks below b: nothing happens
    out = cycle(snap(hosts(1), [rb], p, t, {"a": 500 * H, "b": 0.0}))
    assert out.stops == ()


def test_no_preemption_when_the_preemptor_would_then_rank_below():
    t = tree(a=1, b=1)
    rb = run(job("rb", "b", 8, minrt=H), "h0", tuple(range(8)), NOW - 5 * H)
    # a is slightly less served (90 vs 100 GPU-h) but its 8-GPU x 4 h job adds 32 GPU-h
    p = pending(job("ja", "a", 8, minrt=4 * H))
    out = cycle(snap(hosts(1), [rb], p, t, {"a": 90 * 8 * H / 8, "b": 100 * H}))
    assert out.stops == ()
    # with a 1 h min runtime (8 GPU-h more) it still ranks above: preempts
    p = pending(job("ja", "a", 8, minrt=H))
    out = cycle(snap(hosts(1), [rb], p, t, {"a": 90 * H, "b": 100 * H}))
    assert [s.workload_id for s in out.stops] == ["rb"]


def test_same_project_lower_priority_preempted_after_min_runtime():
    t = tree(a=1, b=1)
    low = run(job("low", "a", 8, minrt=H, prio=0), "h0", tuple(range(8)), NOW - 2 * H)
    p = pending(job("hi", "a", 8, minrt=H, prio=5))
    out = cycle(snap(hosts(1), [low], p, t))
    assert [(s.workload_id, s.reason_code) for s in out.stops] == [("low", StopReason.PRIORITY)]
    # equal priority: no preemption within the project
    p = pending(job("same", "a", 8, minrt=H, prio=0))
    assert cycle(snap(hosts(1), [low], p, t)).stops == ()


def test_victims_lose_the_least_work_and_unallocated_go_first():
    t = tree(a=1, b=1)
    usage = {"a": 0.0, "b": 100 * H}
    # h0: allocated b job past min runtime, checkpointed 5 min ago (little loss)
    # h1: unallocated job, non-resumable, running 3 h (large loss) -> still chosen first
    # h2: allocated b job, non-resumable, 6 h lost
    r0 = run(job("b_ck", "b", 8, minrt=H), "h0", tuple(range(8)), NOW - 6 * H, ckpt=NOW - 300)
    r1 = run(job("free", "b", 8, minrt=0, resumable=False), "h1", tuple(range(8)), NOW - 3 * H)
    r2 = run(job("b_nr", "b", 8, minrt=H, resumable=False), "h2", tuple(range(8)), NOW - 6 * H)
    s = snap(hosts(3), [r0, r1, r2], pending(job("ja", "a", 8, minrt=H)), t, usage)
    out = cycle(s)
    assert [x.workload_id for x in out.stops] == ["free"]
    # two jobs needed: the unallocated one and the cheaper allocated one
    s = snap(
        hosts(3),
        [r0, r1, r2],
        pending(job("ja", "a", 8, minrt=H), job("jb", "a", 8, minrt=H, submit=1)),
        t,
        usage,
    )
    out = cycle(s)
    assert [x.workload_id for x in out.stops] == ["free", "b_ck"]


def test_fewest_gpu_hours_lost_among_small_victims():
    t = tree(a=1, b=1)
    usage = {"a": 0.0, "b": 100 * H}
    rs = [
        run(job(f"v{i}", "b", 1, minrt=H), "h0", (i,), NOW - (2 + i) * H, ckpt=NOW - (8 - i) * 60)
        for i in range(8)
    ]
    out = cycle(snap(hosts(1), rs, pending(job("ja", "a", 2, minrt=H)), t, usage))
    # cheapest aligned pair: GPUs 6,7 (checkpointed 2 and 1 min ago)
    assert sorted(x.workload_id for x in out.stops) == ["v6", "v7"]
    assert out.starts[0].placements[0].gpu_indices == (6, 7)


def test_two_equal_projects_with_endless_demand_settle():
    """Iterate cycles with usage growing: preemptions happen only when one project has
    fallen behind by more than a job's worth of protected time, never back and forth
    in consecutive cycles, and each job runs at least its min runtime."""
    t = tree(a=1, b=1)
    minrt = H
    usage = {"a": 0.0, "b": 0.0}
    running = {}
    counter = 0
    starts_at = {}
    now = 0.0
    stops = 0
    last_stop_time = None
    demand = {"a": [], "b": []}

    def refill():
        nonlocal counter
        for p in ("a", "b"):
            while len(demand[p]) < 3:
                counter += 1
                demand[p].append(job(f"{p}{counter}", p, 8, minrt=minrt, submit=counter))

    for _ in range(200):
        refill()
        pend = {p: list(v) for p, v in demand.items()}
        out = cycle(snap(hosts(1), list(running.values()), pend, t, dict(usage)), now=now)
        for s in out.stops:
            r = running.pop(s.workload_id)
            assert now - r.started_s >= minrt  # protected time honoured
            stops += 1
            if last_stop_time is not None:
                assert now - last_stop_time >= minrt
            last_stop_time = now
        for s in out.starts:
            w = next(w for p in demand.values() for w in p if w.id == s.workload_id)
            demand[w.project].remove(w)
            running[w.id] = run(w, "h0", s.placements[0].gpu_indices, now)
            starts_at[w.id] = now
        # charge 10 minutes of use
        now += 600
        for r in running.values():
            usage[r.workload.project] += r.workload.gpus * 600
    # time slicing, not thrashing: at most one switch per protected period
    assert 0 < stops <= 200 * 600 / minrt
    # both projects got a fair half of the time (within one job's protected time)
    assert abs(usage["a"] - usage["b"]) <= 2 * 8 * minrt


def test_equal_projects_with_equal_usage_do_not_preempt_each_other():
    t = tree(a=1, b=1)
    rb = run(job("rb", "b", 8, minrt=H), "h0", tuple(range(8)), NOW - 5 * H)
    out = cycle(
        snap(hosts(1), [rb], pending(job("ja", "a", 8, minrt=H)), t, {"a": 50 * H, "b": 50 * H})
    )
    assert out.stops == ()


def test_drain_unhealthy_host():
    t = tree(a=1)
    hs = hosts(3, unhealthy=(0, 1))
    free = run(job("u", "a", 4, minrt=0), "h0", (0, 1, 2, 3), NOW - 60)
    prot = run(job("p", "a", 4, minrt=4 * H), "h0", (4, 5, 6, 7), NOW - H)
    past = run(job("q", "a", 8, minrt=H), "h1", tuple(range(8)), NOW - 2 * H)
    out = cycle(snap(hs, [free, prot, past], pending(job("new", "a", 8)), t))
    assert {(s.workload_id, s.reason_code) for s in out.stops} == {
        ("u", StopReason.DRAIN),
        ("q", StopReason.DRAIN),
    }
    assert [r.host for r in out.hosts_ready] == ["h1"]  # h0 still holds a protected job
    (start,) = out.starts
    assert start.placements[0].host == "h2"  # never on an unhealthy host
    # after the protection ends, h0 is emptied too
    later = cycle(snap(hs, [prot], {}, t), now=NOW + 3 * H + 1)
    assert [s.workload_id for s in later.stops] == ["p"]
    assert {r.host for r in later.hosts_ready} == {"h0", "h1"}


def test_reservation_for_a_large_job_blocks_only_work_that_could_delay_it():
    t = tree(big=1, small=1)
    usage = {"big": 0.0, "small": 100 * H}
    # 2 hosts; h0 busy with a protected small-project job for 30 more minutes,
    # h1 has one protected GPU for 2 more hours
    r0 = run(job("p0", "small", 4, minrt=H), "h0", (0, 1, 2, 3), NOW - 0.5 * H)
    r1 = run(job("p1", "small", 1, minrt=3 * H), "h1", (0,), NOW - H)
    p = pending(
        job("big", "big", 16, minrt=H),
        job("long", "small", 2, minrt=4 * H, submit=1),  # would delay big: must not use h0/h1
        job("short", "small", 2, minrt=0.25 * H, submit=2),  # ends protection before: may
        job("free", "small", 1, minrt=0, submit=3),  # unallocated: may
    )
    out = cycle(snap(hosts(2), [r0, r1], p, t, usage))
    (res,) = out.reservations
    assert res.workload_id == "big" and set(res.hosts) == {"h0", "h1"}
    started = {s.workload_id for s in out.starts}
    assert "long" not in started
    assert {"short", "free"} <= started
    why = {q.workload_id: q.reason for q in out.queue}
    assert "reserved" in why["big"]
    # the job the hosts are held for is named as a job ("for job big", not "for big")
    assert "(h0, h1) for job big (16 GPUs, project big," in why["big"]


def test_determinism_same_input_same_plan():
    t = BudgetNode("r", children=tuple(BudgetNode(f"p{i}", 1 + i % 3) for i in range(6)))
    jobs = [
        job(f"j{i}", f"p{i % 6}", [1, 2, 4, 8][i % 4], minrt=(i % 3) * H, submit=i)
        for i in range(40)
    ]
    running = [
        run(
            job(f"r{i}", f"p{i % 6}", 2, minrt=(i % 2) * H),
            f"h{i // 4}",
            (2 * (i % 4), 2 * (i % 4) + 1),
            NOW - i * 1000,
        )
        for i in range(12)
    ]
    s = snap(hosts(4), running, pending(*jobs), t, {f"p{i}": i * 10 * H for i in range(6)})
    a, b = cycle(s), cycle(s)
    assert a == b
    assert cycle(s, seed=1).queue  # seeded variant runs as well


def _subtree_shift_case(p_minrt: float):
    """D1 = {P, A, B, C} is just ahead of D2 = {X}. P's new job adds usage that drops D1
    below D2 while P still beats A, B and C: "still beaten" is then not a suffix of the
    order (A, B, C yes; X, last, no), so a rank threshold alone would allow X."""
    t = BudgetNode(
        "org",
        children=(
            BudgetNode("D1", 1, tuple(BudgetNode(n, 1) for n in ("P", "A", "B", "C"))),
            BudgetNode("D2", 1, (BudgetNode("X", 1),)),
        ),
    )
    usage = {"P": 1 * H, "A": 30 * H, "B": 30 * H, "C": 30 * H, "X": 100 * H}
    x = run(job("x", "X", 8, minrt=H), "h0", tuple(range(8)), 100 * H - 5 * H)
    return snap(hosts(1), [x], pending(job("p", "P", 8, minrt=p_minrt)), t, usage)


def test_no_preemption_of_a_project_that_would_rank_above_after_it():
    # +20 GPU-h for P: D1 falls below D2, so X would outrank P once p runs
    out = cycle(_subtree_shift_case(2.5 * H))
    assert out.stops == () and out.starts == ()


def test_preemption_allowed_when_the_project_still_ranks_below():
    # +2 GPU-h for P: D1 stays ahead of D2
    out = cycle(_subtree_shift_case(0.25 * H))
    (stop,) = out.stops
    assert stop.workload_id == "x" and stop.reason_code == "fair_share"
    assert [s.workload_id for s in out.starts] == ["p"]


def test_incremental_running_state_matches_a_cold_cycle():
    """Across cycles with the same hosts object the engine updates its used-GPU masks
    from the difference of the running sets; every plan must equal a cold one."""
    import random

    from scheduler.core.engine import EngineState, Policy, RunningWorkload, plan

    state = EngineState()

    def cold(s, now):
        return plan(s, Policy(), now)

    def warm_cycle(s, now):
        return plan(s, Policy(), now, state)

    rng = random.Random(3)
    t = tree(a=1, b=2, c=1)
    hs = tuple(hosts(6))
    waiting = {
        p: [
            job(
                f"{p}{i}", p, rng.choice([1, 1, 2, 4, 8]), minrt=rng.choice([0, H, 3 * H]), submit=i
            )
            for i in range(25)
        ]
        for p in "abc"
    }
    running: dict[str, RunningWorkload] = {}
    usage = {"a": 0.0, "b": 0.0, "c": 0.0}
    now = 100 * H
    for _ in range(25):
        s = snap(hs, list(running.values()), {p: list(v) for p, v in waiting.items()}, t, usage)
        warm = warm_cycle(s, now)
        assert warm == cold(s, now)
        warm_cycle(s, now)  # leave the warm state at this running set for the next cycle
        apply_plan(warm, running, waiting, now)
        for wid in rng.sample(sorted(running), k=min(2, len(running))):
            del running[wid]  # finished
        for rw in running.values():
            if rw.allocated:
                usage[rw.workload.project] += rw.workload.gpus * 0.5 * H
        now += 0.5 * H


def test_block_from_free_gpus_and_several_victim_classes_on_one_host():
    # h0: GPUs 0-1 free, 2-3 unallocated, 4-5 own lower-priority job past its min
    # runtime, 6-7 a lower-ranked project's job past its min runtime. h1 is full of
    # protected work. An 8-GPU job can start only by combining all four on h0.
    t = tree(a=1, b=1)
    usage = {"a": 0.0, "b": 100 * H}
    running = [
        run(job("u", "b", 2, minrt=0), "h0", (2, 3), NOW - H),
        run(job("own", "a", 2, minrt=H, prio=0), "h0", (4, 5), NOW - 2 * H),
        run(job("low", "b", 2, minrt=H), "h0", (6, 7), NOW - 2 * H),
        run(job("prot", "b", 8, minrt=8 * H), "h1", tuple(range(8)), NOW - H),
    ]
    p = pending(job("dbg", "a", 8, minrt=0.25 * H, prio=2))
    out = cycle(snap(hosts(2), running, p, t, usage))
    (st,) = out.starts
    assert st.workload_id == "dbg" and gpus_of(st) == {("h0", i) for i in range(8)}
    assert {s.workload_id for s in out.stops} == {"u", "own", "low"}
    assert all(s.for_workload_id == "dbg" for s in out.stops)


def test_short_job_preempts_unallocated_backfill_on_a_reserved_host():
    # big (ranked first) needs both hosts; h0 holds a protected job for 30 more
    # minutes, so both hosts are reserved for big until then. h1 has 2 free GPUs and
    # two unallocated jobs (backfill). A job whose protection ends before the
    # reservation's time cannot delay big: it may take h1 by preempting the backfill.
    # One that would still be protected then may not.
    t = tree(big=1, small=1)
    usage = {"big": 0.0, "small": 100 * H}
    running = [
        run(job("p0", "small", 4, minrt=H), "h0", (0, 1, 2, 3), NOW - 0.5 * H),
        run(job("u1", "small", 2, minrt=0), "h1", (2, 3), NOW - H),
        run(job("u2", "small", 4, minrt=0), "h1", (4, 5, 6, 7), NOW - H),
    ]
    p = pending(
        job("big", "big", 16, minrt=H),
        job("long", "small", 8, minrt=4 * H, submit=1, prio=1),
        job("short", "small", 8, minrt=0.25 * H, submit=2),
    )
    out = cycle(snap(hosts(2), running, p, t, usage))
    (res,) = out.reservations
    assert res.workload_id == "big" and set(res.hosts) == {"h0", "h1"}
    (st,) = out.starts
    assert st.workload_id == "short" and gpus_of(st) == {("h1", i) for i in range(8)}
    assert "reserved host" in st.reason and "preempting 2 unallocated jobs" in st.reason
    stops = {s.workload_id: s for s in out.stops}
    assert set(stops) == {"u1", "u2"}
    assert all(s.reason_code == StopReason.UNALLOCATED for s in stops.values())
    assert all(s.for_workload_id == "short" for s in stops.values())
    # deterministic
    assert cycle(snap(hosts(2), running, p, t, usage)) == out


def test_reserved_host_backfill_is_not_preempted_for_work_that_would_delay_it():
    t = tree(big=1, small=1)
    usage = {"big": 0.0, "small": 100 * H}
    running = [
        run(job("p0", "small", 4, minrt=H), "h0", (0, 1, 2, 3), NOW - 0.5 * H),
        run(job("u1", "small", 2, minrt=0), "h1", (2, 3), NOW - H),
        run(job("u2", "small", 4, minrt=0), "h1", (4, 5, 6, 7), NOW - H),
    ]
    p = pending(job("big", "big", 16, minrt=H), job("long", "small", 8, minrt=4 * H, submit=1))
    out = cycle(snap(hosts(2), running, p, t, usage))
    assert not out.starts and not out.stops
    assert [r.workload_id for r in out.reservations] == ["big"]


def test_best_fit_prefers_a_host_of_the_same_project():
    # h0 and h1 both have 4 free GPUs (equal best fit); h1 runs project a's work, h0
    # project b's. A new job of a goes next to a's work, so hosts stay one project's.
    t = tree(a=1, b=1)
    running = [
        run(job("b0", "b", 4, minrt=8 * H), "h0", (0, 1, 2, 3), NOW - H),
        run(job("a0", "a", 4, minrt=8 * H), "h1", (0, 1, 2, 3), NOW - H),
        run(job("x", "b", 8, minrt=8 * H), "h2", tuple(range(8)), NOW - H),
    ]
    out = cycle(snap(hosts(3), running, pending(job("a1", "a", 2)), t))
    (st,) = out.starts
    assert {h for h, _ in gpus_of(st)} == {"h1"}
    out = cycle(snap(hosts(3), running, pending(job("b1", "b", 2)), t))
    (st,) = out.starts
    assert {h for h, _ in gpus_of(st)} == {"h0"}


def test_unallocated_work_is_packed_with_unallocated_work():
    # h0 holds a's protected job, h1 a's unallocated sweep, both with 4 GPUs free. A new
    # unallocated job of a goes next to the sweep, so h1 stays one host that any
    # allocated job can empty at once; an allocated job of a goes next to a's protected
    # work.
    t = tree(a=1, b=1)
    running = [
        run(job("a0", "a", 4, minrt=8 * H), "h0", (0, 1, 2, 3), NOW - H),
        run(job("s0", "a", 4, minrt=0), "h1", (0, 1, 2, 3), NOW - H),
        run(job("x", "b", 8, minrt=8 * H), "h2", tuple(range(8)), NOW - H),
    ]
    out = cycle(snap(hosts(3), running, pending(job("s1", "a", 2, minrt=0)), t))
    (st,) = out.starts
    assert {h for h, _ in gpus_of(st)} == {"h1"}
    out = cycle(snap(hosts(3), running, pending(job("a1", "a", 2)), t))
    (st,) = out.starts
    assert {h for h, _ in gpus_of(st)} == {"h0"}


def test_reservation_time_counts_only_jobs_the_large_job_may_preempt():
    # big ranks above mid now, but with its 16 GPUs x 1 h charged it would not (16 h of
    # usage against mid's 10 h at equal weights): mid's jobs past their protection are
    # not its victims (no preemption cycles), so the hosts are not "usable now".
    t = tree(big=1, mid=1)
    usage = {"big": 0.0, "mid": 10 * H}
    running = [
        run(job("m0", "mid", 8, minrt=H), "h0", tuple(range(8)), NOW - 2 * H),
        run(job("m1", "mid", 8, minrt=H), "h1", tuple(range(8)), NOW - 2 * H),
    ]
    p = pending(job("big", "big", 16, minrt=H))
    out = cycle(snap(hosts(2), running, p, t, usage))
    assert not out.starts and not out.stops
    (res,) = out.reservations
    assert "may not preempt" in res.reason and "usable in" not in res.reason


def test_the_no_block_note_counts_its_gpus_in_words():
    # the demo's queue read "no free aligned block of 1 GPUs"
    assert no_block_note(1) == "no free aligned block of 1 GPU and no job it may preempt"
    assert no_block_note(8) == "no free aligned block of 8 GPUs and no job it may preempt"
