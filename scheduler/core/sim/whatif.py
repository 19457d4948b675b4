"""What-if preview of a budget change (pure Python, no Django).

`run_whatif(cluster, before, after, records, ...)` replays one window of real jobs
(plain `JobRecord`s: submit time, GPUs, kind, min runtime, resumable, project and the
runtime they actually needed) through the simulator twice, with the current tree
(`before`) and the proposed one (`after`), and summarises each run per project with
`ledger.accounting.entitlement_summary`: delivered (allocated) GPU-hours, entitled
GPU-hours, their ratio and the p90 wait. The same engine makes the live decisions, so
the difference between the two runs is the effect of the weights alone.

The two replays are independent: with `parallel=True` they run in two fresh
processes, which halves the wall time on a machine with two free cores. They are
spawned, not forked: a fork of a process that has other threads (a web server, a
Celery worker, a test run with a browser) can copy a lock held by one of them and
hang forever in the child. The trees travel to them as plain tuples: the compiled
engine's frozen `BudgetNode` cannot be unpickled (its generated `__setstate__` assigns
to the frozen fields).
"""

from __future__ import annotations

import dataclasses
import logging
import math
import multiprocessing
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from typing import Any

from ledger.accounting import DemandSpan, entitlement_summary
from scheduler.core.engine.budget_tree import entitled_shares
from scheduler.core.engine.types import BudgetNode, stop_rule
from scheduler.core.sim.model import ClusterSpec, RunningAtStart, SimConfig, SimResult, TraceJob
from scheduler.core.sim.replay import leaf_projects, simulate
from scheduler.core.sim.report import percentile

__all__ = [
    "FIDELITY_SHARE",
    "JobRecord",
    "fidelity",
    "run_whatif",
    "summarise",
    "trace_from_records",
    "tree_data",
    "tree_from_data",
]

HOUR_S = 3600.0
log = logging.getLogger(__name__)

# A budget tree as plain data for another process: (name, weight, key, children).
TreeData = tuple[str, float, str, tuple[Any, ...]]


@dataclass(frozen=True, slots=True)
class JobRecord:
    """One real job as the what-if replays it; times in seconds on any common clock."""

    job_id: str
    project: str  # the project's key in the budget trees
    submit_s: float
    gpus: int
    runtime_s: float  # the running time it needed (or asked for) if never preempted
    min_runtime_s: float = 0.0
    resumable: bool = False
    kind: str = "training"
    priority: int = 0
    user: str = ""
    # its GPUs went idle this long into a run (its utilization; `TraceJob.idle_after_s`)
    idle_after_s: float | None = None
    # running when the window opens (submitted at its start, `runtime_s` the work it had
    # left then): it goes on running as that run (`TraceJob.running`; times on the same
    # clock as `submit_s`)
    running: RunningAtStart | None = None


def trace_from_records(
    records: Iterable[JobRecord], *, start_s: float, end_s: float, projects: Iterable[str]
) -> tuple[list[TraceJob], dict[str, int]]:
    """The simulator's trace of the jobs submitted in [start_s, end_s), times shifted so
    the window starts at 0, and the counts of jobs left out (by reason)."""
    known = set(projects)
    skipped = {"unknown_project": 0, "no_runtime": 0, "outside_window": 0}
    trace: list[TraceJob] = []
    for r in records:
        if not start_s <= r.submit_s < end_s:
            skipped["outside_window"] += 1
        elif r.project not in known:
            skipped["unknown_project"] += 1
        elif not r.runtime_s or r.runtime_s <= 0 or r.gpus <= 0:
            skipped["no_runtime"] += 1
        else:
            trace.append(
                TraceJob(
                    job_id=r.job_id,
                    project=r.project,
                    user=r.user,
                    submit_s=r.submit_s - start_s,
                    gpus=r.gpus,
                    duration_s=float(r.runtime_s),
                    min_runtime_s=float(r.min_runtime_s),
                    resumable=r.resumable,
                    priority=r.priority,
                    kind=r.kind,
                    idle_after_s=r.idle_after_s,
                    running=_shifted(r.running, start_s),
                )
            )
    trace.sort(key=lambda j: (j.submit_s, j.job_id))
    return trace, skipped


def _shifted(run: RunningAtStart | None, start_s: float) -> RunningAtStart | None:
    """A running job's run with its times relative to the window's start."""
    if run is None:
        return None
    until = run.protected_until_s
    return dataclasses.replace(
        run,
        started_s=run.started_s - start_s,
        protected_until_s=None if until is None else until - start_s,
    )


