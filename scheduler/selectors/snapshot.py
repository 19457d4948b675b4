"""A cluster's state as the scheduling engine reads it, built from the database.

`cluster_snapshot(cluster=, now=)` gives the engine's `Snapshot` (hosts, running and
pending workloads, the budget tree as of `now`, fair-share usage) and `Policy` for one
cluster, plus the way back from engine keys to rows. The scheduling cycle plans on it;
the API's dry run and the dashboards' ETA reuse it (add a hypothetical job with
`dataclasses.replace` on `.snapshot`).

Keys and times, as the engine expects them:
- projects are keyed by their slug path ("org/prog-a/a1"); `node_ids` maps back;
- workloads are keyed by the Job pk as a string; `job_id()` maps back;
- times are seconds since the epoch (floats).

What holds GPUs: every open attempt (starting, running, stopping) with the placements
the attempt records. An attempt already stopping is handed to the engine as a
*protected holder*: allocated, with its stop deadline as its `protected_until_s`, so
the engine neither preempts it a second time nor gives its GPUs away before the
cluster reports it ended. One stopping to move (consolidation, stop intent `migrated`)
also holds the GPUs it starts again on (`Attempt.moved_to`), as itself (its project,
kind and start: `translate.moving_holder`) protected as long as the stop, until the
cycle starts it there (`scheduler.cycle.moves`). Jobs the cluster runs outside Allot are
passed in by the
caller as `holders` (built with `translate.foreign_holder`) for the same reason.
Every engine input is built by `scheduler.selectors.translate`.

A pending job whose preemption victims are still stopping is held out of `pending`
(`waiting`): the GPUs it will get are those of its victims once they exit; planning it
again meanwhile would preempt more jobs for it. The free GPUs of the block the plan gave
it (`Attempt.for_block`) are held for it meanwhile (`translate.block_holder`), so a job
submitted during the stops does not take them and make the stops useless.

Queries: hosts, open attempts (joined with their jobs), pending jobs, the tree version
(the tree itself only when it moved) and the ledger's window usage. Reading a snapshot
writes nothing: due scheduled budget changes are applied by the cycle as its first step
(`scheduler.cycle.worker.CycleWorker.run`) and by beat.
"""

from __future__ import annotations

import datetime as dt
import json
import math
from bisect import insort
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field, replace

from django.db import connection
from django.db.models import FloatField, Func
from django.db.models.functions import Coalesce
from django.utils import timezone

from budgets.selectors import tree_index, tree_version
from config.errors import NotFound
from ledger.selectors import window_usage
from scheduler.core.engine import BudgetNode as EngineNode
from scheduler.core.engine import Host as EngineHost
from scheduler.core.engine import Placement, Policy, RunningWorkload, Snapshot, Workload
from scheduler.core.engine.runs import last_checkpoint_s
from scheduler.models import (
    Attempt,
    AttemptEnd,
    AttemptState,
    Cluster,
    Host,
    HostHealth,
    Job,
    JobState,
)
from scheduler.selectors.refusals import snapshot_avoidance
from scheduler.selectors.translate import (
    FOREIGN_PROJECT,
    HOLD_PREFIX,
    MOVE_PREFIX,
    block_holder,
    engine_host,
    engine_tree,
    moving_holder,
    placements_from_json,
    policy_for_cluster,
    protected_holder,
    running_holder,
    workload,
)

OPEN_ATTEMPT_STATES = (AttemptState.STARTING, AttemptState.RUNNING, AttemptState.STOPPING)
# How long after its victims' stop deadline a preempting job keeps waiting for them
# before the engine may plan it again (a victim the cluster fails to stop must not
# hold the preempting job forever).
VICTIM_WAIT_SLACK_S = 60.0


class Epoch(Func):
    """Seconds since the epoch of a timestamp, computed by PostgreSQL (reading
    thousands of timestamps as Python datetimes would cost more than the plan)."""

    template = "EXTRACT(EPOCH FROM %(expressions)s)::float8"
    output_field = FloatField()


