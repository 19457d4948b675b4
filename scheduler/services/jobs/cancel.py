"""Cancelling a job: a pending one at once, a starting or running one through its
attempt's stop intent."""

from __future__ import annotations

import datetime as dt

from django.db import transaction
from django.utils import timezone

from budgets import permissions
from config.errors import NotFound, PermissionDenied
from scheduler.cycle_requests import request_cycle
from scheduler.models import (
    Attempt,
    AttemptEnd,
    AttemptState,
    Job,
    JobState,
)
from scheduler.services.transitions import attempt_transition, job_event, job_transition


def job_cancel(*, actor, job_id: int, now: dt.datetime | None = None) -> Job:
    """Cancel a job as `actor` at `now` (default: the current time; idempotent: a job
    already cancelled, stopping for a cancel or finished is returned as it is, with no
    new event)."""
    with transaction.atomic():
        attempt = (
            Attempt.objects.select_for_update(of=("self", "job"))
            .select_related("job", "cluster")
            .filter(job_id=job_id)
            .exclude(state=AttemptState.ENDED)
            .first()
        )
        job = attempt.job if attempt else Job.objects.select_for_update().filter(pk=job_id).first()
        if job is None:
            raise NotFound(f"There is no job with id {job_id}.")
        if not permissions.may_cancel_job(actor, job):
            raise PermissionDenied(
                f"You may not cancel job {job_id}: only its submitter, the managers of its "
                "project and staff may."
            )
        if job.state in (JobState.STARTING, JobState.RUNNING, JobState.STOPPING) and not attempt:
            attempt = (
                Attempt.objects.select_for_update()
                .filter(job=job)
                .exclude(state=AttemptState.ENDED)
                .first()
            )
        changed = _cancel_locked(job, attempt, actor=actor, now=now or timezone.now())
        if changed:
            request_cycle(job.cluster_id)
    return job


def _cancel_locked(job: Job, attempt: Attempt | None, *, actor, now: dt.datetime) -> bool:
    who = actor.get_username()
    if job.state == JobState.PENDING:
        job_transition(
            job=job,
            to_state=JobState.CANCELLED,
            reason=f"cancelled by {who} while pending",
            reason_code="cancelled",
            at=now,
            actor=actor,
        )
        return True
    if attempt is None or job.state not in (JobState.STARTING, JobState.RUNNING, JobState.STOPPING):
        return False  # finished, or cancelled already
    if attempt.stop_intent == AttemptEnd.CANCELLED:
        return False
    if job.state == JobState.STOPPING:
        # Being preempted or drained: it ends cancelled instead of being requeued. The
        # states stay; who asked is recorded as for a transition.
        reason = f"cancel requested by {who} while stopping"
        attempt.stop_intent = AttemptEnd.CANCELLED
        attempt.save(update_fields=["stop_intent"])
        job.state_reason = reason[:500]
        job.save(update_fields=["state_reason", "updated_at"])
        job_event(
            job=job,
            from_state=job.state,
            to_state=job.state,
            reason=reason,
            reason_code="cancelled",
            at=now,
            attempt=attempt,
            actor=actor,
        ).save()
        return True
    grace = dt.timedelta(seconds=job.cluster.grace_s)
    attempt.job = job  # the locked row: its transition is the attempt's
    attempt_transition(
        attempt=attempt,
        to_state=AttemptState.STOPPING,
        changes={
            "stop_intent": AttemptEnd.CANCELLED,
            "stop_requested_at": now,
            "stop_deadline": now + grace,
        },
        job_steps=[JobState.STOPPING],
        reason=f"cancelled by {who}; stopping with a grace period of {job.cluster.grace_s} s",
        reason_code="cancelled",
        at=now,
        actor=actor,
    )
    return True
