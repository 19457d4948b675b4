"""What-if previews of a weight change (SPEC 1.5): request one, run it, read it.

`preview_request` validates like a weight change (the same permission: whoever may
change the weights under the node) and queues `scheduler.preview_run` after commit;
`preview_run` loads the cluster's jobs of the window from the database, replays them
with the current and the proposed weights through the simulator
(`scheduler.core.sim.whatif`, the same engine as live) and stores the per-project figures.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import logging
from collections.abc import Callable, Mapping, Sequence
from decimal import Decimal
from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models import Prefetch, Q
from django.utils import timezone

from budgets import permissions
from budgets.selectors import TreeIndex, tree_index
from budgets.services import weight_edits_check
from config.access import lock_user_row
from config.errors import NotFound, PermissionDenied, Throttled, ValidationFailed
from ledger.selectors import recorded_delivery, report_end
from scheduler.core.engine.types import BudgetNode as EngineNode
from scheduler.core.engine.types import Policy
from scheduler.core.sim.model import ClusterSpec, HostSpec, RunningAtStart, SimConfig
from scheduler.core.sim.whatif import FIDELITY_SHARE, JobRecord, fidelity, run_whatif
from scheduler.cycle_requests import PREVIEW_RUN, send
from scheduler.models import (
    TERMINAL_STATES,
    Attempt,
    Cluster,
    Job,
    JobState,
    Preview,
    PreviewState,
)
from scheduler.selectors.clusters import resolve_cluster
from scheduler.selectors.protection import protection_end_at
from scheduler.selectors.translate import engine_tree, policy_for_cluster
from scheduler.selectors.utilization import idle_after_by_attempt

log = logging.getLogger(__name__)
# A preview replays in seconds (30 s for 14 days of 1,024 GPUs): one running this long
# lost its worker, and the task Celery delivers again (acks late) runs it afresh.
STALE_RUN_S = 15 * 60.0
# Previews one user may have queued or running at once (each replays a cluster's jobs
# for seconds of a worker's CPU): one more is refused with a 429, which says to retry
# after PREVIEW_RETRY_AFTER_S (about one preview's length).
MAX_PREVIEWS_IN_FLIGHT_PER_USER = 3
PREVIEW_RETRY_AFTER_S = 30


def previews_in_flight(*, user, now: dt.datetime) -> int:
    """How many of `user`'s previews are queued or running (one queued or running for
    longer than STALE_RUN_S lost its worker and is not counted)."""
    since = now - dt.timedelta(seconds=STALE_RUN_S)
    return Preview.objects.filter(
        Q(state=PreviewState.QUEUED, created_at__gte=since)
        | Q(state=PreviewState.RUNNING, started_at__gte=since),
        requester=user,
    ).count()


def _refuse_over_the_limit(actor) -> None:
    """Raise Throttled (429, Retry-After) when `actor` has MAX_PREVIEWS_IN_FLIGHT_PER_USER
    previews in flight; the actor's row stays locked to the end of the transaction, so
    that two requests at once cannot both pass."""
    lock_user_row(actor)
    if previews_in_flight(user=actor, now=timezone.now()) >= MAX_PREVIEWS_IN_FLIGHT_PER_USER:
        error = Throttled(
            f"You have {MAX_PREVIEWS_IN_FLIGHT_PER_USER} what-if previews queued or running, "
            "the most one user may; try again when one has finished.",
            extra={"limit": MAX_PREVIEWS_IN_FLIGHT_PER_USER},
        )
        error.headers["Retry-After"] = str(PREVIEW_RETRY_AFTER_S)
        raise error


def _clean_days(days: Any) -> int:
    if days is None:
        return int(settings.ALLOT_PREVIEW_DAYS)
    top = int(settings.ALLOT_PREVIEW_MAX_DAYS)
    if isinstance(days, bool) or not isinstance(days, int) or not 1 <= days <= top:
        raise ValidationFailed(f"days must be a whole number from 1 to {top}.", field="days")
    return days


def preview_request(
    *,
    actor,
    node: int,
    weights: Sequence[Mapping[str, Any]],
    cluster: Any,
    days: int | None = None,
    idle_reclaim: Any = None,
) -> Preview:
    """Queue a what-if preview of `weights` (``[{"node": child id, "weight": w}]``) for
    the children of `node` on `cluster` over the last `days` days; `idle_reclaim`
    (true/false; None: the cluster's policy) turns idle-GPU reclaim on or off in the
    replay with the proposed weights (no weights: what reclaim alone would give).

    Raises ValidationFailed (400, naming the field), PermissionDenied (403: the actor
    may not change the weights under the node), Throttled (429: the actor already has
    MAX_PREVIEWS_IN_FLIGHT_PER_USER previews queued or running)."""
    if isinstance(node, bool) or not isinstance(node, int):
        raise ValidationFailed("node must be a node id.", field="node")
    if idle_reclaim is not None and not isinstance(idle_reclaim, bool):
        raise ValidationFailed(
            "idle_reclaim must be true, false or null (the cluster's policy).",
            field="idle_reclaim",
        )
    _index, edits = weight_edits_check(
        actor=actor,
        node_id=node,
        changes=weights,
        field="weights",
        allow_none=idle_reclaim is not None,
    )
    found = resolve_cluster(cluster)
    window = _clean_days(days)
    with transaction.atomic():
        _refuse_over_the_limit(actor)
        preview = Preview.objects.create(
            requester=actor,
            node_id=node,
            cluster=found,
            weights=[{"node": n, "weight": str(w)} for n, w in edits.items()],
            window_days=window,
            idle_reclaim=idle_reclaim,
        )
        transaction.on_commit(lambda: _enqueue(preview.pk))
    return preview


def _enqueue(preview_id: int) -> None:
    try:
        send(PREVIEW_RUN, preview_id)
    except Exception as exc:  # broker down: say so on the preview instead of a 500
        log.warning("could not queue preview %s: %s", preview_id, exc)
        Preview.objects.filter(pk=preview_id, state=PreviewState.QUEUED).update(
            state=PreviewState.FAILED,
            error="The preview could not be queued (the task queue is unreachable); try again.",
            finished_at=timezone.now(),
        )


def _trees(index: TreeIndex, edits: Mapping[int, Decimal]) -> tuple[EngineNode, EngineNode]:
    """The engine's tree with today's weights and with `edits` applied."""
    before, after = engine_tree(index), engine_tree(index, edits)
    if before is None or after is None:
        raise NotFound("There is no budget tree yet.")
    return before, after


def _runtime_s(job: Job, now: dt.datetime) -> float:
    """What the job needed: an ended job's real running time (saved work + its last
    run: a job that failed, was cancelled or was preempted for good ran that long and
    no longer), else its duration hint, else what it has run so far; 0 when unknown."""
    runs = [
        ((a.ended_at or now) - a.started_at).total_seconds()
        for a in job.attempts.all()
        if a.started_at is not None
    ]
    if job.state in TERMINAL_STATES and runs:
        return job.progress_s + runs[-1]
    if job.duration_s:
        return float(job.duration_s)
    return float(sum(runs))


def _ran_before_s(job: Job, since: dt.datetime, now: dt.datetime) -> float:
    """The work a job present at `since` had done before it: its runs before `since`
    (a job that is not resumable keeps only its run that was going at `since`)."""
    done = 0.0
    for a in job.attempts.all():
        if a.started_at is None or a.started_at >= since:
            continue
        end = min(a.ended_at or now, since)
        ran = max(0.0, (end - a.started_at).total_seconds())
        if job.resumable:
            done += ran
        elif a.ended_at is None or a.ended_at > since:
            done = ran
    return done


def _running_at(job: Job, since: dt.datetime, cap: float) -> RunningAtStart | None:
    """The run a job had going at `since` (an attempt started before it and not ended by
    then) as the replay continues it: its start, GPUs and charge as stored and its
    protection end by the engine's rule on the stored run (`protection_end_at`), in
    seconds since `since`; None when it was waiting then."""
    for a in job.attempts.all():
        if a.started_at is None or a.started_at >= since:
            continue
        if a.ended_at is not None and a.ended_at <= since:
            continue
        until = protection_end_at(a, job, a.started_at, cap)
        return RunningAtStart(
            started_s=(a.started_at - since).total_seconds(),
            placements=tuple(
                (str(p["host"]), tuple(int(i) for i in p["gpu_indices"])) for p in a.placements
            ),
            allocated=a.allocated,
            protected_until_s=None if until is None else (until - since).total_seconds(),
        )
    return None


@dataclasses.dataclass
class ReplayInput:
    """The jobs a what-if replays and what it could not reproduce of the record:
    `carried` jobs were running or waiting when the window opened (replayed with the work
    they had left: `carried_running` of them go on running their run on their GPUs from
    its start, the others wait from it; `carried_before_gpu_h` of theirs ran before it),
    `unknown_runtime` jobs have not ended and declared no duration (replayed with what
    they ran so far, `unknown_runtime_gpu_h`)."""

    records: list[JobRecord]
    carried: int = 0
    carried_running: int = 0
    carried_before_gpu_h: float = 0.0
    unknown_runtime: int = 0
    unknown_runtime_gpu_h: float = 0.0
    idle_jobs: int = 0  # replayed with an idle pattern (`JobRecord.idle_after_s`)


def _idle_after_s(job: Job, idle_after: Mapping[int, float]) -> float | None:
    """How long into a run the job's GPUs went idle for good: its first attempt whose
    recorded utilization stayed below the cluster's idle threshold to its end
    (`idle_after_by_attempt`); None when none did (busy, or unknown)."""
    for attempt in job.attempts.all():
        if attempt.pk in idle_after:
            return idle_after[attempt.pk]
    return None


def job_records(
    cluster: Cluster, index: TreeIndex, since: dt.datetime, now: dt.datetime
) -> ReplayInput:
    """The cluster's jobs present in [since, now) as `JobRecord`s (seconds since `since`):
    those submitted in it, and those submitted before it and still running or waiting at
    `since`, submitted at the window's start with the work they had left (one running
    then goes on with its run, `JobRecord.running`). A job whose recorded utilization
    stayed below the cluster's `idle_threshold_pct` from some point of a run to its end
    is replayed idle from that point of each run (`idle_after_s`; a carried waiting job's
    less the work it had done), so that a replay with idle-GPU reclaim on can reclaim it."""
    attempts = Prefetch("attempts", queryset=Attempt.objects.order_by("number"))
    present = Q(submitted_at__gte=since) | Q(ended_at__isnull=True) | Q(ended_at__gt=since)
    jobs = (
        Job.objects.filter(cluster=cluster, submitted_at__lt=now)
        .filter(present)
        .prefetch_related(attempts)
        .order_by("submitted_at", "pk")
    )
    idle_after = idle_after_by_attempt(
        Attempt.objects.filter(job__in=jobs.order_by()).only("pk", "started_at", "ended_at"),
        float(cluster.idle_threshold_pct),
        now,
    )
    cap = policy_for_cluster(cluster).max_min_runtime_s
    out = ReplayInput(records=[])
    for job in jobs.iterator(chunk_size=2000):
        runtime = _runtime_s(job, now)
        submit = (job.submitted_at - since).total_seconds()
        idle = _idle_after_s(job, idle_after)
        running = None
        if job.ended_at is None and not job.duration_s and job.state != JobState.SUCCEEDED:
            out.unknown_runtime += 1
            out.unknown_runtime_gpu_h += job.gpus * runtime / 3600
        if submit < 0:
            before = _ran_before_s(job, since, now)
            runtime -= before
            out.carried += 1
            out.carried_before_gpu_h += job.gpus * before / 3600
            submit = 0.0
            running = _running_at(job, since, cap)
            if running is None and idle is not None:
                idle = max(0.0, idle - before)
            if runtime <= 0:
                continue
            if running is not None:
                out.carried_running += 1
        if idle is not None:
            out.idle_jobs += 1
        out.records.append(
            JobRecord(
                job_id=str(job.pk),
                project=index.path(job.project_id) if job.project_id in index.nodes else "",
                submit_s=submit,
                gpus=job.gpus,
                runtime_s=runtime,
                min_runtime_s=float(min(job.min_runtime_s, runtime)),
                resumable=job.resumable,
                kind=job.kind,
                priority=job.priority,
                user=str(job.submitter_id),
                idle_after_s=idle,
                running=running,
            )
        )
    return out


def prior_usage(
    cluster: Cluster, index: TreeIndex, since: dt.datetime
) -> tuple[tuple[str, float, float, int], ...]:
    """The charged runs of the cluster's usage window before `since`, as (project path,
    start, end, GPUs) in seconds relative to `since` (<= 0): the replay starts with the
    fair-share usage the cluster had when the window opened, not with none."""
    lookback = float(cluster.lookback_s)
    if cluster.half_life_s:
        lookback = 10.0 * cluster.half_life_s  # older runs weigh under 2^-10
    earliest = since - dt.timedelta(seconds=lookback)
    attempts = (
        Attempt.objects.filter(cluster=cluster, allocated=True, started_at__lt=since)
        .filter(Q(ended_at__isnull=True) | Q(ended_at__gt=earliest))
        .values_list("project_id", "started_at", "ended_at", "gpus")
    )
    out = []
    for project_id, started, ended, gpus in attempts.iterator(chunk_size=5000):
        if project_id not in index.nodes:
            continue
        start = max(started, earliest)
        end = min(ended or since, since)
        if end > start:
            out.append(
                (
                    index.path(project_id),
                    (start - since).total_seconds(),
                    (end - since).total_seconds(),
                    gpus,
                )
            )
    return tuple(out)


def preview_window(now: dt.datetime, days: int) -> tuple[dt.datetime, dt.datetime]:
    """The window a preview replays: the `days` days of complete hours before `now`, the
    hours the ledger has recorded (so the replay and the record cover the same time),
    ending where every reporting window ends (`ledger.periods.report_end`)."""
    until = report_end(now)
    return until - dt.timedelta(days=days), until


def preview_compute(
    *,
    cluster: Cluster,
    index: TreeIndex,
    edits: Mapping[int, Decimal],
    since: dt.datetime,
    until: dt.datetime,
    parallel: bool = True,
    progress: Callable[[float], None] | None = None,
    idle_reclaim: bool | None = None,
) -> dict[str, Any]:
    """The preview's figures per project: what the ledger recorded over [since, until),
    the replay with today's weights and the replay with the proposed ones, how far the
    first replay is from the record (`fidelity`), and what the replays could not
    reproduce (`not_reproduced`). `idle_reclaim` (None: the cluster's policy) is the
    idle-GPU reclaim of the replay with the proposed weights: true shows what turning
    it on would give (`idle_gpu_h_before`/`_after`, `idle_reclaims`), the jobs' idle
    points coming from their recorded utilization (`job_records`)."""
    replay_input = job_records(cluster, index, since, until)
    config = dataclasses.replace(
        sim_config_for_cluster(cluster), prior_usage=prior_usage(cluster, index, since)
    )
    after_config = config
    if idle_reclaim is not None:
        after_config = dataclasses.replace(config, idle_reclaim=idle_reclaim)
    result = run_whatif(
        _cluster_spec(cluster),
        *_trees(index, edits),
        replay_input.records,
        start_s=0.0,
        end_s=(until - since).total_seconds(),
        config=config,
        after_config=after_config,
        parallel=parallel,
        progress=progress,
    )
    result["idle_reclaim"] = {"before": config.idle_reclaim, "after": after_config.idle_reclaim}
    recorded = {
        index.path(node_id): figures
        for node_id, figures in recorded_delivery(cluster=cluster, since=since, until=until).items()
        if node_id in index.nodes
    }
    rows = result["projects"]
    known = {r["project"] for r in rows}
    for name in sorted(set(recorded) - known):
        rows.append({"project": name, "jobs": 0})
    for row in rows:
        rec = recorded.get(row["project"], {})
        row["delivered_gpu_h_recorded"] = rec.get("delivered_gpu_h", 0.0)
        row["capped_entitled_gpu_h_recorded"] = rec.get("entitled_gpu_h", 0.0)
        row["ratio_recorded"] = rec.get("ratio")
    fid = fidelity(
        {r["project"]: r["delivered_gpu_h_recorded"] for r in rows},
        {r["project"]: r.get("delivered_gpu_h_before") or 0.0 for r in rows},
    )
    for row in rows:
        row["replay_difference"] = fid["projects"].get(row["project"])
    result["fidelity"] = {
        "worst": fid["worst"],
        "worst_project": fid["worst_project"],
        "judged": fid["judged"],
        "share": FIDELITY_SHARE,
    }
    result["not_reproduced"] = {
        "carried": replay_input.carried,
        "carried_running": replay_input.carried_running,
        "carried_before_gpu_h": replay_input.carried_before_gpu_h,
        "unknown_runtime": replay_input.unknown_runtime,
        "unknown_runtime_gpu_h": replay_input.unknown_runtime_gpu_h,
    }
    result["idle_jobs"] = replay_input.idle_jobs
    result["window_start"] = since.isoformat()
    result["window_end"] = until.isoformat()
    return result


def _cluster_spec(cluster: Cluster) -> ClusterSpec:
    hosts = tuple(HostSpec(h.name, h.gpus) for h in cluster.hosts.order_by("name"))
    if not hosts:
        hosts = tuple(
            HostSpec(f"h{i:03d}", cluster.gpus_per_host) for i in range(cluster.host_count)
        )
    return ClusterSpec(cluster.name, hosts)


# The settings the simulator shares with the engine's policy: a preview (and the demo's
# back-fill) reads each from the live policy, so a new policy setting reaches both.
_SHARED_SETTINGS = tuple(
    f.name
    for f in dataclasses.fields(SimConfig)
    if f.name in {g.name for g in dataclasses.fields(Policy)}
)


def sim_config_for_cluster(cluster: Cluster) -> SimConfig:
    """The simulator config that plans as the cluster's live cycles do: every setting
    it shares with the engine's policy is the one `policy_for_cluster` gives."""
    policy = policy_for_cluster(cluster)
    return SimConfig(
        policy="fairshare", **{name: getattr(policy, name) for name in _SHARED_SETTINGS}
    )


def preview_run(*, preview_id: int, parallel: bool = True) -> Preview:
    """Run a queued preview to the end (or one whose worker died running it,
    `STALE_RUN_S`); a failure is stored on it, never raised."""
    now = timezone.now()
    abandoned = Q(
        state=PreviewState.RUNNING, started_at__lt=now - dt.timedelta(seconds=STALE_RUN_S)
    )
    claimed = (
        Preview.objects.filter(pk=preview_id)
        .filter(Q(state=PreviewState.QUEUED) | abandoned)
        .update(state=PreviewState.RUNNING, started_at=now, progress=0.05)
    )
    preview = Preview.objects.select_related("cluster").get(pk=preview_id)
    if not claimed:
        return preview  # already run (a redelivered task)
    try:
        since, until = preview_window(timezone.now(), preview.window_days)
        index = tree_index()
        edits = {int(c["node"]): Decimal(c["weight"]) for c in preview.weights}
        Preview.objects.filter(pk=preview_id).update(progress=0.1)

        def progress(fraction: float) -> None:
            Preview.objects.filter(pk=preview_id).update(progress=0.1 + 0.85 * fraction)

        result = preview_compute(
            cluster=preview.cluster,
            index=index,
            edits=edits,
            since=since,
            until=until,
            parallel=parallel,
            progress=progress,
            idle_reclaim=preview.idle_reclaim,
        )
        result["changed"] = [
            {"node": n, "path": index.path(n), "old": str(index.nodes[n].weight), "new": str(w)}
            for n, w in edits.items()
            if n in index.nodes
        ]
        preview.state, preview.result, preview.progress = PreviewState.DONE, result, 1.0
    except Exception as exc:  # stored for the person who asked; logged for operators
        log.exception("preview %s failed", preview_id)
        preview.state, preview.error = PreviewState.FAILED, f"{type(exc).__name__}: {exc}"[:1000]
    preview.finished_at = timezone.now()
    preview.save(update_fields=["state", "result", "progress", "error", "finished_at"])
    return preview


def preview_readable(*, actor, preview: Preview) -> bool:
    """The requester, superusers and whoever may change the weights under its node."""
    return permissions.may_read_preview(actor, preview)


def preview_get(*, actor, preview_id: int) -> Preview:
    """A preview the actor may read. NotFound (404) when there is none; PermissionDenied
    (403) when it exists but belongs to someone else's subtree."""
    preview = Preview.objects.select_related("requester", "cluster").filter(pk=preview_id).first()
    if preview is None:
        raise NotFound(f"There is no preview with id {preview_id}.")
    if not preview_readable(actor=actor, preview=preview):
        raise PermissionDenied(
            "Only its requester and the managers who may change these weights may read it."
        )
    return preview
