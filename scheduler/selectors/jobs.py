"""Reads of jobs, the queue, clusters and hosts for the API and the CLI.

Every signed-in user sees every job (like `squeue`), but a job's spec (image,
command, environment) only its submitter, the managers of its project (or of a node
above it) and staff see. Queue positions and reasons come from the cluster's last
cycle (`QueueSnapshot`); a dry run asks the engine directly.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from typing import Any

from django.contrib.auth import get_user_model
from django.db.models import QuerySet

from allot_common.figures import runtime_text
from budgets import permissions
from budgets.selectors import TreeIndex, node_paths, tree_index
from config.errors import ValidationFailed
from config.plainsql import fetch_all, id_array
from scheduler.core.engine import entitled_shares, plan, project_standing
from scheduler.core.engine.explain import FOR_GPUS, STANDING
from scheduler.models import (
    ACTIVE_STATES,
    Cluster,
    ClusterPolicyEvent,
    CycleRecord,
    Host,
    HostEvent,
    Job,
    JobState,
)
from scheduler.selectors.budget_changes import cluster_change_notes, with_change_note
from scheduler.selectors.clusters import cluster_counts
from scheduler.selectors.eta import CachedJobEtas, job_eta_for_page
from scheduler.selectors.job_reads import job_attempts, job_detail, job_events
from scheduler.selectors.protection import job_protected_until
from scheduler.selectors.queue import StoredQueue, stored_queue, stored_queue_seen
from scheduler.selectors.room import Room, job_room
from scheduler.selectors.snapshot import cluster_snapshot
from scheduler.selectors.translate import job_workload
from scheduler.selectors.utilization import attempt_series, job_utilization, sparkline

DRY_RUN_ID = "dry-run"


# ---------------------------------------------------------------- who sees the spec


spec_readable_projects = permissions.spec_readable_projects  # the rule lives there
spec_visible = permissions.may_read_spec


# ---------------------------------------------------------------- jobs


def job_list(
    *,
    actor,
    mine: bool = False,
    project_ids: Iterable[int] | None = None,
    cluster_id: int | None = None,
    states: Iterable[str] = (),
    kinds: Iterable[str] = (),
) -> QuerySet[Job]:
    """Jobs newest first, filtered (`project_ids`: `projects_at_or_below`)."""
    qs = Job.objects.select_related("submitter", "cluster").order_by("-id")
    if mine:
        qs = qs.filter(submitter=actor)
    if project_ids is not None:
        qs = qs.filter(project_id__in=list(project_ids))
    if cluster_id is not None:
        qs = qs.filter(cluster_id=cluster_id)
    states, kinds = list(states), list(kinds)
    if states:
        qs = qs.filter(state__in=states)
    if kinds:
        qs = qs.filter(kind__in=kinds)
    return qs


def projects_at_or_below(ref: str | int, *, field: str = "project") -> list[int]:
    """The node `ref` names (id or slug path) and every node below it; an unknown one
    is a 400 naming `field` (the same meaning and answer as the ledger's `project` filter)."""
    index = tree_index()
    node_id = index.find(ref)
    if node_id is None:
        raise ValidationFailed(
            f"There is no budget node {str(ref).strip()[:100]!r} (give an id, a path like "
            "'org/program/project' or the slug of one project alone).",
            field=field,
        )
    return [node_id, *index.descendants(node_id)]


def project_paths(index: TreeIndex | None = None) -> dict[int, str]:
    if index is None:
        return node_paths()
    return {node_id: index.path(node_id) for node_id in index.nodes}


# ---------------------------------------------------------------- the queue


def job_stored_queue(job: Job) -> StoredQueue | None:
    """The stored queue of a pending job's cluster (`stored_queue`, one statement, with
    the cluster's last cycle; none when `job_detail` read the job and where the queue
    stands, `queue_seen`, and this process holds that version); None for a job that is
    not pending (no statement) or before the cluster's first cycle."""
    if job.state != JobState.PENDING:
        return None
    if hasattr(job, "queue_seen"):
        return stored_queue_seen(cluster_id=job.cluster_id, seen=job.queue_seen)
    return stored_queue(cluster_id=job.cluster_id)


def job_queue_info(job: Job) -> dict[str, Any] | None:
    """Where a pending job stands in its cluster's last explained queue: position
    overall and within its project, the project's fair-share factor and the reason it
    waits. None for a job that is not pending; for a pending job the last cycle has not
    seen yet, the position is null and the reason says so."""
    return queue_info_in(job, job_stored_queue(job))


def queue_info_in(job: Job, stored: StoredQueue | None) -> dict[str, Any] | None:
    """`job_queue_info` in the stored queue `job_stored_queue` answered for `job`."""
    if job.state != JobState.PENDING:
        return None
    entry = stored.entry(job.pk) if stored else None
    if entry is None:
        return {
            "position": None,
            "project_position": None,
            "queue_length": stored.length if stored else 0,
            "fairshare_factor": _project_factor(stored, job.project_id),
            "reason": "submitted after the last scheduling cycle; the next cycle places it",
            "computed_at": stored.computed_at if stored else None,
        }
    notes = cluster_change_notes(
        lookback_s=job.cluster.lookback_s,
        as_of=stored.computed_at,
        project_ids=[job.project_id],
        any_change=stored.budget_changed,
    )
    return {
        "position": entry["position"],
        "project_position": entry["project_position"],
        "queue_length": stored.length,
        "fairshare_factor": entry["metric"],
        "reason": with_change_note(entry["reason"], notes.get(job.project_id)),
        "computed_at": stored.computed_at,
    }


def _project_factor(stored: StoredQueue | None, project_id: int) -> float | None:
    if stored is None:
        return None
    for node_id, factor in stored.project_order or []:
        if node_id == project_id:
            return factor
    return None


@dataclasses.dataclass
class QueuePage:
    count: int
    computed_at: Any
    cycle_id: int | None
    rows: list[dict[str, Any]]


def queue_page(
    *,
    cluster: Cluster,
    offset: int,
    limit: int,
    submitter_id: int | None = None,
    project_ids: Iterable[int] | None = None,
) -> QueuePage:
    """Entries `offset` .. `offset + limit` of the cluster's explained queue (start
    order), each with its job's name, project, submitter, size and current state; with
    `submitter_id`, only that user's jobs (like `squeue --me`), with `project_ids`
    (`projects_at_or_below`) only those projects' jobs, at their places in the whole
    queue. A cluster `resolve_cluster(with_queue_seen=True)` read says where its stored
    queue stands: no queue statement while this process holds that version."""
    if hasattr(cluster, "queue_seen"):
        snap = stored_queue_seen(cluster_id=cluster.pk, seen=cluster.queue_seen)
    else:
        snap = stored_queue(cluster_id=cluster.pk)
    if snap is None:
        return QueuePage(count=0, computed_at=None, cycle_id=None, rows=[])
    if submitter_id is None and project_ids is None:
        count = snap.length
        entries = list(snap.entries(offset, offset + limit))
    else:
        wanted = Job.objects.filter(cluster=cluster, state=JobState.PENDING)
        if submitter_id is not None:
            wanted = wanted.filter(submitter_id=submitter_id)
        if project_ids is not None:
            wanted = wanted.filter(project_id__in=list(project_ids))
        theirs = set(wanted.values_list("pk", flat=True))
        mine = snap.entries_of(theirs)
        count, entries = len(mine), mine[offset : offset + limit]
    projects = {e["project"] for e in entries if e["project"] is not None}
    jobs, paths = _queue_jobs([e["job"] for e in entries], projects)
    notes = cluster_change_notes(
        lookback_s=cluster.lookback_s,
        as_of=snap.computed_at,
        project_ids=projects,
        any_change=snap.budget_changed,
    )
    for entry in entries:  # each a dict of its own (`StoredQueue`): completed in place
        if notes:
            entry["reason"] = with_change_note(entry["reason"], notes.get(entry["project"]))
        entry["project_path"] = paths.get(entry["project"] or -1, "")
        entry.update(jobs.get(entry["job"], _GONE_JOB))
    return QueuePage(
        count=count,
        computed_at=snap.computed_at,
        cycle_id=snap.cycle_id,
        rows=entries,
    )


_QUEUE_JOB_FIELDS = ("name", "submitter", "gpus", "kind", "min_runtime_s", "priority", "state")
_QUEUE_JOB_FIELDS += ("queued_at",)
_GONE_JOB: dict[str, Any] = {  # a queued job deleted since the cycle
    "name": "",
    "submitter": "",
    "gpus": None,
    "kind": "",
    "min_runtime_s": None,
    "priority": None,
    "state": "",
    "queued_at": None,
}


# The page's jobs, then (name NULL: a job's is never) the slug path of each project of
# the page's entries, walked up from those projects only (not the whole tree read and
# walked in Python, `node_paths`): one statement.
_QUEUE_JOBS_SQL = """
    WITH RECURSIVE up(leaf, parent_id, slug, depth) AS (
        SELECT b.id, b.parent_id, b.slug, 0 FROM {node} b WHERE b.id = ANY(%s::bigint[])
        UNION ALL
        SELECT up.leaf, b.parent_id, b.slug, up.depth + 1 FROM {node} b
        JOIN up ON b.id = up.parent_id
    )
    SELECT j.id, u.{username}, j.name, j.gpus, j.kind, j.min_runtime_s, j.priority, j.state,
           j.queued_at
    FROM {job} j JOIN {user} u ON u.id = j.submitter_id
    WHERE j.id = ANY(%s::bigint[])
    UNION ALL
    SELECT up.leaf, string_agg(up.slug, '/' ORDER BY up.depth DESC), NULL, NULL, NULL, NULL,
           NULL, NULL, NULL
    FROM up GROUP BY up.leaf
"""


def _queue_jobs(
    job_ids: list[int], project_ids: Iterable[int]
) -> tuple[dict[int, dict[str, Any]], dict[int, str]]:
    """(job pk -> what a queue row shows of it, project node id -> its slug path), in
    one plain statement (a page of 50 rows read through the ORM cost more than the rest
    of the page)."""
    if not job_ids:
        return {}, {}
    user = get_user_model()
    sql = _QUEUE_JOBS_SQL.format(
        job=Job._meta.db_table,
        user=user._meta.db_table,
        username=user.USERNAME_FIELD,
        node=Job._meta.get_field("project").related_model._meta.db_table,
    )
    params = [id_array(project_ids), id_array(job_ids)]
    jobs, paths = {}, {}
    for pk, submitter, name, *rest in fetch_all(sql, params, native_times=True):
        if name is None:
            paths[pk] = submitter
        else:
            jobs[pk] = dict(zip(_QUEUE_JOB_FIELDS, (name, submitter, *rest), strict=True))
    return jobs, paths


def estimate_position(*, job: Job) -> dict[str, Any]:
    """Plan the cluster as it is now with `job` (unsaved) added, through the engine,
    and say where it would stand: started by the next cycle, or its position overall
    and within its project, the project's fair-share factor and the reason it waits."""
    # with the refusals the live cycle keeps: the next cycle's plan, as far as it knows
    cs = cluster_snapshot(cluster=job.cluster, now=job.submitted_at, refusals=True)
    project = next((p for p, n in cs.node_ids.items() if n == job.project_id), "")
    workload = job_workload(job, project=project, workload_id=DRY_RUN_ID, submit_s=cs.now)
    pending = {p: list(ws) for p, ws in cs.snapshot.pending.items()}
    bucket = pending.setdefault(project, [])
    at = next((i for i, w in enumerate(bucket) if w.priority < job.priority), len(bucket))
    bucket.insert(at, workload)
    snapshot = dataclasses.replace(cs.snapshot, pending=pending)
    result = plan(snapshot, cs.policy, cs.now)
    entitled = entitled_shares(snapshot.tree)
    standing = project_standing(result.project_order, entitled)
    # as the queue shows it: no factor for a project without entitlement
    ranked = entitled.get(project, 0.0) > 0.0
    factor = standing[project][1] if ranked and project in standing else None
    ahead = len(cs.waiting)  # jobs waiting for their victims start first
    if any(s.workload_id == DRY_RUN_ID for s in result.starts):
        return {
            "starts_now": True,
            "position": None,
            "project_position": None,
            "queue_length": ahead + len(result.queue),
            "fairshare_factor": factor,
            "reason": "free GPUs fit it: the next cycle would start it",
        }
    project_position = 0
    for entry in result.queue:
        if entry.project == project:
            project_position += 1
        if entry.workload_id == DRY_RUN_ID:
            return {
                "starts_now": False,
                "position": ahead + entry.position,
                "project_position": project_position,
                "queue_length": ahead + len(result.queue),
                "fairshare_factor": entry.metric if ranked else None,
                "reason": entry.reason,
            }
    return {
        "starts_now": False,
        "position": None,
        "project_position": None,
        "queue_length": ahead + len(result.queue),
        "fairshare_factor": factor,
        "reason": "the engine would not queue it (no placement can hold it now)",
    }


# ---------------------------------------------------------------- clusters and hosts


def cluster_list(*, cluster_id: int | None = None) -> list[dict[str, Any]]:
    """Every cluster (or the one with `cluster_id`: an empty list when there is none)
    with its policy, hosts by health, jobs by state and last cycle."""
    clusters_qs = (
        Cluster.objects.select_related("metrics").prefetch_related("operators").order_by("name")
    )
    if cluster_id is not None:
        clusters_qs = clusters_qs.filter(pk=cluster_id)
    clusters = list(clusters_qs)
    counts = cluster_counts(c.pk for c in clusters)
    last_cycles = {
        c.cluster_id: c
        for c in CycleRecord.objects.filter(cluster__in=clusters)
        .order_by("cluster_id", "-started_at")
        .distinct("cluster_id")
    }
    out = []
    for cluster in clusters:
        out.append(
            {
                "cluster": cluster,
                **counts[cluster.pk],  # the Now page's counts (`cluster_counts`)
                "last_cycle": last_cycles.get(cluster.pk),
                "operators": [u.get_username() for u in cluster.operators.all()],
            }
        )
    return out


def cluster_policy_events(*, cluster_id: int, limit: int = 20) -> list[ClusterPolicyEvent]:
    """The cluster's last `limit` policy changes, newest first."""
    return list(
        ClusterPolicyEvent.objects.filter(cluster_id=cluster_id).order_by("-at", "-id")[:limit]
    )


def host_list(*, cluster_id: int | None = None, health: str | None = None) -> QuerySet[Host]:
    qs = Host.objects.select_related("cluster").order_by("cluster__name", "name")
    if cluster_id is not None:
        qs = qs.filter(cluster_id=cluster_id)
    if health:
        qs = qs.filter(health=health)
    return qs


def host_detail(*, host_id: int, events: int = 20) -> tuple[Host, list[HostEvent]] | None:
    host = Host.objects.select_related("cluster").filter(pk=host_id).first()
    if host is None:
        return None
    return host, list(host.events.order_by("-at", "-id")[:events])


# ---------------------------------------------------------------- the job page


BLOCKER_ORDER = ("misconfiguration", "budget", "capacity")


def job_blockers(job: Job, queue_info: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    """Every reason a pending job waits, ranked like Kueue's precedence:
    misconfiguration first, then budget, then capacity, each with its numbers.
    Empty for a job that is not pending. `queue_info`: the job's `job_queue_info`, when
    the caller has it already (the queue snapshot, which can hold every pending job of
    the cluster, is then read once per request)."""
    if job.state != JobState.PENDING:
        return []
    info = (queue_info if queue_info is not None else job_queue_info(job)) or {}
    room = job_room(job)  # after the queue: the room is kept with the version read there
    blockers: list[dict[str, Any]] = []
    if room.healthy_gpus < job.gpus:
        blockers.append(
            {
                "kind": "misconfiguration",
                "text": f"it asks for {job.gpus} GPUs; the cluster's healthy hosts hold "
                f"{room.healthy_gpus} in all",
                "numbers": {"gpus": job.gpus, "healthy_gpus": room.healthy_gpus},
            }
        )
    if job.min_runtime_s > 0 and job.project.weight <= 0:
        blockers.append(
            {
                "kind": "misconfiguration",
                "text": f"project {job.project.name} has weight 0: it may run only "
                "unallocated jobs (min runtime 0)",
                "numbers": {"weight": float(job.project.weight)},
            }
        )
    reason = str(info.get("reason") or "")
    if STANDING in reason:
        blockers.append(
            {
                "kind": "budget",
                "text": reason.removeprefix("waiting: "),
                "numbers": {"fairshare_factor": info.get("fairshare_factor")},
            }
        )
    capacity = _capacity_blocker(job, room, info)
    if reason.startswith(FOR_GPUS):  # only capacity holds it back: the cycle's words first
        capacity["text"] = f"{reason.removeprefix(FOR_GPUS)}; {capacity['text']}"
    blockers.append(capacity)
    return sorted(blockers, key=lambda b: BLOCKER_ORDER.index(b["kind"]))


def _capacity_blocker(job: Job, room: Room, info: dict[str, Any]) -> dict[str, Any]:
    """The jobs ahead, the hosts that could hold the job and when the protected minimum
    runtime of the jobs on them ends."""
    fits, free, protected_until = room.hosts_that_fit, room.free_gpus, room.protected_until
    position = info.get("position")
    ahead = (position - 1) if position else 0
    text = (
        f"{ahead} job{'s' if ahead != 1 else ''} ahead of it in the queue; "
        f"{fits} host{'s' if fits != 1 else ''} could hold it, "
        f"{free} of their GPUs free now"
    )
    if protected_until is not None:
        text += f"; the first protected minimum runtime there ends at {protected_until:%Y-%m-%d %H:%M} UTC"
    cluster = job.cluster
    held_for_short = (
        cluster.short_reserve_hosts if job.min_runtime_s > cluster.short_job_max_s else 0
    )
    if held_for_short:
        text += (
            f"; up to {held_for_short} host{'s are' if held_for_short != 1 else ' is'} held for "
            f"jobs with a min runtime of at most {runtime_text(cluster.short_job_max_s)} "
            f"(short-job reserve), and this job's is {runtime_text(job.min_runtime_s)}"
        )
    return {
        "kind": "capacity",
        "text": text,
        "numbers": {
            "jobs_ahead": ahead,
            "queue_length": info.get("queue_length"),
            "hosts_that_fit": fits,
            "free_gpus_on_them": free,
            "protected_until": protected_until.isoformat() if protected_until else None,
            "hosts_held_for_short_jobs": held_for_short,
        },
    }


def job_page(
    *,
    actor,
    job_id: int | None = None,
    job: Job | None = None,
    current_etas: dict[int, CachedJobEtas] | None = None,
    stored: StoredQueue | None = None,
    stored_read: bool = False,
) -> dict[str, Any] | None:
    """What the job page shows `actor`: the job (`job`, as `job_detail` reads it, with
    its `project_path`, or
    the one with `job_id`), its attempts and events, its place in the queue and its
    blockers, and while it holds GPUs its run's protection end (`protected_until`); the
    spec only if `actor` may read it. `current_etas`: as `job_eta` takes
    them (what `eta_refresh_request` answered); `stored` with `stored_read`: what
    `job_stored_queue` answered for `job`, the caller having read it (else read here)."""
    job = job if job is not None else job_detail(job_id=job_id or 0)
    if job is None:
        return None
    readable = spec_readable_projects(actor)
    queue = queue_info_in(job, stored if stored_read else job_stored_queue(job))
    attempts = job_attempts(job)
    return {
        "job": job,
        "project_path": job.project_path,  # job_detail's
        "spec_visible": spec_visible(actor, job, readable),
        "queue": queue,
        "blockers": job_blockers(job, queue),
        "eta": job_eta_for_page(job=job, current=current_etas),
        "attempts": attempts,
        "holds_gpus": job.state in ACTIVE_STATES,
        "protected_until": job_protected_until(job, attempts),
        "events": job_events(job),
        "utilization": job_utilization(attempts),
        "utilization_points": sparkline(attempt_series(a.pk for a in attempts)),
    }
