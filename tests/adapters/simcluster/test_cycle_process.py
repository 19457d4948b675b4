"""Scheduling cycles against a real simulated cluster process (through `for_cluster`)."""

from __future__ import annotations

import pytest
from django.utils import timezone

from scheduler.adapters.simcluster.control import SimClusterControl
from scheduler.models import Attempt, AttemptEnd, AttemptState, Host, HostHealth, Job, JobState
from scheduler.tasks import run_cycle
from tests.factories import UserFactory
from tests.support.live import assert_consistent, submit_job
from tests.support.polling import wait_for

pytestmark = pytest.mark.django_db


@pytest.fixture
def sim(tree, simcluster, make_simulated_cluster):
    """A 2 x 8-GPU simulated cluster at speed 600 (a simulated minute in 0.1 s)."""
    run_cycle.worker.reset()
    cluster = make_simulated_cluster("sim", hosts=2, gpus_per_host=8, speed=600, grace_s=30)
    control = SimClusterControl(simcluster.url, "sim")
    user = UserFactory(username="ann")

    class Sim:
        def submit(self, **kwargs) -> Job:
            return submit_job(
                cluster=cluster, project=tree.node("a1"), user=user, at=timezone.now(), **kwargs
            )

        def cycle(self):
            return run_cycle.worker.run(cluster_id=cluster.pk)

        def attempt_ended_in_cluster(self, attempt_id: str) -> bool:
            return any(j["attempt_id"] == attempt_id and j["ended_at"] for j in control.jobs())

    s = Sim()
    s.cluster, s.control, s.process = cluster, control, simcluster
    yield s
    control.close()


def test_a_job_runs_on_the_simulated_cluster_and_succeeds(sim):
    job = sim.submit(gpus=4, duration_s=60)
    record = sim.cycle()
    assert (record.starts, record.errors) == (1, [])
    attempt = Attempt.objects.get(job=job)
    assert [j["attempt_id"] for j in sim.control.jobs()] == [attempt.attempt_id]
    wait_for(lambda: sim.attempt_ended_in_cluster(attempt.attempt_id))
    record = sim.cycle()
    assert record.errors == []
    attempt.refresh_from_db()
    assert (attempt.state, attempt.end_reason) == (AttemptState.ENDED, AttemptEnd.SUCCEEDED)
    # 60 simulated seconds at speed 600: the ledger charges 0.1 wall seconds
    assert (attempt.ended_at - attempt.started_at).total_seconds() == pytest.approx(0.1, abs=0.01)
    assert Job.objects.get(pk=job.pk).state == JobState.SUCCEEDED
    assert_consistent(sim.cluster)


def test_a_failed_host_loses_the_job_and_a_resumable_one_is_requeued(sim):
    job = sim.submit(gpus=8, duration_s=None, resumable=True)
    sim.cycle()
    attempt = Attempt.objects.get(job=job)
    host = attempt.placements[0]["host"]
    sim.control.fail_host(host, reason="power supply")
    record = sim.cycle()
    attempt.refresh_from_db()
    assert (attempt.state, attempt.end_reason) == (AttemptState.ENDED, AttemptEnd.LOST)
    assert "power supply" in attempt.end_detail
    assert Host.objects.get(cluster=sim.cluster, name=host).health == HostHealth.DOWN
    job.refresh_from_db()
    # requeued, and started again on the healthy host by the same cycle or the next
    if job.state == JobState.PENDING:
        record = sim.cycle()
    assert record.errors == []
    second = Attempt.objects.filter(job=job).exclude(pk=attempt.pk).get()
    assert second.placements[0]["host"] != host
    assert_consistent(sim.cluster)


def test_a_start_that_times_out_is_adopted_not_repeated(sim):
    sim.cluster.adapter_options = {**sim.cluster.adapter_options, "timeout_s": 0.5}
    sim.cluster.save(update_fields=["adapter_options"])
    sim.control.start_timeouts(1, delay_s=1.5)
    job = sim.submit(gpus=2, duration_s=None)
    sim.cycle()
    record = sim.cycle()
    attempt = Attempt.objects.get(job=job)
    assert attempt.state == AttemptState.RUNNING
    assert [j["attempt_id"] for j in sim.control.jobs()] == [attempt.attempt_id]
    assert record.errors == []


def test_an_unreachable_cluster_is_recorded_and_nothing_changes(sim):
    job = sim.submit(gpus=1, duration_s=None)
    sim.process.stop()
    record = sim.cycle()
    assert record.errors and "cluster unreachable" in record.errors[0]
    assert Job.objects.get(pk=job.pk).state == JobState.PENDING
    assert not Attempt.objects.filter(job=job).exists()
