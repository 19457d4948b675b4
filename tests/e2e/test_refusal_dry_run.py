"""A dry-run submission plans the cluster as the next live cycle will: with the hosts
each waiting job is kept off after the cluster refused its start there
(`scheduler.selectors.refusals`, the live cycle's and the dry run's one reading), and
no host is held for a job on the hosts it is kept off."""

from __future__ import annotations

import pytest

from budgets.models import Membership, Role
from scheduler.models import Attempt, AttemptEnd, JobState, QueueSnapshot
from scheduler.selectors.queue import iter_entries
from scheduler.selectors.refusals import kept_off
from scheduler.services.jobs.submit import job_submit

pytestmark = pytest.mark.django_db


def refused_everywhere(live, settings):
    """A 32-GPU job (the whole cluster) whose start the cluster kept waiting past the
    timeout: taken back, requeued and kept off all four hosts for 15 minutes."""
    settings.ALLOT_START_TIMEOUT_S = 120
    job = live.submit(gpus=32, min_runtime_s=3600, name="refused")
    live.memory.queue_starts = True
    live.cycle()
    live.memory.queue_starts = False
    live.cycle(advance_s=121)  # past the timeout: taken back
    live.cycle(advance_s=1)  # stopped on the cluster: requeued
    attempt = Attempt.objects.get(job=job)
    assert attempt.end_reason == AttemptEnd.START_FAILED
    assert live.job(job).state == JobState.PENDING
    assert {a.host for a in kept_off(live.cluster.pk, live.now)} == {
        "node00",
        "node01",
        "node02",
        "node03",
    }
    return job


def dry_run(live, gpus: int, project: str = "a1") -> dict:
    node = live.tree.node(project)
    Membership.objects.get_or_create(user=live.user, node=node, role=Role.MEMBER)
    result = job_submit(
        actor=live.user,
        project=node.pk,
        cluster=live.cluster.pk,
        name="probe",
        gpus=gpus,
        min_runtime_s=600,
        duration_s=600,
        dry_run=True,
        now=live.now,
    )
    assert result.estimate is not None
    return result.estimate


def live_entries(live) -> list[dict]:
    return list(iter_entries(QueueSnapshot.objects.get(cluster=live.cluster).entries))


@pytest.mark.parametrize("project", ["a1", "b1"])
def test_a_dry_run_plans_the_refusals_the_next_cycle_keeps(live, settings, project):
    """The refused job is kept off every host for 15 minutes: the next cycle leaves it
    waiting, holds no host for it and starts the probe on the free GPUs, and the dry run
    said so (ignoring the refusals, it said the refused job would take the cluster and
    the probe would wait first in line)."""
    refused = refused_everywhere(live, settings)
    estimate = dry_run(live, gpus=8, project=project)
    assert estimate["starts_now"] is True, estimate
    assert estimate["queue_length"] == 1  # the refused job waits
    probe = live.submit(project, gpus=8, min_runtime_s=600, duration_s=600, name="probe")
    live.cycle(advance_s=1)
    assert live.job(probe).state in (JobState.STARTING, JobState.RUNNING)
    assert live.job(refused).state == JobState.PENDING
    assert [e["job"] for e in live_entries(live)] == [refused.pk]


def test_once_the_window_is_over_the_dry_run_sees_the_refused_job_start_first(live, settings):
    refused = refused_everywhere(live, settings)
    live.memory.advance(900)  # the 15-minute window is over
    estimate = dry_run(live, gpus=8)
    assert estimate["starts_now"] is False and estimate["queue_length"] == 1, estimate
    live.submit(gpus=8, min_runtime_s=600, duration_s=600, name="probe")
    live.cycle()
    assert live.job(refused).state in (JobState.STARTING, JobState.RUNNING)
    assert len(live_entries(live)) == 1
