"""The state machines of jobs and attempts: the only places that change `Job.state`
(`job_transition`) and `Attempt.state` (`attempt_transition`).

    job:     pending -> starting -> running -> stopping -> pending (preempted or drained,
                                                           resumable)
                                                        | succeeded | failed | cancelled
                                                        | preempted (stopped, not resumable)
    attempt: starting -> running -> stopping -> ended (starting and running may end
                                                       or stop at once)

Every transition writes an append-only `JobEvent` (time, from, to, reason, the cycle
and the actor; for a preemption the preempting job, its project and the rule). An
attempt's transition is recorded by the events of the job steps it causes, which name
the attempt; one that moves no job writes an event of the job's unchanged state.
Callers hold the rows' locks (`select_for_update`) inside a transaction.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping, Sequence
from typing import Any

from django.utils import timezone

from allot_common.placements import host_gpus_text
from config.errors import Conflict
from scheduler.core.engine.explain import hosts_text
from scheduler.models import (
    TERMINAL_STATES,
    Attempt,
    AttemptEnd,
    AttemptState,
    CycleRecord,
    Job,
    JobEvent,
    JobState,
)

S = JobState
LEGAL_TRANSITIONS: dict[str, frozenset[str]] = {
    "": frozenset({S.PENDING}),  # submission
    S.PENDING: frozenset({S.STARTING, S.CANCELLED}),
    # a start the adapter refused goes back to pending (or fails); a stop asked before
    # the adapter confirmed the start goes through stopping like any other
    S.STARTING: frozenset({S.RUNNING, S.STOPPING, S.PENDING, S.SUCCEEDED, S.FAILED}),
    # pending: lost with its host while resumable
    S.RUNNING: frozenset({S.STOPPING, S.SUCCEEDED, S.FAILED, S.PENDING}),
    S.STOPPING: frozenset({S.PENDING, S.PREEMPTED, S.CANCELLED, S.SUCCEEDED, S.FAILED}),
    S.SUCCEEDED: frozenset(),
    S.FAILED: frozenset(),
    S.CANCELLED: frozenset(),
    S.PREEMPTED: frozenset(),
}
A = AttemptState
ATTEMPT_TRANSITIONS: dict[str, frozenset[str]] = {
    # a start the cluster never confirmed ends (start failed) without running
    A.STARTING: frozenset({A.RUNNING, A.STOPPING, A.ENDED}),
    A.RUNNING: frozenset({A.STOPPING, A.ENDED}),
    A.STOPPING: frozenset({A.ENDED}),
    A.ENDED: frozenset(),
}


class IllegalTransition(Conflict):
    code = "illegal_transition"


def is_legal(from_state: str, to_state: str) -> bool:
    return to_state in LEGAL_TRANSITIONS.get(from_state, frozenset())


def job_target(end: str, *, resumable: bool, started: bool, intent: str = "") -> str:
    """The state a job goes to when its attempt ended with `end` (docs/architecture.md):
    `resumable`, the job's; `started`, whether the cluster ever reported the run
    started; `intent`, the attempt's `stop_intent` (why Allot was stopping it, if it
    was). The one rule: the live cycle (`scheduler.cycle.attempts.end_attempt`) and the
    demo's back-filled history (`scheduler.services.demo`) both ask it."""
    # a run the cluster never reported started lost no work: it simply goes back
    requeue = resumable or not started
    if end == AttemptEnd.SUCCEEDED:
        return JobState.SUCCEEDED
    if end == AttemptEnd.FAILED:
        return JobState.FAILED
    if end == AttemptEnd.START_FAILED:
        return JobState.CANCELLED if intent == AttemptEnd.CANCELLED else JobState.PENDING
    if end == AttemptEnd.LOST and intent:
        end = intent  # it was being stopped anyway
    if end == AttemptEnd.CANCELLED:
        return JobState.CANCELLED
    if end in (AttemptEnd.PREEMPTED, AttemptEnd.DRAINED, AttemptEnd.MIGRATED):
        return JobState.PENDING if requeue else JobState.PREEMPTED
    return JobState.PENDING if requeue else JobState.FAILED  # lost


def running_reason(placements: list[dict], number: int) -> str:
    """A running job's state reason: where its attempt `number` runs."""
    return f"running on {stored_placements_text(placements)} (attempt {number})"


def stored_placements_text(placements: Sequence[Mapping[str, Any]]) -> str:
    """Stored placements (`host`, `gpu_indices`) as the engine's reasons write them, at most
    NAMED_HOSTS of them named."""
    return hosts_text([host_gpus_text(p["host"], p["gpu_indices"]) for p in placements])


