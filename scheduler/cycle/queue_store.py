"""Step 5 of a cycle: the explained queue stored in the cluster's `QueueSnapshot`
(read back by `scheduler.selectors.queue`).

`QueueSnapshot.entries` holds each column as comma-separated text (position = index
+ 1) and "reasons", the distinct reason texts that the "reason" column indexes."""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Mapping
from itertools import repeat

from django.db.models.expressions import RawSQL

from scheduler.core.engine import CyclePlan, QueueBlock, entitled_shares, project_standing
from scheduler.core.engine.runs import protected_until
from scheduler.cycle.context import CycleContext
from scheduler.models import Job, QueueSnapshot
from scheduler.selectors.snapshot import ClusterSnapshot

QUEUE_COLUMNS = ("job", "project", "project_position", "project_rank", "metric", "reason")


def write_queue(
    ctx: CycleContext,
    cs: ClusterSnapshot,
    cycle_plan: CyclePlan,
    deferred: Mapping[str, tuple[str, ...]],
) -> None:
    """Store the explained queue. The entries are rewritten only when they changed
    since this worker's last write and no other worker wrote since (10,000 entries are
    megabytes of JSON); the cycle lock keeps writes of one cluster apart."""
    entitled = entitled_shares(cs.snapshot.tree)
    standing = project_standing(cycle_plan.project_order, entitled)
    columns = queue_columns(
        cs, cycle_plan, deferred, grace_s=ctx.cluster.grace_s, standing=standing
    )
    text = json.dumps(columns, separators=(",", ":"))
    # each project's fair-share factor as the queue shows it (null without entitlement)
    order = [
        [cs.node_id(p), round(standing[p][1], 6) if entitled.get(p, 0.0) > 0.0 else None]
        for p, _ in cycle_plan.project_order
        if cs.node_id(p)
    ]
    fields = {"cycle": ctx.record, "computed_at": ctx.at, "project_order": order}
    mine = QueueSnapshot.objects.filter(cluster=ctx.cluster, cycle_id=ctx.warm.queue_cycle)
    unchanged = text == ctx.warm.queue_json and ctx.warm.queue_cycle is not None
    if not (unchanged and mine.update(**fields)):
        fields["entries"] = RawSQL("%s::jsonb", [text])
        if not QueueSnapshot.objects.filter(cluster=ctx.cluster).update(**fields):
            QueueSnapshot.objects.create(cluster=ctx.cluster, **{**fields, "entries": columns})
    ctx.warm.queue_json, ctx.warm.queue_cycle = text, ctx.record.pk


def queue_columns(
    cs: ClusterSnapshot,
    cycle_plan: CyclePlan,
    deferred: Mapping[str, tuple[str, ...]],
    *,
    grace_s: float,
    standing: Mapping[str, tuple[int, float]] | None = None,
) -> dict[str, object]:
    """The explained queue with job and node ids, in start order, as stored in
    `QueueSnapshot.entries` (columns): first the jobs that wait for the jobs they
    preempted to exit (they start next), then the engine's queue. `deferred` are this
    cycle's starts held back for that reason. `standing`: `project_standing` of the
    plan (computed when not given). A project without entitlement (weight 0 on its
    path) has no fair-share factor and no rank (glossary: rank): both are stored empty
    and read back as null, as API `fairshare/` gives them."""
    entitled = entitled_shares(cs.snapshot.tree)
    if standing is None:
        standing = project_standing(cycle_plan.project_order, entitled)
    blocks = [*_waiting_blocks(cs, standing, deferred, grace_s), *cycle_plan.queue.blocks]
    if cs.refused:
        blocks = [_with_refusals(b, cs.refused) for b in blocks]
    if not blocks:
        return {**dict.fromkeys(QUEUE_COLUMNS, ""), "reasons": []}

    # Each column as comma-separated text: PostgreSQL parses one JSON string far faster
    # than tens of thousands of JSON numbers. Built a block (a project's consecutive
    # waiting jobs) at a time with C-level repeats and joins.
    columns: dict[str, list[str]] = {name: [] for name in QUEUE_COLUMNS}
    jobs, nodes, positions = columns["job"], columns["project"], columns["project_position"]
    ranks, metrics, reason_ids = columns["project_rank"], columns["metric"], columns["reason"]
    reasons: dict[str, str] = {}  # reason -> its index as text
    seen: dict[str, int] = {}  # project -> its jobs so far
    for b in blocks:
        n = len(b.workload_ids)
        jobs.extend(b.workload_ids)
        nodes.extend(repeat(str(cs.node_ids.get(b.project, "")), n))
        first = seen.get(b.project, 0)
        seen[b.project] = first + n
        positions.extend(map(str, range(first + 1, first + n + 1)))
        ranked = entitled.get(b.project, 0.0) > 0.0
        ranks.extend(repeat(str(b.project_rank) if ranked else "", n))
        metrics.extend(repeat(str(round(b.metric, 6)) if ranked else "", n))
        texts = (b.reason,) if isinstance(b.reason, str) else b.reason
        ids = [reasons.setdefault(t, str(len(reasons))) for t in texts]
        reason_ids.extend(repeat(ids[0], n) if isinstance(b.reason, str) else ids)
    return {
        **{name: ",".join(values) for name, values in columns.items()},
        "reasons": list(reasons),
    }