def fetch_rows(queryset) -> list[tuple]:
    """All rows of a values_list queryset, fetched in one go without Django's per-row
    converters (thousands of rows per cycle; the columns read need none, JSON comes
    back as text)."""
    sql, params = queryset.query.sql_with_params()
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return cursor.fetchall()


@dataclass(frozen=True, slots=True)
class ClusterSnapshot:
    """The engine's input for one cluster at one time, and the way back to rows."""

    cluster_id: int
    at: dt.datetime
    now: float  # `at` in seconds since the epoch
    snapshot: Snapshot
    policy: Policy
    tree_version: int
    node_ids: Mapping[str, int]  # project path -> BudgetNode id
    attempt_ids: Mapping[str, int]  # workload id of every GPU holder -> its open Attempt pk
    stopping: frozenset[str]  # workload ids whose attempt is already stopping
    # workload ids whose open attempt the cluster never reported started (its start and
    # checkpoint read from its creation): no runtime consumed, no work saved
    unstarted: frozenset[str]
    # pending workload held out of the plan -> ids of its victims still stopping
    waiting: Mapping[str, tuple[str, ...]]
    # pending workload kept off hosts that refused it (`Snapshot.avoid`) -> the
    # sentence its queue reason gets (`scheduler.core.refusals.avoid_texts`)
    refused: Mapping[str, str] = field(default_factory=dict)
    # pending workload -> host it is kept off -> when that lapses (epoch s): the ETA's
    # forward run lifts each pair then (`scheduler.core.sim.eta.forward_starts`)
    avoid_until: Mapping[str, Mapping[str, float]] = field(default_factory=dict)
    # waiting workload (of `waiting`) -> itself, the whole block the plan gave it
    # (`Attempt.for_block`) and its victims' stop deadline (`after_stops` reads it)
    blocks: Mapping[str, tuple[Workload, tuple[Placement, ...], float]] = field(
        default_factory=dict
    )

    @staticmethod
    def job_id(workload_id: str) -> int:
        """The Job pk of an engine workload id."""
        return int(workload_id)

    def node_id(self, project: str) -> int | None:
        """The BudgetNode id of an engine project key (None for unknown keys)."""
        return self.node_ids.get(project)


def _hosts(cluster_id: int) -> tuple[EngineHost, ...]:
    rows = Host.objects.filter(cluster_id=cluster_id).order_by("name")
    return tuple(
        engine_host(name=name, gpus=gpus, healthy=health == HostHealth.HEALTHY)
        for name, gpus, health in rows.values_list("name", "gpus", "health")
    )


@dataclass
class SnapshotCache:
    """What a caller that snapshots the same cluster again and again (the cycle worker)
    keeps between snapshots: a workload whose row did not change is reused instead of
    rebuilt (thousands per cycle), and the engine memoises running workloads by identity.
    Rows are compared in full, so a stale entry is never used."""

    tree_version: int = -1
    tree: EngineNode | None = None
    paths: dict[int, str] = field(default_factory=dict)  # node id -> slug path
    node_ids: dict[str, int] = field(default_factory=dict)  # slug path -> node id
    pending: dict[int, tuple[tuple, str, Workload]] = field(default_factory=dict)
    running: dict[int, tuple[tuple, str, float | None, RunningWorkload]] = field(
        default_factory=dict
    )


def _open_attempts(cluster_id: int):
    """The open attempts of a cluster with what the engine needs of their jobs."""
    rows = Attempt.objects.filter(cluster_id=cluster_id, state__in=OPEN_ATTEMPT_STATES)
    return rows.annotate(
        started_s=Epoch(Coalesce("started_at", "created_at")),
        ran_s=Epoch("started_at"),
        deadline_s=Epoch("stop_deadline"),
        protected_s=Epoch("protected_until"),
        submit_s=Epoch("job__submitted_at"),
    ).values_list(
        "pk",
        "job_id",
        "project_id",
        "gpus",
        "allocated",
        "placements",
        "started_s",
        "state",
        "deadline_s",
        "stop_intent",
        "preempted_by_id",
        "job__min_runtime_s",
        "job__resumable",
        "job__priority",
        "job__kind",
        "submit_s",
        "protected_s",
        "moved_to",
        "for_block",
        "ran_s",
    )


