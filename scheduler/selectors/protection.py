"""When a stored run's protection ends (docs/concepts.md#protection), as the queue page,
the job page, My jobs, the job API and `allot show` say it: the engine's one rule
(`scheduler.core.engine.runs.protected_until`) on the stored run, never a second
computation. A job has a protection end while it holds GPUs (starting, running or
stopping: an open attempt) and is allocated; otherwise none."""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence

from scheduler.core.engine.runs import protected_until
from scheduler.models import ACTIVE_STATES, Attempt, Job
from scheduler.selectors.translate import running_holder, workload

__all__ = ["job_protected_until", "jobs_protected_until", "protection_end_at"]


def protection_end_at(
    attempt: Attempt, job: Job, started: dt.datetime, cap: float
) -> dt.datetime | None:
    """When the run's protection ends (docs/concepts.md#protection): the engine's rule
    on the stored run; None for unallocated work, which is never protected."""
    work = workload(
        job_id=job.pk,
        project="",
        gpus=attempt.gpus,
        submit_s=job.submitted_at.timestamp(),
        min_runtime_s=job.min_runtime_s,
        resumable=job.resumable,
        priority=job.priority,
        kind=job.kind,
    )
    holder = running_holder(
        work,
        (),
        started_s=started.timestamp(),
        allocated=attempt.allocated,
        last_checkpoint_s=None,
    )
    until = protected_until(holder, cap)
    return None if until == float("-inf") else dt.datetime.fromtimestamp(until, dt.UTC)


def _open_run_end(job: Job, attempt: Attempt) -> dt.datetime | None:
    """The protection end of `job`'s open `attempt`, from the run's start (its creation
    until the cluster confirms it started, as the queue page's running jobs count it)."""
    started = attempt.started_at or attempt.created_at
    return protection_end_at(attempt, job, started, float(job.cluster.max_min_runtime_s))


def job_protected_until(job: Job, attempts: Sequence[Attempt]) -> dt.datetime | None:
    """When the protection of `job`'s current run ends (`attempts`: its attempts, as
    `job_attempts` reads them); None when it holds no GPUs or is unallocated."""
    if job.state not in ACTIVE_STATES:
        return None
    open_attempts = [a for a in attempts if a.ended_at is None]
    return _open_run_end(job, open_attempts[-1]) if open_attempts else None


def jobs_protected_until(jobs: Sequence[Job]) -> dict[int, dt.datetime | None]:
    """Job pk -> when its current run's protection ends (None: unallocated, never
    protected), for those of `jobs` (with their cluster loaded) that hold GPUs; one
    query whichever of them do (a page reads as much with running jobs as without)."""
    by_pk = {job.pk: job for job in jobs}
    if not by_pk:
        return {}
    attempts = Attempt.objects.filter(job_id__in=by_pk, ended_at__isnull=True).order_by("number")
    return {
        a.job_id: _open_run_end(by_pk[a.job_id], a)
        for a in attempts
        if by_pk[a.job_id].state in ACTIVE_STATES
    }
