"""Crowded cluster snapshots (hypothesis generators) and `check_plan`, the invariants
every planned cycle keeps (listed in `tests/core/engine/test_contended_properties.py`):
shared by the engine's property tests, which import them from here, never from
another test module."""

from __future__ import annotations

import re
from collections import Counter

from hypothesis import event
from hypothesis import strategies as st

from scheduler.core.engine import (
    BudgetNode,
    CyclePlan,
    EngineState,
    Host,
    Placement,
    Policy,
    RunningWorkload,
    Snapshot,
    Start,
    Stop,
    StopReason,
    Workload,
    plan,
)
from scheduler.core.engine.budget_tree import entitled_shares
from scheduler.core.engine.fairshare import compute_fair_share
from tests.core.engine.helpers import gpus_of

H = 3600.0
NOW = 100 * H
CAP = 8 * H
PROJECTS = ["a", "b", "c", "d"]
TREE = BudgetNode(
    "r",
    children=(
        BudgetNode("X", 2, (BudgetNode("a", 1), BudgetNode("b", 3))),
        BudgetNode("Y", 1, (BudgetNode("c", 1), BudgetNode("d", 1))),
    ),
)


@st.composite
def crowded(draw: st.DrawFn) -> Snapshot:
    """A full cluster: one project (the heavy one) has used far more than its share and
    holds most GPUs, partly past protection; the others wait with jobs of every size."""
    n_hosts = draw(st.integers(2, 4))
    hosts = [Host(f"h{i}", 8, healthy=i > 0 or draw(st.integers(0, 9)) > 0) for i in range(n_hosts)]
    heavy = draw(st.sampled_from(PROJECTS))
    running: list[RunningWorkload] = []
    for h in hosts:
        # a host is mixed, empty, or all preemptible work (so whole-host jobs can start)
        host_kind = draw(st.sampled_from(["mixed", "mixed", "empty", "preemptible"]))
        pos = 8 if host_kind == "empty" else 0
        while pos < 8:
            size = draw(st.sampled_from([1, 2, 4, 8]))
            if pos % size or pos + size > 8:
                size = 1
            kind = draw(st.sampled_from(["heavy", "heavy", "other", "unallocated"]))
            if host_kind == "preemptible" and kind == "other":
                kind = "unallocated"
            project = heavy if kind == "heavy" else draw(st.sampled_from(PROJECTS))
            min_rt = 0.0 if kind == "unallocated" else draw(st.sampled_from([H, 2 * H, 10 * H]))
            # 9 h ago with a 10 h min runtime: unprotected only because of the 8 h cap
            ran = draw(st.sampled_from([0.5 * H, 3 * H, 9 * H]))
            if host_kind == "preemptible":
                ran = 9 * H
            resumable = draw(st.booleans())
            ckpt = None
            if resumable and draw(st.booleans()):
                ckpt = NOW - ran + draw(st.sampled_from([0.5, 1.0, 2.0])) * H
                ckpt = min(ckpt, NOW)
            w = Workload(
                f"r{len(running)}", project, size, 0.0, min_rt, resumable, draw(st.integers(0, 1))
            )
            running.append(
                RunningWorkload(
                    w,
                    (Placement(h.name, tuple(range(pos, pos + size))),),
                    NOW - ran,
                    min_rt > 0,
                    ckpt,
                )
            )
            pos += size
    pending: dict[str, list[Workload]] = {}
    for i in range(draw(st.integers(1, 12))):
        project = draw(st.sampled_from(PROJECTS))
        gpus = draw(st.sampled_from([1, 2, 4, 8, 16, 16, 16]))
        prio = draw(st.integers(0, 3))
        min_rt = draw(st.sampled_from([0.0, H, H, 2 * H]))
        pending.setdefault(project, []).append(
            Workload(f"p{i}", project, gpus, float(i), min_rt, True, prio)
        )
    for i in range(draw(st.integers(0, 3))):  # urgent work of the heavy project itself
        gpus = draw(st.sampled_from([1, 2, 4]))
        w = Workload(f"u{i}", heavy, gpus, float(i), H, True, 3)
        pending.setdefault(heavy, []).append(w)
    for lst in pending.values():
        lst.sort(key=lambda w: (-w.priority, w.submit_s, w.id))
    usage = {p: draw(st.sampled_from([0.0, 5 * H, 20 * H])) for p in PROJECTS}
    usage[heavy] = 2000 * H
    return Snapshot(hosts=hosts, running=running, pending=pending, tree=TREE, usage=usage)


