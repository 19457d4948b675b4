"""The reconcile after a restore: bring a database restored from a backup in line with
what every cluster really ran since, then resume scheduling (`manage.py reconcile_restore`).

A restored database is older than the clusters: jobs it shows pending may have started,
finished or been cancelled since the backup, and jobs it shows running may have ended.
Scheduling from it would run finished work again and bring cancelled jobs back, so
scheduling pauses by itself on a restored database (`ops.services.scheduling_gate_check`)
until this has run. Per cluster, in rounds until nothing is left to adopt:

1. adoption: every run the cluster reports under an Allot attempt id the database does
   not know, of a job the database shows pending, is recorded as the attempt the lost
   cycle had made (the job goes pending -> starting, "adopted after a restore");
2. a reconcile-only cycle (`CycleWorker.run(reconcile_only=True)`): the usual reconcile of open
   attempts, nothing planned: an adopted run is confirmed running (adopted) or ended as
   the cluster says (finished stays finished, cancelled outside Allot stays cancelled),
   and runs the database shows running that ended since the backup end as they did.

A run the cluster reports stopped by Allot (or stopping) while the database has no stop
for it was stopped after the backup, for a reason the database lost: a cancel, a
preemption or a drain. It ends cancelled (its job is not requeued: a cancelled job never
comes back; a preempted one is resubmitted by its owner). Runs of jobs the database does not have (submitted after the
backup) are reported and left alone (the engine counts their GPUs as held); job ids
continue above them. A job cancelled while still pending after the backup left no trace
outside the database and comes back pending: the report says how many jobs are pending.
The clusters must still report the runs that ended since the backup (the simulated
cluster's `retention_s`, Slurm's MinJobAge without slurmdbd).
"""

from __future__ import annotations

import datetime as dt
import logging
import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from django.db import connection, transaction
from django.utils import timezone

from config.errors import ApplicationError
from ops.services import scheduling_resume
from scheduler import adapters
from scheduler.adapters import ClusterJob, ClusterJobState
from scheduler.cycle.worker import CycleWorker
from scheduler.models import Attempt, AttemptEnd, AttemptState, Cluster, Job, JobState
from scheduler.selectors.translate import placements_to_json
from scheduler.services.transitions import attempt_transition, job_transition

log = logging.getLogger(__name__)
# scheduler.cycle.apply stamps `allot-<job id>-<attempt number>-<random hex>`
ATTEMPT_ID_RE = re.compile(r"^allot-(\d+)-(\d+)-[0-9a-f]+$")
MAX_ROUNDS = 20
UNREAD = "cluster unreachable"
LOST_STOP = (
    "Allot stopped this run after the backup was taken, for a reason the restored "
    "database lost (a cancel, a preemption or a drain): it ends cancelled"
)


class RestoreReconcileFailed(ApplicationError):
    code = "restore_reconcile_failed"


@dataclass
class ClusterReconcile:
    """What the reconcile found on one cluster."""

    name: str
    rounds: int = 0
    adopted: dict[str, int] = field(default_factory=dict)  # cluster state -> runs adopted
    reconciled: int = 0  # open attempts the cluster's report changed
    unknown_runs: list[str] = field(default_factory=list)  # attempt ids of unknown jobs


@dataclass
class RestoreReport:
    clusters: list[ClusterReconcile]
    pending_jobs: int  # pending after the reconcile (a pending cancel left no trace)
    resumed: bool


def restore_reconcile(*, by: str, now: dt.datetime | None = None) -> RestoreReport:
    """Reconcile every cluster with what it ran since the backup, then resume scheduling.
    Raises RestoreReconcileFailed (scheduling stays paused) when a cluster cannot be
    read or another process runs its cycles."""
    worker = CycleWorker()  # what a freshly started worker knows: nothing
    results = [
        _reconcile_cluster(cluster, now, worker) for cluster in Cluster.objects.order_by("name")
    ]
    highest = max((_highest_job_id(r.unknown_runs) for r in results), default=0)
    if highest:
        _continue_job_ids(highest)
    scheduling_resume(by=by)
    pending = Job.objects.filter(state=JobState.PENDING).count()
    for r in results:
        log.warning(
            "reconciled %s after a restore: %s adopted, %d attempts reconciled, %d runs of "
            "unknown jobs",
            r.name,
            r.adopted or "nothing",
            r.reconciled,
            len(r.unknown_runs),
        )
    return RestoreReport(clusters=results, pending_jobs=pending, resumed=True)


