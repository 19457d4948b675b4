"""The one translation between the database and the engine.

Everything that turns rows into the engine's inputs is here, and nothing else builds
them (`tests/test_layers.py` fails on a second implementation): the budget tree as the
engine reads it, a stored job as a workload, a GPU holder (running, or protected until
an explicit time), placements, and a cluster's policy. The rules themselves (when
protection ends, what a checkpoint saved) are the engine's (`scheduler.core.engine.runs`);
this module only maps fields.

Keys, as the engine expects them: a project is keyed by its slug path
("org/prog-a/a1"); a workload by its Job pk as a string; times are seconds since the
epoch (floats).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from decimal import Decimal

from budgets.selectors import TreeIndex
from scheduler.core.engine.types import BudgetNode as EngineNode
from scheduler.core.engine.types import Host, Placement, Policy, RunningWorkload, Workload
from scheduler.models import Cluster, Job

# Project key of jobs the cluster runs outside Allot (slugs never contain "~").
FOREIGN_PROJECT = "~outside-allot"
# Workload id prefix of the GPUs a job stopping to move starts again on
# (`moving_holder`), and of the GPUs held for a job waiting on its victims (`block_holder`);
# no job id contains "~".
MOVE_PREFIX = "~move-"
HOLD_PREFIX = "~hold-"
# Protection of a holder whose end is unknown (a job outside Allot): longer than any
# minimum runtime, so the engine never plans to preempt it.
UNKNOWN_END_S = 365 * 86400.0


def policy_for_cluster(cluster: Cluster) -> Policy:
    """The engine policy of a cluster (its minimum-runtime cap, usage window,
    short-job reserve, adaptive unless its `short_reserve_auto` is off, its share floor and
    idle-GPU reclaim, and consolidation, on unless its `consolidate` is off: the live
    cycle stops a moved job and starts it again on its planned hosts once the cluster
    reports the stop, `scheduler.cycle.moves`), and reservation admission for its
    `reservation_admit_min` minutes (0: off); the checkpoint interval and the restart
    overhead are the engine's defaults."""
    return Policy(
        max_min_runtime_s=float(cluster.max_min_runtime_s),
        lookback_s=float(cluster.lookback_s),
        half_life_s=float(cluster.half_life_s) if cluster.half_life_s else None,
        explain_queue=True,
        short_reserve_hosts=cluster.short_reserve_hosts,
        short_job_max_s=float(cluster.short_job_max_s),
        short_reserve_auto=cluster.short_reserve_auto,
        share_floor=cluster.share_floor,
        idle_reclaim=cluster.idle_reclaim,
        idle_reclaim_after_s=float(cluster.idle_reclaim_after_s),
        consolidate=cluster.consolidate,
        reservation_admit_s=cluster.reservation_admit_min * 60.0,
    )


def engine_host(*, name: str, gpus: int, healthy: bool) -> Host:
    """A host row as the engine reads it (an unhealthy host takes no new work)."""
    return Host(name, gpus, healthy)


def engine_tree(index: TreeIndex, edits: Mapping[int, Decimal] | None = None) -> EngineNode | None:
    """The budget tree as the engine reads it (leaves keyed by their slug path, which is
    unique across the tree), with `edits` (node id -> weight) applied; None when there
    is no tree."""
    edits = edits or {}

    def build(pk: int) -> EngineNode:
        children = tuple(build(c.pk) for c in index.children.get(pk, []))
        weight = float(edits.get(pk, index.nodes[pk].weight))
        return EngineNode(name=_engine_name(index, pk), weight=weight, children=children)

    roots = index.children.get(None, [])
    return build(roots[0].pk) if roots else None


def _engine_name(index: TreeIndex, pk: int) -> str:
    """A node's name in the engine's tree: a leaf's slug path, an inner node's name."""
    return index.nodes[pk].name if index.children.get(pk) else index.path(pk)


def engine_node_key(index: TreeIndex, pk: int) -> str:
    """The key of a node below the root in the engine's per-node figures (`fair_tree`'s
    "nodes"): the engine names of its chain below the root joined by "/"."""
    chain = [pk, *index.ancestors(pk)][:-1]  # without the root
    return "/".join(_engine_name(index, n) for n in reversed(chain))


