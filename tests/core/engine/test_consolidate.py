"""Consolidation (`Policy.consolidate`, `scheduler.core.engine.consolidate`): a planned
migration that frees a block for a waiting job.

Invariants (hypothesis, on fragmented clusters and on the crowded generator):
- no min-runtime contract is broken: a moved job is past its protection (capped);
- a moved job is resumable, on one host, and starts again in the same plan, with as
  many GPUs, on another host; its waiting job starts in the same plan;
- no GPU is double-booked once the plan's stops and then its starts are applied;
- with the setting off, no plan moves anything.
"""

from __future__ import annotations

from collections import Counter

from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from scheduler.core.engine import (
    CyclePlan,
    Host,
    Placement,
    Policy,
    RunningWorkload,
    Snapshot,
    StopReason,
    Workload,
    plan,
)
from tests.core.engine.crowded import CAP, NOW, PROJECTS, TREE, crowded
from tests.core.engine.helpers import H, cycle, hosts, job, pending, run, snap, tree


def _fragmented_snapshot() -> Snapshot:
    """h0: a 2-GPU job of `a` past its protection (resumable), 6 GPUs free; h1: an
    interactive session (protected, not resumable) on 6 GPUs, 2 free; h2: empty, for
    the short-job reserve (`RESERVE`). `b` waits with an 8-GPU job and ranks below `a`,
    so it may not preempt `a`."""
    a1 = job("a1", "a", 2, minrt=H)
    sess = job("s1", "a", 6, minrt=8 * H, resumable=False)
    b8 = job("b8", "b", 8, minrt=H)
    running = [
        run(a1, "h0", (0, 1), started=NOW - 3 * H, ckpt=NOW - 600),
        run(sess, "h1", (0, 1, 2, 3, 4, 5), started=NOW - H),
    ]
    return snap(hosts(3), running, pending(b8), tree(a=1, b=1), usage={"b": 1e9})


# consolidation runs only while the short-job reserve holds a host: one fixed host here
RESERVE = {"consolidate": True, "short_reserve_hosts": 1}


def test_a_waiting_job_gets_the_block_that_moving_one_job_frees():
    s = _fragmented_snapshot()
    off = cycle(s, NOW, short_reserve_hosts=1)
    assert not off.starts and not off.stops
    on = cycle(s, NOW, **RESERVE)
    assert on.short_reserve == ("h2",)
    assert [(x.workload_id, x.reason_code) for x in on.stops] == [("a1", StopReason.MIGRATE)]
    starts = {x.workload_id: x for x in on.starts}
    assert starts["a1"].placements == (Placement("h1", (6, 7)),)
    assert starts["b8"].placements == (Placement("h0", tuple(range(8))),)
    assert starts["a1"].allocated and on.stops[0].for_workload_id == "b8"


def test_no_move_when_the_lost_work_exceeds_what_it_puts_to_work():
    """The moved job last saved 3 h ago: 2 GPUs x 3 h lost is more than 8 GPUs x 30 min."""
    s = _fragmented_snapshot()
    a1 = s.running[0]
    stale = RunningWorkload(a1.workload, a1.placements, a1.started_s, True, None)
    s2 = Snapshot(s.hosts, [stale, s.running[1]], s.pending, s.tree, s.usage)
    out = cycle(s2, NOW, **RESERVE)
    assert not out.stops and not out.starts


def test_no_move_of_protected_or_unresumable_work():
    s = _fragmented_snapshot()
    a1 = s.running[0]
    for w, started in (
        (a1.workload, NOW - 0.5 * H),  # inside its 1 h min runtime
        (job("a1", "a", 2, minrt=H, resumable=False), NOW - 3 * H),
    ):
        moved = RunningWorkload(w, a1.placements, started, True, NOW - 600)
        s2 = Snapshot(s.hosts, [moved, s.running[1]], s.pending, s.tree, s.usage)
        out = cycle(s2, NOW, **RESERVE)
        assert not out.stops and not out.starts


def test_no_move_when_the_moved_job_has_nowhere_to_go():
    """h1 has one free GPU: the 2-GPU job cannot start again elsewhere, so nothing moves."""
    s = _fragmented_snapshot()
    sess = job("s1", "a", 7, minrt=8 * H, resumable=False)
    running = [s.running[0], run(sess, "h1", tuple(range(7)), started=NOW - H)]
    out = cycle(Snapshot(s.hosts, running, s.pending, s.tree, s.usage), NOW, **RESERVE)
    assert not out.stops and not out.starts