def _reconcile_cluster(
    cluster: Cluster, now: dt.datetime | None, worker: CycleWorker
) -> ClusterReconcile:
    """Rounds of (read, mark lost stops, adopt, reconcile) until a round changes nothing."""
    result = ClusterReconcile(name=cluster.name)
    adapter = adapters.for_cluster(cluster)
    try:
        for result.rounds in range(1, MAX_ROUNDS + 1):
            reported = _read(cluster, adapter)
            at = now or timezone.now()
            changed = _mark_lost_stops(cluster, reported, at) + _adopt(
                cluster, reported, at, result
            )
            record = worker.run(
                cluster_id=cluster.pk, now=now, adapter=adapter, reconcile_only=True
            )
            if record is None:
                raise RestoreReconcileFailed(
                    f"another process runs a cycle of {cluster.name}: stop the workers and "
                    "beat before reconciling a restored database"
                )
            unread = [e for e in record.errors if str(e).startswith(UNREAD)]
            if unread:
                raise RestoreReconcileFailed(
                    f"{cluster.name} cannot be read ({unread[0]}); scheduling stays paused"
                )
            result.reconciled += record.reconciled
            if not changed and not record.reconciled:
                break
    finally:
        adapter.close()
    return result


def _read(cluster: Cluster, adapter) -> list[ClusterJob]:
    try:
        return list(adapter.jobs())
    except Exception as exc:
        raise RestoreReconcileFailed(
            f"{cluster.name} cannot be read ({exc}); scheduling stays paused"
        ) from exc


def _mark_lost_stops(cluster: Cluster, reported: Sequence[ClusterJob], now: dt.datetime) -> int:
    """Open attempts the cluster reports stopped (or stopping) by Allot while the
    database has no stop for them: stopped after the backup, for a reason it lost. They
    end cancelled (the reconcile applies the intent), never requeued."""
    stopped = {
        cj.attempt_id: cj
        for cj in reported
        if cj.state in (ClusterJobState.STOPPED, ClusterJobState.STOPPING)
    }
    rows = Attempt.objects.filter(
        cluster=cluster,
        attempt_id__in=list(stopped),
        state__in=(AttemptState.STARTING, AttemptState.RUNNING),
        stop_intent="",
    )
    marked = 0
    with transaction.atomic():
        for attempt in rows.select_for_update(of=("self", "job")).select_related("job"):
            changes = {
                "stop_intent": AttemptEnd.CANCELLED,
                "stop_requested_at": now,
                "stop_deadline": now + dt.timedelta(seconds=cluster.grace_s),
            }
            if stopped[attempt.attempt_id].state == ClusterJobState.STOPPING:
                attempt_transition(
                    attempt=attempt,
                    to_state=AttemptState.STOPPING,
                    changes=changes,
                    job_steps=[JobState.STOPPING],
                    reason=LOST_STOP,
                    reason_code="stopped_after_backup",
                    at=now,
                )
            else:  # stopped on the cluster: the reconcile ends it as its intent says
                for name, value in changes.items():
                    setattr(attempt, name, value)
                attempt.save(update_fields=list(changes))
            marked += 1
    return marked