def job_event(
    *,
    job: Job,
    from_state: str,
    to_state: str,
    reason: str,
    at: dt.datetime,
    reason_code: str = "",
    attempt: Attempt | None = None,
    cycle: CycleRecord | None = None,
    actor=None,
    preempting_job: Job | None = None,
    rule: str = "",
) -> JobEvent:
    """An unsaved `JobEvent` (bulk submissions create thousands with `bulk_create`)."""
    return JobEvent(
        job=job,
        at=at,
        from_state=from_state,
        to_state=to_state,
        reason=reason[:1000],
        reason_code=reason_code,
        attempt=attempt,
        cycle=cycle,
        actor=actor,
        actor_name=actor.get_username() if actor is not None else "",
        preempting_job=preempting_job,
        preempting_project_id=preempting_job.project_id if preempting_job else None,
        rule=rule,
    )


def job_transition(
    *,
    job: Job,
    to_state: str,
    reason: str,
    reason_code: str = "",
    at: dt.datetime | None = None,
    attempt: Attempt | None = None,
    cycle: CycleRecord | None = None,
    actor=None,
    preempting_job: Job | None = None,
    rule: str = "",
) -> JobEvent:
    """Move a stored `job` to `to_state` (saving it) and record the event. Raises
    `IllegalTransition` (409) when the state machine does not allow the move.
    (A submission's first event, "" -> pending, is written by the submit service.)"""
    from_state = job.state
    if not is_legal(from_state, to_state):
        raise IllegalTransition(
            f"Job {job.pk} cannot go from {from_state} to {to_state}.", field="state"
        )
    at = at or timezone.now()
    if at < job.queued_at:
        # a cycle's clock is read before its snapshot: a job submitted in between is
        # planned by it, yet its history must not start before it was queued
        at = job.queued_at
    job.state = to_state
    job.state_reason = reason[:500]
    update = ["state", "state_reason", "updated_at"]
    if to_state == S.PENDING:
        job.queued_at = at
        update.append("queued_at")
    if to_state == S.RUNNING and job.first_started_at is None:
        job.first_started_at = at
        update.append("first_started_at")
    if to_state in TERMINAL_STATES:
        job.ended_at = at
        update.append("ended_at")
    job.save(update_fields=update)
    event = job_event(
        job=job,
        from_state=from_state,
        to_state=to_state,
        reason=reason,
        at=at,
        reason_code=reason_code,
        attempt=attempt,
        cycle=cycle,
        actor=actor,
        preempting_job=preempting_job,
        rule=rule,
    )
    event.save()
    return event


def attempt_transition(
    *,
    attempt: Attempt,
    to_state: str,
    reason: str,
    reason_code: str = "",
    at: dt.datetime | None = None,
    changes: Mapping[str, Any] | None = None,
    job_steps: Sequence[str] = (),
    cycle: CycleRecord | None = None,
    actor=None,
    preempting_job: Job | None = None,
    rule: str = "",
) -> list[JobEvent]:
    """Move a stored `attempt` to `to_state` with the field `changes` that go with it
    (saving them), then move its job (`attempt.job`) through `job_steps` with
    `job_transition`. The acting party (`actor`, or the `cycle`), the reason and, for a
    preemption, the preempting job and the rule are recorded as for jobs: on the event
    of each job step, which names the attempt; a transition that moves no job writes
    one event of the job's unchanged state. Raises `IllegalTransition` (409) when the
    attempt's state machine does not allow the move (nothing is written then)."""
    from_state = attempt.state
    if to_state not in ATTEMPT_TRANSITIONS.get(from_state, frozenset()):
        raise IllegalTransition(
            f"Attempt {attempt.attempt_id} cannot go from {from_state} to {to_state}.",
            field="state",
        )
    at = at or timezone.now()
    fields = dict(changes or {})
    for name, value in fields.items():
        setattr(attempt, name, value)
    attempt.state = to_state
    attempt.save(update_fields=["state", *fields])
    job = attempt.job
    recorded = {
        "reason": reason,
        "reason_code": reason_code,
        "at": at,
        "attempt": attempt,
        "cycle": cycle,
        "actor": actor,
        "preempting_job": preempting_job,
        "rule": rule,
    }
    events = [job_transition(job=job, to_state=step, **recorded) for step in job_steps]
    if not events:
        recorded["at"] = max(at, job.queued_at)
        event = job_event(job=job, from_state=job.state, to_state=job.state, **recorded)
        event.save()
        events.append(event)
    return events