@st.composite
def fragmented(draw: st.DrawFn) -> Snapshot:
    """Hosts of 8 GPUs filled in part with small jobs (some protected, some not
    resumable, some on the share floor's projects), and jobs of 2-16 GPUs waiting."""
    n = draw(st.integers(3, 6))  # one held by the short-job reserve
    hs = [Host(f"h{i}", 8, healthy=i > 0 or draw(st.integers(0, 9)) > 0) for i in range(n)]
    running: list[RunningWorkload] = []
    for h in hs:
        pos = 0
        while pos < 8:
            size = draw(st.sampled_from([1, 1, 2, 2, 4]))
            if pos % size or pos + size > 8:
                size = 1
            if draw(st.integers(0, 2)) == 0:  # a hole
                pos += size
                continue
            project = draw(st.sampled_from(PROJECTS[:3]))
            min_rt = draw(st.sampled_from([0.0, H, 2 * H, 10 * H]))
            ran = draw(st.sampled_from([0.25 * H, 1.5 * H, 3 * H, 9 * H]))
            resumable = draw(st.integers(0, 3)) > 0
            ckpt = None
            if resumable and ran > 0.5 * H:
                ckpt = NOW - draw(st.sampled_from([60.0, 600.0, 1500.0]))
            w = Workload(f"r{len(running)}", project, size, 0.0, min_rt, resumable, 0)
            pl = (Placement(h.name, tuple(range(pos, pos + size))),)
            running.append(RunningWorkload(w, pl, NOW - ran, min_rt > 0, ckpt))
            pos += size
    waiting: dict[str, list[Workload]] = {}
    for i in range(draw(st.integers(1, 6))):
        # mostly the project served far above its share: it may preempt no other's work
        project = draw(st.sampled_from(["d", "d", *PROJECTS]))
        gpus = draw(st.sampled_from([2, 4, 4, 8, 8, 16]))
        w = Workload(f"p{i}", project, gpus, float(i), H, True, 0)
        waiting.setdefault(project, []).append(w)
    usage = {p: draw(st.sampled_from([0.0, 50 * H, 2000 * H])) for p in PROJECTS}
    usage["d"] = 5000 * H
    return Snapshot(hosts=hs, running=running, pending=waiting, tree=TREE, usage=usage)


def check_moves(s: Snapshot, out: CyclePlan, seen: Counter[str]) -> None:
    """Every invariant of the module docstring on one plan."""
    running = {r.workload.id: r for r in s.running}
    size = {h.name: h.gpus for h in s.hosts}
    healthy = {h.name for h in s.hosts if h.healthy}
    started = {x.workload_id: x for x in out.starts}
    busy: set[tuple[str, int]] = set()
    stopped = {x.workload_id for x in out.stops}
    for r in s.running:
        if r.workload.id not in stopped:
            busy.update((p.host, g) for p in r.placements for g in p.gpu_indices)
    for x in out.starts:
        for p in x.placements:
            assert p.host in healthy
            for g in p.gpu_indices:
                assert 0 <= g < size[p.host] and (p.host, g) not in busy, "GPU double-booked"
                busy.add((p.host, g))
    for stop in out.stops:
        r = running[stop.workload_id]
        w = r.workload
        prot = r.started_s + min(w.min_runtime_s, CAP) if r.allocated else -1.0
        assert prot <= NOW, "a protected job was stopped"
        if stop.reason_code != StopReason.MIGRATE:
            continue
        seen["moved"] += 1
        assert w.resumable and len(r.placements) == 1 and stop.requeue
        again = started.get(w.id)
        assert again is not None, "a moved job did not start again in the same plan"
        assert again.allocated == r.allocated
        assert sum(len(p.gpu_indices) for p in again.placements) == w.gpus
        assert again.placements[0].host != r.placements[0].host
        assert stop.for_workload_id in started
    for name in seen:
        event(name)


def test_fragmented_cycles_keep_every_invariant_and_move_work():
    seen: Counter[str] = Counter()
    policy = Policy(max_min_runtime_s=CAP, short_reserve_hosts=1)

    @settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck))
    @given(fragmented())
    def check(s: Snapshot) -> None:
        out = plan(s, policy, NOW)
        check_moves(s, out, seen)
        off = plan(s, Policy(max_min_runtime_s=CAP, short_reserve_hosts=1, consolidate=False), NOW)
        assert all(x.reason_code != StopReason.MIGRATE for x in off.stops)

    check()
    assert seen["moved"] >= 10, dict(seen)


def test_crowded_cycles_with_consolidation_keep_every_invariant():
    seen: Counter[str] = Counter()
    policy = Policy(max_min_runtime_s=CAP, short_reserve_hosts=1)

    @settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
    @given(crowded())
    def check(s: Snapshot) -> None:
        check_moves(s, plan(s, policy, NOW), seen)

    check()