def _stored_placements(value: str | list | None) -> tuple[Placement, ...]:
    """An attempt's placements as stored (JSON, text when read by plain SQL)."""
    if not value:
        return ()
    return placements_from_json(json.loads(value) if isinstance(value, str) else value)


@dataclass
class AwaitedVictims:
    """The pending preemptors still waiting for their victims to stop: each one's
    victims (workload ids) and the block the plan gave it (`Attempt.for_block`) with
    the victims' stop deadline."""

    victims: dict[str, list[str]] = field(default_factory=dict)
    blocks: dict[str, tuple[tuple[Placement, ...], float]] = field(default_factory=dict)

    def note(
        self, victim: str, preempted_by, intent: str, deadline_s: float, now: float, block
    ) -> None:
        """Count the stopping `victim` for the job it stops for, if that job still waits
        for it (a preemption or a move, at most `VICTIM_WAIT_SLACK_S` past its deadline)."""
        if (
            preempted_by is None
            or intent not in (AttemptEnd.PREEMPTED, AttemptEnd.MIGRATED)
            or now > deadline_s + VICTIM_WAIT_SLACK_S
        ):
            return
        self.victims.setdefault(str(preempted_by), []).append(victim)
        if block:
            self.blocks[str(preempted_by)] = (_stored_placements(block), max(deadline_s, now + 1.0))


def _running(
    cluster_id: int,
    now: float,
    policy: Policy,
    paths: Mapping[int, str],
    cache: SnapshotCache,
    idle: Mapping[int, float],
) -> tuple[list[RunningWorkload], dict[str, int], set[str], set[str], AwaitedVictims]:
    """Holders of GPUs from open attempts; the attempt of each; the stopping ones; those
    never reported started; and the pending preemptors still waiting for their victims.
    `idle`: attempt id -> since when its GPUs are idle (an idle holder is rebuilt each
    cycle)."""
    running: list[RunningWorkload] = []
    attempt_ids: dict[str, int] = {}
    stopping: set[str] = set()
    unstarted: set[str] = set()
    awaited = AwaitedVictims()
    interval = policy.checkpoint_interval_s
    previous, cache.running = cache.running, {}
    for row in fetch_rows(_open_attempts(cluster_id)):
        (
            pk,
            job_id,
            project_id,
            gpus,
            allocated,
            placements,
            started_s,
            state,
            deadline_s,
            intent,
            preempted_by,
            min_runtime,
            resumable,
            priority,
            kind,
            submit_s,
            protected_s,
            moved_to,
            for_block,
            ran_s,
        ) = row
        wid = str(job_id)
        attempt_ids[wid] = pk
        if ran_s is None:
            unstarted.add(wid)
        project = paths.get(project_id, FOREIGN_PROJECT)
        checkpoint = last_checkpoint_s(started_s, now, interval) if resumable else None
        idle_since = idle.get(pk)
        hit = None if idle_since is not None else previous.get(pk)
        if hit is not None and hit[0] == row and hit[1] == project and hit[2] == checkpoint:
            cache.running[pk] = hit
            running.append(hit[3])
            continue
        work = workload(
            job_id=wid,
            project=project,
            gpus=gpus,
            submit_s=submit_s,
            min_runtime_s=min_runtime,
            resumable=resumable,
            priority=priority,
            kind=kind,
        )
        pls = _stored_placements(placements)
        if state == AttemptState.STOPPING:
            stopping.add(wid)
            running += _stopping(work, pls, started_s, now, deadline_s, moved_to)
            deadline_s = now if deadline_s is None else deadline_s
            awaited.note(wid, preempted_by, intent, deadline_s, now, for_block)
            continue  # rebuilt every time: its protection follows the clock
        held = running_holder(work, pls, started_s=started_s, allocated=allocated,
                              last_checkpoint_s=checkpoint, idle_since_s=idle_since,
                              protected_until_s=protected_s)  # fmt: skip
        if idle_since is None:
            cache.running[pk] = (row, project, checkpoint, held)
        running.append(held)
    return running, attempt_ids, stopping, unstarted, awaited