def idle_gpu_h_by_project(
    result: SimResult, idle_after: Mapping[str, float | None]
) -> dict[str, float]:
    """Per project: [allocated-but-idle GPU-hours](concepts.md#allocated-but-idle-gpu-hours),
    the GPU-time its runs held after their job's idle point (`idle_after` by job id)."""
    out: dict[str, float] = {}
    for iv in result.intervals:
        after = idle_after.get(iv.job_id)
        if after is None:
            continue
        held = max(0.0, iv.end_s - (iv.start_s + after)) * iv.gpus / HOUR_S
        out[iv.project] = out.get(iv.project, 0.0) + held
    return out


def summarise(
    result: SimResult, tree: BudgetNode, idle_after: Mapping[str, float | None] | None = None
) -> dict[str, dict[str, Any]]:
    """Per project: delivered and entitled GPU-hours, their ratio, p90 wait, jobs and
    allocated-but-idle GPU-hours (`idle_after`: the replayed jobs' idle points)."""
    t0, t1 = result.start_s, result.end_s
    demand = [
        DemandSpan(j.project, j.gpus, j.submit_s, j.end_s if j.end_s is not None else t1)
        for j in result.jobs
        if j.min_runtime_s > 0 and not j.rejected
    ]
    shares = entitled_shares(tree)
    ent = entitlement_summary(shares, result.intervals, demand, result.capacity, t0, t1)
    waits: dict[str, list[float]] = {}
    counts: dict[str, int] = {}
    for j in result.jobs:
        counts[j.project] = counts.get(j.project, 0) + 1
        open_wait = [t1 - j.pending_since_s] if j.pending_since_s is not None else []
        waits.setdefault(j.project, []).extend(j.waits_s or open_wait)
    idle = idle_gpu_h_by_project(result, idle_after or {})
    out: dict[str, dict[str, Any]] = {}
    for name, pe in ent.projects.items():
        w = sorted(waits.get(name, ()))
        out[name] = {
            "entitled_share": shares.get(name, 0.0),
            "delivered_gpu_h": pe.delivered_gpu_h,
            "capped_entitled_gpu_h": pe.entitled_gpu_h,
            "ratio": pe.ratio,
            "p90_replay_wait_s": percentile(w, 90) if w else None,
            "idle_gpu_h": idle.get(name, 0.0),
            "jobs": counts.get(name, 0),
        }
    return out


# The projects whose delivery the fidelity is judged on: the largest ones that together
# made this share of the recorded delivery (a project with a few GPU-hours may differ by
# any percentage without changing what a manager reads).
FIDELITY_SHARE = 0.9


def fidelity(
    recorded: Mapping[str, float], replayed: Mapping[str, float], share: float = FIDELITY_SHARE
) -> dict[str, Any]:
    """How far a replay with unchanged weights is from the record: per project the
    relative difference of delivered GPU-hours, |replayed - recorded| / recorded, over
    the projects that made `share` of the recorded delivery (largest first), and the
    worst of them. ``{"worst", "worst_project", "projects": {name: difference},
    "judged": [names]}``; worst None when nothing was delivered."""
    total = math.fsum(v for v in recorded.values() if v > 0)
    judged: list[str] = []
    covered = 0.0
    for name, value in sorted(recorded.items(), key=lambda kv: (-kv[1], kv[0])):
        if value <= 0 or (total > 0 and covered >= share * total - 1e-9):
            break
        judged.append(name)
        covered += value
    diffs = {
        name: abs(replayed.get(name, 0.0) - recorded[name]) / recorded[name] for name in judged
    }
    worst = max(diffs.items(), key=lambda kv: (kv[1], kv[0])) if diffs else None
    return {
        "worst": worst[1] if worst else None,
        "worst_project": worst[0] if worst else None,
        "projects": diffs,
        "judged": judged,
    }


def tree_data(tree: BudgetNode) -> TreeData:
    """The tree as nested plain tuples, which pickle whether the engine is compiled or not."""
    return (tree.name, tree.weight, tree.key, tuple(tree_data(c) for c in tree.children))


def tree_from_data(data: TreeData) -> BudgetNode:
    """The tree that `tree_data` flattened."""
    name, weight, key, children = data
    return BudgetNode(name, weight, tuple(tree_from_data(c) for c in children), key)


def _replay(
    cluster: ClusterSpec, tree: BudgetNode, trace: Sequence[TraceJob], config: SimConfig
) -> dict[str, Any]:
    started = time.perf_counter()
    result = simulate(cluster, tree, trace, config)
    idle_after = {j.job_id: j.idle_after_s for j in trace if j.idle_after_s is not None}
    reclaims = sum(1 for p in result.preemptions if stop_rule(p.reason_code) == "idle_reclaim")
    return {
        "projects": summarise(result, tree, idle_after),
        "idle_reclaims": reclaims,
        "wall_s": time.perf_counter() - started,
    }