def share_floor(s: Snapshot, policy: Policy) -> set[str]:
    """The jobs on the share floor, by the glossary's definition (written apart from
    the engine's): per project under its entitled share over the window, its oldest
    allocated jobs on healthy hosts while those before hold less than its share."""
    entitled = entitled_shares(s.tree)
    healthy = {h.name for h in s.hosts if h.healthy}
    gpus = sum(h.gpus for h in s.hosts if h.healthy)
    out: set[str] = set()
    for proj, ent in entitled.items():
        if ent <= 0 or s.usage.get(proj, 0.0) >= ent * gpus * policy.lookback_s:
            continue
        mine = sorted(
            (r.started_s, r.workload.id, r.workload.gpus)
            for r in s.running
            if r.allocated
            and r.workload.project == proj
            and all(p.host in healthy for p in r.placements)
        )
        below = 0
        for _, job_id, g in mine:
            if below >= ent * gpus:
                break
            out.add(job_id)
            below += g
    return out


def relative_usage(s: Snapshot, policy: Policy):
    """Usage relative to entitled share (a fraction), with extra GPU-seconds."""
    entitled = entitled_shares(s.tree)
    gpus = sum(h.gpus for h in s.hosts if h.healthy)

    def rel(proj: str, extra: float) -> float:
        denom = entitled.get(proj, 0.0) * gpus * policy.lookback_s
        return (s.usage.get(proj, 0.0) + extra) / denom if denom > 0 else float("inf")

    return rel


def _note_floor_jobs(
    s: Snapshot, out: CyclePlan, pending: dict[str, Workload], floor: set[str], seen: Counter[str]
) -> None:
    """Count a floor job past its protection of a project ranked below a waiting
    project: without the floor it could be a fair-share victim."""
    ranked = [p for p, _ in out.project_order]
    waiting = {w.project for w in pending.values() if w.min_runtime_s > 0}
    for r in s.running:
        w = r.workload
        if (
            w.id in floor
            and r.started_s + min(w.min_runtime_s, CAP) <= NOW
            and any(ranked.index(p) < ranked.index(w.project) for p in waiting if p in ranked)
        ):
            seen["floor job that fair share would rank below"] += 1
            return


def _check_rule(
    s: Snapshot,
    out: CyclePlan,
    policy: Policy,
    stop: Stop,
    victim: RunningWorkload,
    preemptor: Workload,
    started: dict[str, Start],
    charge_at: dict[str, float],
    floor: set[str],
    seen: Counter[str],
) -> None:
    """The stop's own rule holds: fair share, priority, the short-job reserve, or none
    (then only unallocated work)."""
    vw = victim.workload
    if stop.reason_code == StopReason.FAIR_SHARE:
        assert vw.project != preemptor.project
        if policy.share_floor and vw.id in floor:
            seen["floor job taken by a project served about as well or worse"] += 1
            rel = relative_usage(s, policy)
            # within the floor's margin the two count as served equally (5 points)
            assert rel(preemptor.project, charge_at[preemptor.id]) < rel(vw.project, 0.0) + 5.0, (
                "a job on its project's share floor was preempted"
            )
        usage = dict(s.usage)
        usage[preemptor.project] = usage.get(preemptor.project, 0.0) + charge_at[preemptor.id]
        factor = compute_fair_share(TREE, usage).factor
        assert factor[vw.project] <= factor[preemptor.project], "a preemption cycle"
    elif stop.reason_code == StopReason.PRIORITY:
        assert vw.project == preemptor.project and vw.priority < preemptor.priority
    elif stop.reason_code == StopReason.SHORT_RESERVE:
        # allocated work past its protection on a host the short-job reserve holds,
        # for a short job that starts there
        assert victim.allocated and 0 < preemptor.min_runtime_s <= policy.short_job_max_s
        held = set(out.short_reserve)
        on = {p.host for p in victim.placements}
        if vw.project == preemptor.project and vw.priority >= preemptor.priority:
            # the short-job trade: its own project's longer work, on one host, which
            # the short job takes (anywhere but another reservation's hosts)
            seen["stop own short trade"] += 1
            assert vw.priority == preemptor.priority and held
            assert min(vw.min_runtime_s, policy.max_min_runtime_s) > policy.short_job_max_s
            assert len(on) == 1 and {p.host for p in started[preemptor.id].placements} == on
            assert not on & {h for r in out.reservations for h in r.hosts}
        else:
            assert on <= held
            assert {p.host for p in started[preemptor.id].placements} <= held
    else:
        assert not victim.allocated