def _stopping(
    work: Workload,
    pls: tuple,
    started_s: float,
    now: float,
    deadline_s: float | None,
    moved_to: str | list | None,
) -> list[RunningWorkload]:
    """The holders of an attempt being stopped: its GPUs, protected until its stop
    deadline; a job stopping to move also holds the GPUs it starts again on, as itself
    and as long, nobody else's meanwhile (`Attempt.moved_to`, `moving_holder`)."""
    until = max(now if deadline_s is None else deadline_s, now + 1.0)
    out = [protected_holder(work, pls, started_s=started_s, until_s=until)]
    to = _stored_placements(moved_to)
    if to:
        out.append(moving_holder(work, to, started_s=started_s, until_s=until))
    return out


def _pending(
    cluster_id: int,
    paths: Mapping[int, str],
    held_out: Mapping[str, object],
    cache: SnapshotCache,
) -> tuple[dict[str, list[Workload]], list[str]]:
    """Pending workloads per project path, in within-project order, without those in
    `held_out` (returned apart, in the same order)."""
    rows = (
        Job.objects.filter(cluster_id=cluster_id, state=JobState.PENDING)
        .order_by("project_id", "-priority", "submitted_at", "id")
        .annotate(submit_s=Epoch("submitted_at"))
        .values_list(
            "id",
            "project_id",
            "gpus",
            "min_runtime_s",
            "resumable",
            "priority",
            "kind",
            "submit_s",
        )
    )
    pending: dict[str, list[Workload]] = {}
    held: list[Workload] = []
    last_project = None
    project = ""
    bucket: list[Workload] = []
    previous, cache.pending = cache.pending, {}
    cached = cache.pending
    for row in fetch_rows(rows):
        job_id, project_id, gpus, min_runtime, resumable, priority, kind, submit_s = row
        if project_id != last_project:
            last_project = project_id
            project = paths.get(project_id, FOREIGN_PROJECT)
            bucket = pending.setdefault(project, [])
        hit = previous.get(job_id)
        if hit is not None and hit[0] == row and hit[1] == project:
            work = hit[2]
        else:
            work = workload(
                job_id=job_id,
                project=project,
                gpus=gpus,
                submit_s=submit_s,
                min_runtime_s=min_runtime,
                resumable=resumable,
                priority=priority,
                kind=kind,
            )
        cached[job_id] = (row, project, work)
        if held_out and work.id in held_out:
            held.append(work)
            continue
        bucket.append(work)
    return {p: lst for p, lst in pending.items() if lst}, held


def _held_blocks(
    held: Sequence[Workload],
    blocks: Mapping[str, tuple[tuple[Placement, ...], float]],
    holders: Sequence[RunningWorkload],
    now: float,
) -> list[RunningWorkload]:
    """For each job waiting for its victims, the GPUs of its planned block that nobody
    holds (`translate.block_holder`), held until the victims' stop deadline."""
    out: list[RunningWorkload] = []
    taken = {(p.host, i) for h in holders for p in h.placements for i in p.gpu_indices}
    for work in held:
        if work.id not in blocks:
            continue
        block, until = blocks[work.id]
        free = tuple(
            Placement(p.host, gpus)
            for p in block
            if (gpus := tuple(i for i in p.gpu_indices if (p.host, i) not in taken))
        )
        if free:
            out.append(block_holder(work, free, now=now, until_s=until))
            taken.update((p.host, i) for p in free for i in p.gpu_indices)
    return out