def _with_refusals(block: QueueBlock, refused: Mapping[str, str]) -> QueueBlock:
    """`block` with the refusal sentence added to the reason of its jobs kept off
    hosts that refused them (one reason per job then)."""
    if not any(wid in refused for wid in block.workload_ids):
        return block
    n = len(block.workload_ids)
    texts = (block.reason,) * n if isinstance(block.reason, str) else tuple(block.reason)
    reasons = tuple(
        f"{text}; {refused[wid]}" if wid in refused else text
        for wid, text in zip(block.workload_ids, texts, strict=True)
    )
    return block._replace(reason=reasons)


def _waiting_blocks(
    cs: ClusterSnapshot,
    standing: Mapping[str, tuple[int, float]],
    deferred: Mapping[str, tuple[str, ...]],
    grace_s: float,
) -> list[QueueBlock]:
    """One block per job that waits for the jobs it preempted to exit, with its
    project's rank and factor as the engine's queue blocks give them."""
    running = {rw.workload.id: rw for rw in cs.snapshot.running}
    head: list[tuple[str, tuple[str, ...], float]] = []
    for wid, victims in cs.waiting.items():
        # a stopping victim is protected by the engine until its stop deadline
        ends = [running[v] for v in victims if v in running]
        cap = cs.policy.max_min_runtime_s
        until = max((protected_until(rw, cap) for rw in ends), default=cs.now)
        head.append((wid, victims, until))
    head.extend((wid, victims, cs.now + grace_s) for wid, victims in deferred.items())
    projects = _projects_of(cs, [wid for wid, _, _ in head])
    blocks: list[QueueBlock] = []
    for wid, victims, until in head:
        project = projects.get(wid, "")
        rank, metric = standing.get(project, (len(standing) + 1, 0.0))
        names = (
            f"job{'s' if len(victims) > 1 else ''} {', '.join(victims)}"
            if victims
            else "the jobs it preempted"
        )
        ends_at = dt.datetime.fromtimestamp(until, dt.UTC).strftime("%H:%M:%S UTC")
        reason = (
            f"starting next: waiting for {names} to exit (stop grace period ends at "
            f"{ends_at}); their GPUs are free only once the cluster reports the end"
        )
        blocks.append(QueueBlock(project, rank, metric, (wid,), reason))
    return blocks


def _projects_of(cs: ClusterSnapshot, workload_ids: list[str]) -> dict[str, str]:
    if not workload_ids:
        return {}
    paths = {v: k for k, v in cs.node_ids.items()}
    rows = Job.objects.filter(pk__in=[int(w) for w in workload_ids]).values_list("pk", "project_id")
    return {str(pk): paths.get(project_id, "") for pk, project_id in rows}