def check_plan(s: Snapshot, seen: Counter[str], policy: Policy | None = None) -> CyclePlan:
    """Plan `s` (warm and cold), check every invariant above, count the cases reached."""
    policy = policy or Policy(max_min_runtime_s=CAP)
    out = plan(s, policy, NOW, EngineState())
    assert out == plan(s, policy, NOW)  # warm state or cold: same
    running = {r.workload.id: r for r in s.running}
    pending = {w.id: w for lst in s.pending.values() for w in lst}
    started = {x.workload_id: x for x in out.starts}
    gpus_of_host = {h.name: h.gpus for h in s.hosts}
    floor = share_floor(s, policy) if policy.share_floor else set()
    _note_floor_jobs(s, out, pending, floor, seen)

    charged: dict[str, float] = {}
    charge_at: dict[str, float] = {}
    for x in out.starts:  # what each start's project has been charged so far this cycle
        w = pending[x.workload_id]
        if x.allocated:
            charged[w.project] = charged.get(w.project, 0.0) + w.gpus * min(w.min_runtime_s, CAP)
        charge_at[w.id] = charged.get(w.project, 0.0)
        if len(x.placements) > 1:
            seen["multi-host start"] += 1
            sizes = {gpus_of_host[p.host] for p in x.placements}
            assert len(sizes) == 1 and w.gpus == sizes.pop() * len(x.placements)
            assert all(p.gpu_indices == tuple(range(gpus_of_host[p.host])) for p in x.placements)
            assert len({p.host for p in x.placements}) == len(x.placements)

    for stop in out.stops:
        victim = running[stop.workload_id]
        vw = victim.workload
        protected_until = victim.started_s + min(vw.min_runtime_s, CAP) if victim.allocated else 0
        assert protected_until <= NOW, "a protected job was stopped"
        if victim.allocated and victim.started_s + vw.min_runtime_s > NOW:
            seen["preempted thanks to the 8 h cap"] += 1
        if stop.reason_code == StopReason.DRAIN:
            continue
        assert stop.for_workload_id in started, "a victim's preemptor did not start"
        preemptor = pending[stop.for_workload_id]
        seen[f"stop {stop.reason_code.value}"] += 1
        base = victim.started_s
        if vw.resumable and victim.last_checkpoint_s is not None:
            base = max(base, victim.last_checkpoint_s)
            if victim.last_checkpoint_s > victim.started_s:
                seen["victim with a checkpoint"] += 1
        lost = re.search(r"([0-9.]+) GPU-h of work since its last checkpoint is lost", stop.reason)
        assert lost is not None and lost.group(1) == f"{vw.gpus * (NOW - base) / 3600:.1f}"
        _check_rule(s, out, policy, stop, victim, preemptor, started, charge_at, floor, seen)
    if out.reservations:
        seen["reservation"] += 1
    for name in seen:
        event(name)
    return out


SHORT = 15 * 60.0  # the short-job limit of the reserve's properties


def long_work_off_held_hosts(s: Snapshot, out: CyclePlan) -> set[str]:
    """The hosts the short-job reserve holds in `out`, after checking that no allocated
    job longer than the short-job limit starts on one of them."""
    held = set(out.short_reserve)
    wanted = {w.id: w for lst in s.pending.values() for w in lst}
    for x in out.starts:
        w = wanted[x.workload_id]
        if x.allocated and min(w.min_runtime_s, CAP) > SHORT:
            assert not {p.host for p in x.placements} & held
    return held


def started_on(result) -> dict[str, set[str]]:
    return {x.workload_id: {h for h, _ in gpus_of(x)} for x in result.starts}


@st.composite
def crowded_with_short_jobs(draw: st.DrawFn) -> tuple[Snapshot, int]:
    s = draw(crowded())
    waiting = {p: list(lst) for p, lst in s.pending.items()}
    for i in range(draw(st.integers(1, 4))):
        project = draw(st.sampled_from(PROJECTS))
        gpus = draw(st.sampled_from([1, 2, 4, 8]))
        w = Workload(
            f"s{i}", project, gpus, float(i), draw(st.sampled_from([60.0, SHORT])), False, 2
        )
        waiting.setdefault(project, []).append(w)
    for lst in waiting.values():
        lst.sort(key=lambda w: (-w.priority, w.submit_s, w.id))
    return Snapshot(s.hosts, s.running, waiting, s.tree, s.usage), draw(st.integers(1, 2))
