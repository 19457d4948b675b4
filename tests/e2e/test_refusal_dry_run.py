"""A dry-run submission plans the cluster as the next live cycle will: with the hosts
each waiting job is kept off after the cluster refused its start there
(`scheduler.selectors.refusals`, the live cycle's and the dry run's one reading)."""

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
    """The refused job cannot start anywhere for 15 minutes: the dry run, like the next
    cycle, leaves it waiting (ignoring the refusals it said the refused job would start
    and the probe would be first in the queue)."""
    refused = refused_everywhere(live, settings)
    estimate = dry_run(live, gpus=8, project=project)
    probe = live.submit(project, gpus=8, min_runtime_s=600, duration_s=600, name="probe")
    live.cycle(advance_s=1)
    assert live.job(refused).state == JobState.PENDING
    entries = live_entries(live)
    (mine,) = [e for e in entries if e["job"] == probe.pk]
    assert live.job(probe).state == JobState.PENDING and not estimate["starts_now"]
    assert (estimate["position"], estimate["queue_length"]) == (mine["position"], len(entries))
    assert estimate["queue_length"] == 2  # the refused job waits too


def test_once_the_window_is_over_the_dry_run_sees_the_refused_job_start_first(live, settings):
    refused = refused_everywhere(live, settings)
    live.memory.advance(900)  # the 15-minute window is over
    estimate = dry_run(live, gpus=8)
    assert estimate["starts_now"] is False and estimate["queue_length"] == 1, estimate
    live.submit(gpus=8, min_runtime_s=600, duration_s=600, name="probe")
    live.cycle()
    assert live.job(refused).state in (JobState.STARTING, JobState.RUNNING)
    assert len(live_entries(live)) == 1