def _tree(cache: SnapshotCache) -> tuple[int, EngineNode, dict[int, str]]:
    """The engine tree as stored, its version and every node's slug path; rebuilt only
    when the tree version moved. (Due scheduled changes are applied by the cycle, as its
    first step, and by beat: a read never writes.)"""
    version = tree_version()
    if cache.tree is None or cache.tree_version != version:
        index = tree_index()
        tree = engine_tree(index)
        if tree is None:
            raise NotFound(
                "There is no budget tree yet; import one with `manage.py budget_import`."
            )
        cache.paths = {node_id: index.path(node_id) for node_id in index.nodes}
        cache.node_ids = {path: node_id for node_id, path in cache.paths.items()}
        # a change that committed meanwhile is in the tree: the next call rebuilds it
        cache.tree, cache.tree_version = tree, version
    return cache.tree_version, cache.tree, cache.paths


def cluster_snapshot(
    *,
    cluster: Cluster,
    now: dt.datetime | None = None,
    holders: Sequence[RunningWorkload] = (),
    cache: SnapshotCache | None = None,
    idle: Collection[int] = frozenset(),
    refusals: bool = False,
) -> ClusterSnapshot:
    """The engine's view of `cluster` at `now` (default: the current time).

    `holders` are extra GPU holders the caller knows from the cluster adapter (jobs run
    outside Allot), built with `foreign_holder`. A caller that snapshots the cluster
    repeatedly passes the same `cache` each time (see `SnapshotCache`). `idle`: ids of
    running attempts whose GPUs stayed below the cluster's `idle_threshold_pct` for its
    `idle_reclaim_after_s` (`scheduler.selectors.utilization.idle_attempt_ids`): the
    engine sees them idle for that long (`RunningWorkload.idle_since_s`). `refusals`:
    keep each pending workload off the hosts that refused its start (`Snapshot.avoid`,
    and `refused`, the sentence its queue reason gets, and `avoid_until`, when each
    lapses), as the live cycle does; a plan meant to say what the next cycle will do (a
    dry run, the ETA) asks for them too
    (`scheduler.selectors.refusals.snapshot_avoidance`)."""
    cache = cache if cache is not None else SnapshotCache()
    at = now or timezone.now()
    now_s = at.timestamp()
    policy = policy_for_cluster(cluster)
    version, tree, paths = _tree(cache)
    idle_since = math.floor(now_s) - float(cluster.idle_reclaim_after_s)
    running, attempt_ids, stopping, unstarted, awaited = _running(
        cluster.pk, now_s, policy, paths, cache, {pk: idle_since for pk in idle}
    )
    pending, held = _pending(cluster.pk, paths, awaited.victims, cache)
    running += _held_blocks(held, awaited.blocks, [*running, *holders], now_s)
    usage_by_node = window_usage(
        cluster_id=cluster.pk,
        now=at,
        lookback_s=cluster.lookback_s,
        half_life_s=cluster.half_life_s,
    )
    usage = {paths[n]: v for n, v in usage_by_node.items() if n in paths}
    avoid, refused, until = snapshot_avoidance(cluster.pk, at) if refusals else ({}, {}, {})
    snapshot = Snapshot(
        hosts=_hosts(cluster.pk),
        running=[*running, *holders],
        pending=pending,
        tree=tree,
        usage=usage,
        avoid=avoid,
    )
    return ClusterSnapshot(
        cluster_id=cluster.pk,
        at=at,
        now=now_s,
        snapshot=snapshot,
        policy=policy,
        tree_version=version,
        node_ids=cache.node_ids,
        attempt_ids=attempt_ids,
        stopping=frozenset(stopping),
        unstarted=frozenset(unstarted),
        waiting={w.id: tuple(awaited.victims[w.id]) for w in held},
        refused=refused,
        avoid_until=until,
        blocks={w.id: (w, *awaited.blocks[w.id]) for w in held if w.id in awaited.blocks},
    )


