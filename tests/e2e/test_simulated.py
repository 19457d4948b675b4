"""End to end on the simulated cluster process, with a real Celery worker: jobs
submitted over REST run and finish, a preempted resumable job comes back, an
unreachable cluster changes nothing."""

from __future__ import annotations

import time

import pytest
from django.utils import timezone

from config.celery import app
from scheduler import cycle_requests, tasks
from scheduler.models import (
    Attempt,
    AttemptEnd,
    AttemptState,
    CycleRecord,
    Job,
    JobEvent,
    JobState,
)
from tests.support.live import submit_job

pytestmark = pytest.mark.django_db(transaction=True)


def wait_for(predicate, *, cluster_id: int, timeout_s: float = 60.0, what: str = "it"):
    """Poll `predicate` while asking for cycles like beat would (a correctness wait)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        cycle_requests.request_cycle(cluster_id)
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")


def state(job: Job) -> str:
    return Job.objects.get(pk=job.pk).state


@pytest.fixture
def celery_worker_thread():
    from celery.contrib.testing.worker import start_worker

    app.conf.task_always_eager = False
    tasks.run_cycle.worker.reset()
    try:
        with start_worker(app, pool="solo", perform_ping_check=False, shutdown_timeout=10):
            yield
    finally:
        app.conf.task_always_eager = True


PATHS = {"a1": "org/prog-a/a1", "a2": "org/prog-a/a2", "b1": "org/prog-b/b1"}


@pytest.fixture
def sim(tree, make_simulated_cluster, api_client, admin_user):
    """2 x 8 GPUs at 20 simulated seconds per second; 5 s of grace. `submit` posts to
    the REST API (whose submit service asks for a cycle after its commit); with
    `request=False` the job is only stored, and no cycle is asked for."""
    cluster = make_simulated_cluster(
        name="e2e",
        hosts=2,
        gpus_per_host=8,
        speed=20,
        grace_s=5,
        adapter_options={"start_delay_s": 1, "exit_delay_s": 2},
    )
    api_client.force_authenticate(admin_user)

    def submit(project: str = "a1", request: bool = True, **fields) -> Job:
        if not request:
            return submit_job(
                cluster=cluster,
                project=tree.node(project),
                user=admin_user,
                at=timezone.now(),
                **fields,
            )
        body = {"project": PATHS[project], "cluster": cluster.name, "name": "job", **fields}
        response = api_client.post("/api/v1/jobs/", body, format="json")
        assert response.status_code == 201, response.json()
        return Job.objects.get(pk=response.json()["jobs"][0]["id"])

    return cluster, submit


def test_jobs_run_and_a_preempted_resumable_job_comes_back(sim, celery_worker_thread):
    cluster, submit = sim
    sweeps = [
        submit("b1", gpus=8, min_runtime_s=0, resumable=True, duration_s=200, kind="sweep")
        for _ in range(2)
    ]
    wait_for(
        lambda: all(state(j) == JobState.RUNNING for j in sweeps),
        cluster_id=cluster.pk,
        what="the sweeps to run",
    )
    urgent = submit("a1", gpus=8, min_runtime_s=60, duration_s=20, kind="debug")
    wait_for(lambda: state(urgent) == JobState.SUCCEEDED, cluster_id=cluster.pk, what="urgent")

    victim = Attempt.objects.get(job__in=sweeps, end_reason=AttemptEnd.PREEMPTED)
    assert victim.preempted_by_id == urgent.pk
    stop = JobEvent.objects.get(attempt=victim, to_state=JobState.STOPPING)
    assert stop.preempting_job_id == urgent.pk
    assert stop.preempting_project_id == urgent.project_id
    assert stop.rule == "unallocated_work" and stop.cycle_id is not None
    wait_for(
        lambda: Attempt.objects.filter(
            job=victim.job, number=2, state=AttemptState.RUNNING
        ).exists(),
        cluster_id=cluster.pk,
        what="the preempted sweep to come back",
    )
    path = list(JobEvent.objects.filter(job=victim.job).values_list("to_state", flat=True))
    assert path == ["pending", "starting", "running", "stopping", "pending", "starting", "running"]
    back = JobEvent.objects.filter(job=victim.job, to_state=JobState.PENDING).last()
    assert "preempted" in back.reason
    first = Attempt.objects.get(job=urgent)
    assert first.started_at and first.ended_at and first.end_reason == AttemptEnd.SUCCEEDED
    # its run was charged from the cluster's own start and end times (20 s simulated)
    assert 0.5 < (first.ended_at - first.started_at).total_seconds() < 5
    assert not any(e for r in CycleRecord.objects.all() for e in r.errors)


def test_an_unreachable_cluster_changes_nothing_and_cycles_resume(sim, simcluster):
    cluster, submit = sim
    job = submit(gpus=4, duration_s=2000, request=False)
    assert tasks.run_cycle.worker.run(cluster_id=cluster.pk).starts == 1
    waiting = submit(gpus=16, request=False)  # needs the whole cluster: waits
    before = (
        list(Job.objects.order_by("pk").values_list("pk", "state")),
        list(Attempt.objects.order_by("pk").values_list("pk", "state", "placements")),
        JobEvent.objects.count(),
    )
    port = simcluster.port
    simcluster.stop()  # the process is gone and its port closed: connections are refused
    record = tasks.run_cycle.worker.run(cluster_id=cluster.pk)
    assert len(record.errors) == 1 and record.errors[0].startswith("cluster unreachable")
    after = (
        list(Job.objects.order_by("pk").values_list("pk", "state")),
        list(Attempt.objects.order_by("pk").values_list("pk", "state", "placements")),
        JobEvent.objects.count(),
    )
    assert after == before
    simcluster.port = port  # back on the same address, from the same state
    simcluster.start()
    record = tasks.run_cycle.worker.run(cluster_id=cluster.pk)
    assert record.errors == []
    assert state(job) == JobState.RUNNING and state(waiting) == JobState.PENDING
