"""Hypothesis invariants of one cycle, for every mode."""

from __future__ import annotations

from dataclasses import replace

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from scheduler.core.engine import (
    BudgetNode,
    Host,
    Placement,
    Policy,
    RunningWorkload,
    Snapshot,
    Workload,
    plan,
)

H = 3600.0
NOW = 50 * H
PROJECTS = ["a", "b", "c", "z"]
TREE = BudgetNode(
    "r",
    children=(
        BudgetNode("X", 2, (BudgetNode("a", 1), BudgetNode("b", 3))),
        BudgetNode("c", 1),
        BudgetNode("z", 0),
    ),
)


@st.composite
def snapshots(draw):
    nh = draw(st.integers(1, 4))
    hosts = [Host(f"h{i}", 8, healthy=draw(st.booleans()) or i == 0) for i in range(nh)]
    running = []
    n = 0
    for h in hosts:
        pos = 0
        while pos < 8:
            size = draw(st.sampled_from([1, 2, 4, 8]))
            if pos % size or pos + size > 8:
                pos += 1
                continue
            if draw(st.booleans()):
                w = Workload(
                    f"r{n}",
                    draw(st.sampled_from(PROJECTS)),
                    size,
                    0.0,
                    draw(st.sampled_from([0.0, H, 4 * H])),
                    draw(st.booleans()),
                    draw(st.integers(0, 2)),
                )
                started = NOW - draw(st.sampled_from([60.0, 0.5 * H, 2 * H, 9 * H]))
                running.append(
                    RunningWorkload(
                        w,
                        (Placement(h.name, tuple(range(pos, pos + size))),),
                        started,
                        w.min_runtime_s > 0,
                        None,
                    )
                )
                n += 1
            pos += size
    pend: dict[str, list[Workload]] = {}
    for i in range(draw(st.integers(0, 25))):
        p = draw(st.sampled_from(PROJECTS))
        w = Workload(
            f"p{i}",
            p,
            draw(st.sampled_from([1, 2, 3, 4, 8, 16, 12])),
            float(i),
            draw(st.sampled_from([0.0, 600.0, H])),
            draw(st.booleans()),
            draw(st.integers(0, 2)),
        )
        pend.setdefault(p, []).append(w)
    for lst in pend.values():
        lst.sort(key=lambda w: (-w.priority, w.submit_s, w.id))
    usage = {p: draw(st.sampled_from([0.0, 10 * H, 50 * H, 200 * H])) for p in PROJECTS}
    return Snapshot(hosts=hosts, running=running, pending=pend, tree=TREE, usage=usage)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(snapshots(), st.sampled_from(["fairshare", "fifo", "priority", "static"]))
def test_cycle_invariants(s: Snapshot, mode: str):
    policy = Policy(mode=mode, max_min_runtime_s=8 * H)
    out = plan(s, policy, NOW)
    healthy = {h.name for h in s.hosts if h.healthy}
    running = {r.workload.id: r for r in s.running}
    pending = {w.id: w for lst in s.pending.values() for w in lst}

    # Stops name running jobs, once; starts name pending jobs, once.
    stopped = [x.workload_id for x in out.stops]
    assert len(stopped) == len(set(stopped)) and set(stopped) <= set(running)
    started = [x.workload_id for x in out.starts]
    assert len(started) == len(set(started)) and set(started) <= set(pending)

    # No GPU given twice: apply stops, then starts.
    busy = {
        (p.host, i)
        for r in s.running
        if r.workload.id not in set(stopped)
        for p in r.placements
        for i in p.gpu_indices
    }
    for x in out.starts:
        w = pending[x.workload_id]
        gpus = [(p.host, i) for p in x.placements for i in p.gpu_indices]
        assert len(gpus) == w.gpus == len(set(gpus))
        assert not set(gpus) & busy
        assert all(p.host in healthy for p in x.placements)
        if len(x.placements) == 1 and w.gpus <= 8:
            idx = x.placements[0].gpu_indices
            block = 1 << (w.gpus - 1).bit_length()
            assert idx[0] % block == 0 and idx == tuple(range(idx[0], idx[0] + w.gpus))
        busy |= set(gpus)
        # Unallocated work is never charged.
        assert x.allocated == (w.min_runtime_s > 0)

    # No protected job is preempted (drain waits for the protection as well).
    for x in out.stops:
        r = running[x.workload_id]
        if r.allocated:
            assert r.started_s + min(r.workload.min_runtime_s, policy.max_min_runtime_s) <= NOW or (
                mode == "priority"
            )
        assert x.requeue == r.workload.resumable
        assert x.reason
        # A preemption's beneficiary starts in the same plan (drains have none).
        assert x.for_workload_id is None or x.for_workload_id in started

    if mode == "fairshare":
        # Zero-weight project: allocated jobs never start.
        assert not any(pending[i].project == "z" and pending[i].min_runtime_s > 0 for i in started)
        # Queue: allocated before unallocated, positions 1..n, everyone not started listed.
        kinds = [pending[q.workload_id].min_runtime_s > 0 for q in out.queue]
        assert kinds == sorted(kinds, reverse=True)
        assert [q.position for q in out.queue] == list(range(1, len(out.queue) + 1))
        assert {q.workload_id for q in out.queue} == set(pending) - set(started)
        assert all(q.reason for q in out.queue)

    # Deterministic; explaining the queue changes no decision.
    assert plan(s, policy, NOW) == out
    quiet = plan(s, replace(policy, explain_queue=False), NOW)
    assert (quiet.starts, quiet.stops, quiet.reservations) == (
        out.starts,
        out.stops,
        out.reservations,
    )


@settings(max_examples=60, deadline=None)
@given(snapshots())
def test_protected_jobs_survive_in_fairshare_even_with_urgent_demand(s: Snapshot):
    out = plan(s, Policy(), NOW)
    protected = {
        r.workload.id
        for r in s.running
        if r.allocated and r.started_s + min(r.workload.min_runtime_s, 8 * H) > NOW
    }
    assert not protected & {x.workload_id for x in out.stops}