def after_stops(cs: ClusterSnapshot, *, requeued: Callable[[Workload, bool], bool]) -> Snapshot:
    """`cs.snapshot` as the stops under way leave it, for a forward run (the ETA): a job
    stopping to move holds only the GPUs it starts again on (its "~move-" holder: the
    job itself, its project, kind and start), not also those it leaves; a victim stopping
    for a waiting job holds none. The GPUs they leave in the block of the job they stop
    for are that job's (its "~hold-" holder grows by them to the block, with its GPUs),
    the others free. A victim that goes back to the queue when its stop ends, by the live
    cycle's rule (`requeued(work, started)`: the services' `job_target`, which a selector
    may not import; a run never reported started goes back whatever it is), is pending
    again, in its project's order, as a job that never ran. A run the cluster has not
    reported started yet (`cs.unstarted`) starts now, with nothing run or saved: its
    attempt's creation is no start.

    The live cycle must see them (the GPUs left are not free until the cluster reports
    the stop), but a forward run played them to their forecast end: a moved job held its
    GPUs twice and its project was charged twice over its whole run, a victim's project
    charged for a run it will not get, while the block came free only then, its waiting
    job holding just the part that was free. A stop lasts until its deadline at most
    (`Attempt.stop_deadline`, the cluster's grace period): seconds, against the hours a
    forward run looks ahead, so the stops are taken as done now."""
    running = _started_now(cs)
    ids = (rw.workload.id for rw in running)
    moved = {i.removeprefix(MOVE_PREFIX) for i in ids if i.startswith(MOVE_PREFIX)}
    stops_for = {victim: wid for wid, victims in cs.waiting.items() for victim in victims}
    left = [
        rw
        for rw in running
        if rw.workload.id in cs.stopping
        and (rw.workload.id in moved or rw.workload.id in stops_for)
    ]
    if not left:
        return replace(cs.snapshot, running=running) if cs.unstarted else cs.snapshot
    gained: dict[str, set[tuple[str, int]]] = {}
    for rw in left:
        found = cs.blocks.get(stops_for.get(rw.workload.id, ""))
        if found is None:
            continue
        block = {(p.host, i) for p in found[1] for i in p.gpu_indices}
        gpus = {(p.host, i) for p in rw.placements for i in p.gpu_indices} & block
        if gpus:
            gained.setdefault(found[0].id, set()).update(gpus)
    holds = {f"{HOLD_PREFIX}{wid}": wid for wid in gained}
    gone = {rw.workload.id for rw in left} | set(holds)
    out = [rw for rw in running if rw.workload.id not in gone]
    for rw in running:  # the part of the block that was free: the waiting job's already
        if rw.workload.id in holds:
            gained[holds[rw.workload.id]].update(
                (p.host, i) for p in rw.placements for i in p.gpu_indices
            )
    for wid, gpus in gained.items():
        work, block, until = cs.blocks[wid]
        held = tuple(
            Placement(p.host, kept)
            for p in block
            if (kept := tuple(i for i in p.gpu_indices if (p.host, i) in gpus))
        )
        out.append(block_holder(work, held, now=cs.now, until_s=until))
    unmoved = [rw.workload for rw in left if rw.workload.id not in moved]
    back = [w for w in unmoved if requeued(w, w.id not in cs.unstarted)]
    return replace(cs.snapshot, running=out, pending=_queued(cs.snapshot.pending, back))


def _started_now(cs: ClusterSnapshot) -> Sequence[RunningWorkload]:
    """`cs.snapshot.running` with each run the cluster never reported started (itself, or
    the "~move-" holder of its next run) starting at `cs.now`, without saved work."""
    if not cs.unstarted:
        return cs.snapshot.running
    return [
        replace(rw, started_s=cs.now, last_checkpoint_s=None)
        if rw.workload.id.removeprefix(MOVE_PREFIX) in cs.unstarted
        else rw
        for rw in cs.snapshot.running
    ]


def _queue_order(w: Workload) -> tuple[int, float, int]:
    """A pending workload's place in its project's queue, as `_pending` reads the queue."""
    return (-w.priority, w.submit_s, int(w.id))


def _queued(
    pending: Mapping[str, Sequence[Workload]], back: Sequence[Workload]
) -> Mapping[str, Sequence[Workload]]:
    """`pending` with the workloads `back` in their projects' queues, in order."""
    if not back:
        return pending
    out = dict(pending)
    for w in back:
        queue = list(out.get(w.project, ()))
        insort(queue, w, key=_queue_order)
        out[w.project] = queue
    return out
