"""The live tests' `submit_job` stores jobs through the submit service, so a change in
how submissions are stored reaches every test that creates jobs with it."""

from unittest import mock

import pytest

from scheduler.models import JobEvent, JobState
from tests.support import live as live_support

pytestmark = pytest.mark.django_db


def test_submit_job_goes_through_the_submit_service(live):
    with mock.patch.object(live_support, "job_submit", wraps=live_support.job_submit) as service:
        job = live.submit("a2", gpus=2, min_runtime_s=60, priority=1)  # ann is no a2 member
    assert service.call_count == 1
    assert service.call_args.kwargs["now"] == live.now
    assert (job.state, job.gpus, job.priority, job.submitter, job.submitted_at) == (
        JobState.PENDING,
        2,
        1,
        live.user,
        live.now,
    )
    [first] = JobEvent.objects.filter(job=job)
    assert (first.to_state, first.reason_code, first.actor_name, first.at) == (
        JobState.PENDING,
        "submitted",
        "ann",
        live.now,
    )
