"""Idle-GPU reclaim (`Policy.idle_reclaim`): a running job past its minimum runtime whose
GPUs have been idle for `idle_reclaim_after_s` may be preempted by any allocated job
that needs GPUs, and goes first (before unallocated work and before its project's other
jobs); protection stays inviolate; off by default.

Unit cases, then a hypothesis property over crowded clusters with idle and busy work
(counted, so that the property provably reaches the cases it is about)."""

from __future__ import annotations

from hypothesis import HealthCheck, event, given, settings
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
    StopReason,
    Workload,
    plan,
)
from scheduler.core.engine.types import RULE_LABELS, STOP_RULES, rule_label, stop_rule

H = 3600.0
NOW = 100 * H
TREE = BudgetNode("r", children=(BudgetNode("a", 1), BudgetNode("b", 1)))
ON = Policy(idle_reclaim=True, idle_reclaim_after_s=1800.0)


def run(
    jid: str,
    project: str,
    gpus: int,
    gpu0: int,
    *,
    started: float,
    idle_since: float | None = None,
    min_rt: float = H,
    priority: int = 0,
    host: str = "h0",
) -> RunningWorkload:
    w = Workload(jid, project, gpus, 0.0, min_runtime_s=min_rt, resumable=True, priority=priority)
    return RunningWorkload(
        w,
        (Placement(host, tuple(range(gpu0, gpu0 + gpus))),),
        started_s=started,
        allocated=min_rt > 0,
        idle_since_s=idle_since,
    )


def snapshot(
    running: list[RunningWorkload], pending: list[Workload], usage: dict[str, float]
) -> Snapshot:
    by_project: dict[str, list[Workload]] = {}
    for w in pending:
        by_project.setdefault(w.project, []).append(w)
    return Snapshot((Host("h0", 8),), running, by_project, TREE, usage)


def stops(p: CyclePlan) -> dict[str, StopReason]:
    return {s.workload_id: s.reason_code for s in p.stops}


def test_the_rule_has_one_name_and_label() -> None:
    assert stop_rule(StopReason.IDLE) == "idle_reclaim"
    assert STOP_RULES[StopReason.IDLE] == "idle_reclaim"
    assert rule_label("idle_reclaim") == RULE_LABELS["idle_reclaim"]
    assert "Idle GPUs reclaimed" in rule_label("idle_reclaim")


def test_an_idle_job_of_a_better_served_project_is_reclaimed_only_when_on() -> None:
    # project a (less served, ranks first) holds the whole host with one idle job; b's
    # job may not preempt a by fair share, but may take a's idle GPUs with reclaim on
    idle = run("a1", "a", 8, 0, started=NOW - 3 * H, idle_since=NOW - 2 * H)
    s = snapshot([idle], [Workload("b1", "b", 8, NOW - H, min_runtime_s=H)], {"b": 1e9})
    assert plan(s, Policy(), NOW).stops == ()
    p = plan(s, ON, NOW)
    assert stops(p) == {"a1": StopReason.IDLE}
    assert [st.workload_id for st in p.starts] == ["b1"]
    reason = p.stops[0].reason
    assert "idle for at least 30 min" in reason and "b1" in reason


def test_protection_and_the_idle_duration_are_kept() -> None:
    pending = [Workload("b1", "b", 8, NOW - H, min_runtime_s=H)]
    usage = {"b": 1e9}
    # idle for hours but inside its min runtime (4 h from a start 3 h ago)
    protected = run("a1", "a", 8, 0, started=NOW - 3 * H, idle_since=NOW - 2 * H, min_rt=4 * H)
    assert plan(snapshot([protected], pending, usage), ON, NOW).stops == ()
    # past its min runtime but idle for 10 min only (30 min needed)
    recent = run("a1", "a", 8, 0, started=NOW - 3 * H, idle_since=NOW - 600.0)
    assert plan(snapshot([recent], pending, usage), ON, NOW).stops == ()


def test_idle_goes_before_the_projects_other_work_and_unallocated_work() -> None:
    # a's lower-priority busy job lost less work than the idle one: without reclaim the
    # higher-priority job of a takes the busy one; with it, the idle one goes first,
    # before unallocated work too
    busy = run("a-busy", "a", 4, 0, started=NOW - 2 * H + 60.0)
    idle = run("a-idle", "a", 2, 4, started=NOW - 5 * H, idle_since=NOW - 4 * H)
    free = run("free", "b", 2, 6, started=NOW - 60.0, min_rt=0.0)
    want = Workload("a-new", "a", 2, NOW - H, min_runtime_s=H, priority=5)
    s = snapshot([busy, idle, free], [want], {})
    assert stops(plan(s, Policy(), NOW)) == {"free": StopReason.UNALLOCATED}
    assert stops(plan(s, ON, NOW)) == {"a-idle": StopReason.IDLE}