def workload(
    *,
    job_id: int | str,
    project: str,
    gpus: int,
    submit_s: float,
    min_runtime_s: float,
    resumable: bool,
    priority: int,
    kind: str,
    cap_s: float | None = None,
) -> Workload:
    """A stored job (its columns) as an engine workload under project key `project`;
    `cap_s` caps the minimum runtime (the engine caps it itself where it protects)."""
    min_runtime = float(min_runtime_s)
    if cap_s is not None:
        min_runtime = min(min_runtime, cap_s)
    return Workload(str(job_id), project, gpus, submit_s, min_runtime, resumable, priority, kind)


def job_workload(
    job: Job, *, project: str, workload_id: str | None = None, submit_s: float | None = None
) -> Workload:
    """A Job (saved or not) as an engine workload; `workload_id` replaces its pk and
    `submit_s` its submission time."""
    return workload(
        job_id=job.pk if workload_id is None else workload_id,
        project=project,
        gpus=job.gpus,
        submit_s=job.submitted_at.timestamp() if submit_s is None else submit_s,
        min_runtime_s=job.min_runtime_s,
        resumable=job.resumable,
        priority=job.priority,
        kind=job.kind,
    )


def placements_from_json(data: Sequence[Mapping]) -> tuple[Placement, ...]:
    """Engine placements from an attempt's `placements` JSON."""
    return tuple(Placement(p["host"], tuple(int(i) for i in p["gpu_indices"])) for p in data)


def placements_to_json(placements: Sequence[Placement]) -> list[dict]:
    """An attempt's `placements` JSON from engine (or adapter) placements."""
    return [{"host": p.host, "gpu_indices": list(p.gpu_indices)} for p in placements]


def running_holder(
    work: Workload,
    placements: tuple[Placement, ...],
    *,
    started_s: float,
    allocated: bool,
    last_checkpoint_s: float | None,
    idle_since_s: float | None = None,
    protected_until_s: float | None = None,
) -> RunningWorkload:
    """An open attempt that runs: protected by its minimum runtime from `started_s`
    when `allocated` (`scheduler.core.engine.runs.protected_until`), or until
    `protected_until_s` when given (a job started again after a move); `idle_since_s`:
    its GPUs idle since then (None: not idle; `scheduler.core.engine.runs.idle_reclaimable`)."""
    return RunningWorkload(
        work,
        placements,
        started_s,
        allocated,
        last_checkpoint_s,
        protected_until_s=protected_until_s,
        idle_since_s=idle_since_s,
    )


def protected_holder(
    work: Workload,
    placements: tuple[Placement, ...],
    *,
    started_s: float,
    until_s: float,
) -> RunningWorkload:
    """A GPU holder the engine must leave alone until `until_s` (a run already
    stopping, a job outside Allot): allocated, with that protection end as its field
    (the engine's reservations expect its GPUs back at that time)."""
    return RunningWorkload(work, placements, started_s, allocated=True, protected_until_s=until_s)


def moving_holder(
    work: Workload, placements: tuple[Placement, ...], *, started_s: float, until_s: float
) -> RunningWorkload:
    """The GPUs a job stopping to move starts again on (`Attempt.moved_to`), held for it
    while the stop lasts: the job itself under the id "~move-<id>" (its project, kind
    and start, so an ETA expects them back when the job ends and a queue reason names
    its project), protected until the stop completes (`until_s`, the stop's own end:
    nobody else may take them meanwhile). It once was a job outside Allot, protected for
    `UNKNOWN_END_S`: GPUs held for a year by nobody, in the plans made during the stop."""
    held = replace(work, id=f"{MOVE_PREFIX}{work.id}")
    return protected_holder(held, placements, started_s=started_s, until_s=until_s)


def block_holder(
    work: Workload, placements: tuple[Placement, ...], *, now: float, until_s: float
) -> RunningWorkload:
    """The free GPUs of the block the plan gave a job that waits for its victims to stop
    (`Attempt.for_block`), held for it under the id "~hold-<id>" until they have: a job
    submitted meanwhile must not take them, or the stops were for nothing."""
    gpus = sum(len(p.gpu_indices) for p in placements)
    held = replace(work, id=f"{HOLD_PREFIX}{work.id}", gpus=gpus)
    return protected_holder(held, placements, started_s=now, until_s=until_s)


def foreign_holder(
    name: str, gpus: int, placements: tuple[Placement, ...], *, now: float
) -> RunningWorkload:
    """A job the cluster runs outside Allot (or an attempt Allot already ended that the
    cluster still runs), as a holder the engine never preempts."""
    work = Workload(id=name, project=FOREIGN_PROJECT, gpus=gpus, submit_s=now)
    return protected_holder(work, placements, started_s=now, until_s=now + UNKNOWN_END_S)