def _replay_in_child(
    cluster: ClusterSpec, tree: TreeData, trace: Sequence[TraceJob], config: SimConfig
) -> dict[str, Any]:
    return _replay(cluster, tree_from_data(tree), trace, config)


def _both(
    cluster: ClusterSpec,
    trees: tuple[BudgetNode, BudgetNode],
    trace: Sequence[TraceJob],
    configs: tuple[SimConfig, SimConfig],
    parallel: bool,
    progress: Callable[[float], None] | None,
) -> tuple[list[dict[str, Any]], bool]:
    """Both replays' summaries (each tree with its config), and whether they ran in
    parallel."""
    if parallel:
        try:
            ctx = multiprocessing.get_context("spawn")
            with ProcessPoolExecutor(max_workers=2, mp_context=ctx) as pool:
                futures = [
                    pool.submit(_replay_in_child, cluster, tree_data(t), trace, c)
                    for t, c in zip(trees, configs, strict=True)
                ]
                out = []
                for i, f in enumerate(futures):
                    out.append(f.result())
                    if progress:
                        progress((i + 1) / 2)
                return out, True
        except (OSError, AssertionError, RuntimeError) as exc:  # no children allowed here
            log.warning("what-if replays run one after the other: %s", exc)
    out = []
    for i, (t, c) in enumerate(zip(trees, configs, strict=True)):
        out.append(_replay(cluster, t, trace, c))
        if progress:
            progress((i + 1) / 2)
    return out, False


def _rows(before: Mapping[str, Any], after: Mapping[str, Any]) -> list[dict[str, Any]]:
    rows = []
    for name in list(before) + [n for n in after if n not in before]:
        b, a = before.get(name, {}), after.get(name, {})
        rows.append(
            {
                "project": name,
                **{f"{k}_before": b.get(k) for k in _FIGURES},
                **{f"{k}_after": a.get(k) for k in _FIGURES},
                "jobs": max(b.get("jobs", 0), a.get("jobs", 0)),
            }
        )
    return rows


_FIGURES = (
    "entitled_share",
    "delivered_gpu_h",
    "capped_entitled_gpu_h",
    "ratio",
    "p90_replay_wait_s",
    "idle_gpu_h",
)


def run_whatif(
    cluster: ClusterSpec,
    before: BudgetNode,
    after: BudgetNode,
    records: Iterable[JobRecord],
    *,
    start_s: float,
    end_s: float,
    config: SimConfig | None = None,
    after_config: SimConfig | None = None,
    parallel: bool = True,
    progress: Callable[[float], None] | None = None,
) -> dict[str, Any]:
    """Replay the window's jobs under both trees; a JSON-ready summary.

    `after_config` (default: `config`) runs the replay of `after`, e.g. with idle-GPU
    reclaim turned on (`SimConfig.idle_reclaim`) to show what it would give.
    ``{"jobs", "skipped", "window_s", "empty", "projects": [row per project with
    <figure>_before / <figure>_after], "idle_jobs", "idle_reclaims": [before, after],
    "parallel", "replay_s", "wall_s"}`` (`parallel`: whether the two replays ran in two
    processes); `empty` is true (and no replay runs) when no job of the window can be
    replayed."""
    started = time.perf_counter()
    projects = leaf_projects(before)
    trace, skipped = trace_from_records(records, start_s=start_s, end_s=end_s, projects=projects)
    window_s = end_s - start_s
    base = {"jobs": len(trace), "skipped": skipped, "window_s": window_s}
    if not trace:
        return {**base, "empty": True, "projects": [], "wall_s": time.perf_counter() - started}
    cfg = dataclasses.replace(config or SimConfig(), until_s=window_s)
    cfg_after = dataclasses.replace(after_config or cfg, until_s=window_s)
    runs, ran_in_parallel = _both(
        cluster, (before, after), trace, (cfg, cfg_after), parallel, progress
    )
    rows = _rows(runs[0]["projects"], runs[1]["projects"])
    return {
        **base,
        "empty": False,
        "projects": rows,
        "idle_jobs": sum(1 for j in trace if j.idle_after_s is not None),
        "idle_reclaims": [r["idle_reclaims"] for r in runs],
        "parallel": ran_in_parallel,
        "replay_s": [r["wall_s"] for r in runs],
        "wall_s": time.perf_counter() - started,
    }
