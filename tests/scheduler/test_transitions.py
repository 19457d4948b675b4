"""The job state machine: only legal transitions, each one an append-only event."""

import datetime as dt

import pytest
from django.db import DatabaseError, connection, transaction
from django.utils import timezone

from scheduler.models import Attempt, AttemptEnd, AttemptState, Job, JobEvent, JobState
from scheduler.services.transitions import (
    ATTEMPT_TRANSITIONS,
    LEGAL_TRANSITIONS,
    IllegalTransition,
    attempt_transition,
    is_legal,
    job_event,
    job_transition,
)
from tests.factories import AttemptFactory, ClusterFactory, JobFactory, UserFactory

pytestmark = pytest.mark.django_db


@pytest.fixture
def job(tree):
    now = timezone.now()
    job = JobFactory(
        cluster=ClusterFactory(),
        project=tree.node("a1"),
        submitter=UserFactory(username="ann"),
        name="train",
        gpus=8,
        min_runtime_s=3600,
        resumable=True,
        submitted_at=now,
    )
    job_event(job=job, from_state="", to_state=JobState.PENDING, reason="submitted", at=now).save()
    return job


def test_every_state_has_a_rule_and_terminal_states_lead_nowhere():
    assert set(LEGAL_TRANSITIONS) == {""} | set(JobState.values)
    for state in (JobState.SUCCEEDED, JobState.FAILED, JobState.CANCELLED, JobState.PREEMPTED):
        assert not LEGAL_TRANSITIONS[state]
    assert is_legal(JobState.STOPPING, JobState.PENDING)  # a resumable job is requeued
    assert not is_legal(JobState.PENDING, JobState.RUNNING)  # always through starting


def test_a_cycle_clock_read_before_the_submission_does_not_date_the_start_before_it(job):
    # the cycle read its clock, then a submission committed, then its snapshot saw it
    cycle_clock = job.queued_at - dt.timedelta(milliseconds=40)
    event = job_transition(job=job, to_state=JobState.STARTING, reason="scheduled", at=cycle_clock)
    assert event.at == job.queued_at
    path = JobEvent.objects.filter(job=job).values_list("to_state", flat=True)
    assert list(path) == [JobState.PENDING, JobState.STARTING]


def test_life_cycle_of_a_preempted_resumable_job_is_recorded(job):
    t0 = job.queued_at
    steps = [
        (JobState.STARTING, "started by cycle"),
        (JobState.RUNNING, "the cluster runs it"),
        (JobState.STOPPING, "preempted"),
        (JobState.PENDING, "requeued"),
    ]
    for i, (state, why) in enumerate(steps, start=1):
        job_transition(job=job, to_state=state, reason=why, at=t0 + dt.timedelta(minutes=i))
    job.refresh_from_db()
    assert job.state == JobState.PENDING
    assert job.queued_at == t0 + dt.timedelta(minutes=4)  # its new wait counts from the requeue
    assert job.first_started_at == t0 + dt.timedelta(minutes=2)
    history = list(job.events.values_list("from_state", "to_state"))
    assert history == [
        ("", "pending"),
        ("pending", "starting"),
        ("starting", "running"),
        ("running", "stopping"),
        ("stopping", "pending"),
    ]


def test_an_illegal_transition_is_refused_and_changes_nothing(job):
    with pytest.raises(IllegalTransition) as info:
        job_transition(job=job, to_state=JobState.SUCCEEDED, reason="?")
    assert info.value.status_code == 409
    job.refresh_from_db()
    assert job.state == JobState.PENDING
    assert job.events.count() == 1


def test_terminal_state_stamps_the_end(job):
    job_transition(job=job, to_state=JobState.CANCELLED, reason="no longer needed")
    job.refresh_from_db()
    assert job.ended_at is not None
    with pytest.raises(IllegalTransition):
        job_transition(job=job, to_state=JobState.PENDING, reason="revive")


def test_job_events_cannot_be_rewritten(job):
    event = JobEvent.objects.get(job=job)
    for sql in (
        "UPDATE scheduler_jobevent SET reason = 'x' WHERE id = %s",
        "DELETE FROM scheduler_jobevent WHERE id = %s",
    ):
        with pytest.raises(DatabaseError, match="(?i)cannot|append"), transaction.atomic():
            connection.cursor().execute(sql, [event.pk])
    assert JobEvent.objects.get(pk=event.pk).reason == "submitted"


@pytest.fixture
def attempt(job):
    """The job's first attempt, starting (as a cycle stores it)."""
    job_transition(job=job, to_state=JobState.STARTING, reason="scheduled")
    return AttemptFactory(
        job=job, attempt_id=f"allot-{job.pk}-1-abcdef", state=AttemptState.STARTING
    )


def test_every_attempt_state_has_a_rule_and_an_ended_attempt_stays_ended():
    assert set(ATTEMPT_TRANSITIONS) == set(AttemptState.values)
    assert not ATTEMPT_TRANSITIONS[AttemptState.ENDED]
    assert AttemptState.RUNNING not in ATTEMPT_TRANSITIONS[AttemptState.STOPPING]


def test_an_attempt_transition_moves_its_job_and_records_who_and_why(attempt):
    ann = attempt.job.submitter
    at = timezone.now()
    events = attempt_transition(
        attempt=attempt,
        to_state=AttemptState.STOPPING,
        changes={"stop_intent": AttemptEnd.CANCELLED, "stop_requested_at": at},
        job_steps=[JobState.STOPPING],
        reason="cancelled by ann",
        reason_code="cancelled",
        at=at,
        actor=ann,
    )
    attempt.refresh_from_db()
    assert (attempt.state, attempt.stop_intent) == (AttemptState.STOPPING, AttemptEnd.CANCELLED)
    assert attempt.stop_requested_at == at
    assert Job.objects.get(pk=attempt.job_id).state == JobState.STOPPING
    event = JobEvent.objects.get(pk=events[0].pk)
    assert (event.from_state, event.to_state) == (JobState.STARTING, JobState.STOPPING)
    assert (event.attempt_id, event.actor_id, event.actor_name) == (attempt.pk, ann.pk, "ann")
    assert (event.reason, event.reason_code) == ("cancelled by ann", "cancelled")


def test_an_attempt_transition_that_moves_no_job_is_still_recorded(attempt):
    job_transition(job=attempt.job, to_state=JobState.STOPPING, reason="cancelled")
    attempt_transition(
        attempt=attempt,
        to_state=AttemptState.RUNNING,
        reason="running on n0[0] (attempt 1)",
        reason_code="started",
    )
    last = JobEvent.objects.filter(job=attempt.job).last()
    assert (last.from_state, last.to_state) == (JobState.STOPPING, JobState.STOPPING)
    assert last.attempt_id == attempt.pk and last.reason_code == "started"
    assert Attempt.objects.get(pk=attempt.pk).state == AttemptState.RUNNING


def test_an_illegal_attempt_transition_is_refused_and_changes_nothing(attempt):
    attempt_transition(
        attempt=attempt,
        to_state=AttemptState.ENDED,
        changes={"end_reason": AttemptEnd.START_FAILED},
        job_steps=[JobState.PENDING],
        reason="could not be started",
    )
    events = JobEvent.objects.count()
    with pytest.raises(IllegalTransition) as info:
        attempt_transition(attempt=attempt, to_state=AttemptState.RUNNING, reason="?")
    assert info.value.status_code == 409
    assert Attempt.objects.get(pk=attempt.pk).state == AttemptState.ENDED
    assert JobEvent.objects.count() == events