@st.composite
def idle_cluster(draw: st.DrawFn) -> Snapshot:
    """One host of 8 GPUs full of a's work (busy and idle, protected or not, various
    priorities) and b's work, with a and b waiting with jobs of every size."""
    running: list[RunningWorkload] = []
    g = 0
    n = 0
    while g < 8:
        size = draw(st.sampled_from([s for s in (1, 2, 4) if g % s == 0 and g + s <= 8]))
        project = draw(st.sampled_from(["a", "a", "b"]))
        started = NOW - draw(st.sampled_from([0.5, 1.5, 3.0, 6.0])) * H
        min_rt = draw(st.sampled_from([0.0, H, 2 * H, 4 * H]))
        idle_since = draw(st.sampled_from([None, None, started + 600.0, NOW - 600.0]))
        if idle_since is not None and idle_since > NOW:
            idle_since = NOW
        prio = draw(st.integers(0, 2))
        running.append(
            run(
                f"r{n}",
                project,
                size,
                g,
                started=started,
                idle_since=idle_since,
                min_rt=min_rt,
                priority=prio,
            )
        )
        g += size
        n += 1
    pending = [
        Workload(
            f"p{i}",
            draw(st.sampled_from(["a", "b"])),
            draw(st.sampled_from([1, 2, 4, 8])),
            NOW - H,
            min_runtime_s=H,
            priority=draw(st.integers(0, 3)),
        )
        for i in range(draw(st.integers(1, 3)))
    ]
    pending.sort(key=lambda w: (-w.priority, w.submit_s, w.id))
    usage = {"a": draw(st.sampled_from([0.0, 1e6])), "b": draw(st.sampled_from([0.0, 1e6]))}
    return snapshot(running, pending, usage)


COUNTS = {"examples": 0, "idle_reclaimed": 0, "idle_before_busy": 0}
EXAMPLES = 400


def _idle_enough(rw: RunningWorkload) -> bool:
    return rw.idle_since_s is not None and NOW - rw.idle_since_s >= ON.idle_reclaim_after_s


def _past_protection(rw: RunningWorkload) -> bool:
    return not rw.allocated or rw.started_s + rw.workload.min_runtime_s <= NOW


@settings(
    max_examples=EXAMPLES, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck)
)
@given(idle_cluster())
def test_reclaim_keeps_contracts_and_takes_idle_work_first(s: Snapshot) -> None:
    p = plan(s, ON, NOW, EngineState())
    by_id = {rw.workload.id: rw for rw in s.running}
    stopped = {x.workload_id for x in p.stops}
    COUNTS["examples"] += 1
    for x in p.stops:
        rw = by_id[x.workload_id]
        # no contract broken: nothing stopped inside its minimum runtime
        assert _past_protection(rw), x
        if x.reason_code == StopReason.IDLE:
            assert _idle_enough(rw)
            COUNTS["idle_reclaimed"] += 1
            event("idle reclaimed")
    # an idle job past protection goes before a busy one of its project: whenever a
    # busy allocated job of a project is stopped for a job of that same project, no
    # reclaimable idle job of that project that the preemptor could also have taken
    # (same size or larger: one block) was left running
    preemptor = {x.workload_id: x.for_workload_id for x in p.stops}
    for vid, for_id in preemptor.items():
        rw = by_id[vid]
        if _idle_enough(rw) or not rw.allocated:
            continue
        for other in s.running:
            o = other.workload
            if (
                o.project == rw.workload.project
                and o.id not in stopped
                and _idle_enough(other)
                and _past_protection(other)
                and o.gpus >= rw.workload.gpus
            ):
                raise AssertionError(f"busy {vid} stopped for {for_id} before idle {o.id}")
    busy_same = [
        rw for rw in s.running if rw.allocated and not _idle_enough(rw) and _past_protection(rw)
    ]
    idle_same = [rw for rw in s.running if _idle_enough(rw) and _past_protection(rw)]
    if any(
        by_id[x.workload_id] in idle_same
        and any(b.workload.project == by_id[x.workload_id].workload.project for b in busy_same)
        for x in p.stops
    ):
        COUNTS["idle_before_busy"] += 1
        event("idle stopped while a busy job of its project could have been")


def test_the_property_reaches_its_cases() -> None:
    """Counted over the property's examples: those of its own run when it ran in this
    process before and passed (exactly EXAMPLES calls; a failing run shrinks, with other
    calls; the module is one xdist group), else a run of its own (the same examples)."""
    if COUNTS["examples"] != EXAMPLES:
        COUNTS.update(examples=0, idle_reclaimed=0, idle_before_busy=0)
        test_reclaim_keeps_contracts_and_takes_idle_work_first()
    assert COUNTS["examples"] >= 300
    assert COUNTS["idle_reclaimed"] >= 20, COUNTS
    assert COUNTS["idle_before_busy"] >= 5, COUNTS


def test_a_host_sized_job_takes_the_idle_host_not_the_busy_one() -> None:
    # two hosts: h0 held by an idle job of a, h1 by a busy one of a (a ranks first, so
    # fair share lets b take neither): with reclaim b's 8-GPU job gets h0
    idle = run("a-idle", "a", 8, 0, started=NOW - 3 * H, idle_since=NOW - 2 * H, host="h0")
    busy = run("a-busy", "a", 8, 0, started=NOW - 3 * H, host="h1")
    s = Snapshot(
        (Host("h0", 8), Host("h1", 8)),
        [idle, busy],
        {"b": [Workload("b1", "b", 8, NOW - H, min_runtime_s=H)]},
        TREE,
        {"b": 1e9},
    )
    p = plan(s, ON, NOW)
    assert stops(p) == {"a-idle": StopReason.IDLE}
    assert [x.workload_id for x in p.starts] == ["b1"]
    assert p.starts[0].placements[0].host == "h0"