def _adopt(
    cluster: Cluster, reported: Sequence[ClusterJob], now: dt.datetime, result: ClusterReconcile
) -> int:
    """Record the first unknown run of each pending job (one per job and round)."""
    known = set(
        Attempt.objects.filter(
            attempt_id__in=[cj.attempt_id for cj in reported if cj.attempt_id]
        ).values_list("attempt_id", flat=True)
    )
    runs: dict[int, list[tuple[int, ClusterJob]]] = {}
    for cj in reported:
        match = ATTEMPT_ID_RE.match(cj.attempt_id or "")
        if match and cj.attempt_id not in known:
            runs.setdefault(int(match[1]), []).append((int(match[2]), cj))
    jobs = Job.objects.in_bulk(list(runs))
    result.unknown_runs = sorted(
        cj.attempt_id
        for job_id, found in runs.items()
        for _, cj in found
        if job_id not in jobs or not _is_run_of(jobs[job_id], cluster, cj)
    )
    adopted = 0
    for job_id, found in sorted(runs.items()):
        job = jobs.get(job_id)
        number, cj = min(found, key=lambda run: run[0])
        if job is None or not _is_run_of(job, cluster, cj) or job.state != JobState.PENDING:
            continue
        with transaction.atomic():
            job = Job.objects.select_for_update().get(pk=job_id)
            if job.state == JobState.PENDING:
                _adopt_run(job, number, cj, cluster, now)
                result.adopted[str(cj.state)] = result.adopted.get(str(cj.state), 0) + 1
                adopted += 1
    return adopted


def _is_run_of(job: Job, cluster: Cluster, cj: ClusterJob) -> bool:
    """Whether a cluster's run can be this job's: same cluster, started after it was
    submitted (a job id reused after the restore belongs to a newer job)."""
    if job.cluster_id != cluster.pk:
        return False
    started = cj.started_at
    return started is None or started >= job.submitted_at - dt.timedelta(seconds=5)


def _adopt_run(job: Job, number: int, cj: ClusterJob, cluster: Cluster, now: dt.datetime) -> None:
    """The attempt a lost cycle made for this run; the next reconcile takes it from there."""
    stopped = cj.state in (ClusterJobState.STOPPED, ClusterJobState.STOPPING)
    at = min(cj.started_at or now, now)
    attempt = Attempt.objects.create(
        job=job,
        number=number,
        attempt_id=cj.attempt_id,
        cluster=cluster,
        project_id=job.project_id,
        gpus=job.gpus,
        placements=placements_to_json(cj.placements) if cj.placements else [],
        allocated=job.allocated,
        state=AttemptState.STOPPING
        if cj.state == ClusterJobState.STOPPING
        else AttemptState.STARTING,
        external_id=cj.external_id,
        created_at=at,
        started_at=cj.started_at if cj.state == ClusterJobState.STOPPING else None,
        stop_requested_at=now if stopped else None,
        stop_deadline=now + dt.timedelta(seconds=cluster.grace_s) if stopped else None,
        stop_intent=AttemptEnd.CANCELLED if stopped else "",
    )
    Job.objects.filter(pk=job.pk).update(attempt_count=max(job.attempt_count, number))
    job.attempt_count = max(job.attempt_count, number)
    reason = f"adopted after a restore: attempt {number} found on the cluster ({cj.state})"
    if stopped:
        reason += "; " + LOST_STOP
    job_transition(
        job=job,
        to_state=JobState.STARTING,
        reason=reason,
        reason_code="adopted_after_restore",
        at=at,
        attempt=attempt,
    )
    if cj.state == ClusterJobState.STOPPING:
        job_transition(
            job=job,
            to_state=JobState.STOPPING,
            reason=reason,
            reason_code="adopted_after_restore",
            at=now,
            attempt=attempt,
        )


def _highest_job_id(attempt_ids: list[str]) -> int:
    ids = [int(m[1]) for a in attempt_ids if (m := ATTEMPT_ID_RE.match(a))]
    return max(ids, default=0)


def _continue_job_ids(above: int) -> None:
    """New jobs get ids above every job id the clusters report (ids of jobs the
    restored database lost would otherwise be given again)."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_get_serial_sequence(%s, 'id')", [Job._meta.db_table])
        sequence = cursor.fetchone()[0]
        cursor.execute(
            f"SELECT setval(%s, GREATEST(%s, (SELECT last_value FROM {sequence})))",
            [sequence, above],
        )
