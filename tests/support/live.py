"""The live-service fixture and helpers: a cluster row, a cluster to run it (in memory,
on a clock the test moves), and helpers to submit jobs and run cycles. A plugin of
tests/conftest.py, so `live` is a fixture everywhere; import the helpers from here."""

from __future__ import annotations

import datetime as dt
from collections import Counter
from dataclasses import dataclass

import pytest
from django.db import connection, transaction
from django.utils import timezone

from budgets.models import Membership, Role
from budgets.permissions import may_submit
from scheduler.cycle.worker import CycleWorker
from scheduler.models import Attempt, AttemptState, Cluster, Job, JobState
from scheduler.services.jobs import job_submit
from scheduler.tasks import run_cycle
from tests.factories import ClusterFactory, UserFactory
from tests.support.memcluster import MemoryCluster


def submit_job(
    *,
    cluster: Cluster,
    project,
    user,
    at: dt.datetime,
    gpus: int = 1,
    min_runtime_s: int = 600,
    resumable: bool = False,
    priority: int = 0,
    kind: str = "training",
    duration_s: int | None = 3600,
    name: str = "job",
) -> Job:
    """A PENDING job and its first event, stored by the submit service (`job_submit`,
    submitted at `at`) as `user`, made a member of `project` first if they may not
    submit there (a test's users need not be).

    The tests run their cycles themselves, on the clock they move: the submission's
    request for a cycle (run at once by eager Celery when a transactional test commits)
    is dropped. That the service requests one is tested with the service."""
    if not may_submit(user, project.pk):
        Membership.objects.get_or_create(user=user, node=project, role=Role.MEMBER)
    with transaction.atomic():
        requests_before = len(connection.run_on_commit)
        result = job_submit(
            actor=user,
            project=project.pk,
            cluster=cluster.pk,
            name=name,
            gpus=gpus,
            min_runtime_s=min_runtime_s,
            resumable=resumable,
            priority=priority,
            kind=kind,
            duration_s=duration_s,
            now=at,
        )
        del connection.run_on_commit[requests_before:]
    return Job.objects.get(pk=result.jobs[0].pk)


def assert_consistent(cluster: Cluster, memory: MemoryCluster | None = None) -> dict[int, str]:
    """The invariants a cycle must keep: at most one open attempt per job, open
    attempts never share a GPU, a job holds GPUs exactly when it has an open attempt,
    and the cluster ran every attempt at most once. Two queries of the columns checked
    (the property tests run it after every cycle). Returns the state of every job of
    the cluster, by id, as checked."""
    attempts = list(
        Attempt.objects.filter(cluster=cluster).values_list(
            "attempt_id", "job_id", "state", "placements"
        )
    )
    open_attempts = [a for a in attempts if a[2] != AttemptState.ENDED]
    per_job = Counter(job_id for _, job_id, _, _ in open_attempts)
    assert max(per_job.values(), default=0) <= 1
    gpus: dict[tuple[str, int], str] = {}
    for attempt_id, _, _, placements in open_attempts:
        for p in placements:
            for i in p["gpu_indices"]:
                key = (p["host"], i)
                assert key not in gpus, f"GPU {key} given to {gpus.get(key)} and {attempt_id}"
                gpus[key] = attempt_id
    active = {JobState.STARTING, JobState.RUNNING, JobState.STOPPING}
    states = dict(Job.objects.filter(cluster=cluster).values_list("pk", "state"))
    for pk, state in states.items():
        assert (state in active) == (pk in per_job), (pk, state)
    if memory is not None:
        # the cluster runs each job at most once at a time, and only Allot's attempts
        job_of = {attempt_id: job_id for attempt_id, job_id, _, _ in attempts}
        alive = [a for a, j in memory.running.items() if j.ended_at is None]
        assert set(memory.running) <= set(job_of)
        assert max(Counter(job_of[a] for a in alive).values(), default=0) <= 1
    return states


@dataclass
class Live:
    cluster: Cluster
    memory: MemoryCluster
    tree: object
    user: object

    @property
    def now(self) -> dt.datetime:
        return self.memory.now

    def submit(self, project: str = "a1", **kwargs) -> Job:
        return submit_job(
            cluster=self.cluster,
            project=self.tree.node(project),
            user=self.user,
            at=self.now,
            **kwargs,
        )

    @property
    def worker(self) -> CycleWorker:
        """The process's cycle worker, as the Celery tasks use it."""
        return run_cycle.worker

    def cycle(self, advance_s: float = 0.0):
        if advance_s:
            self.memory.advance(advance_s)
        return self.worker.run(cluster_id=self.cluster.pk, now=self.now, adapter=self.memory)

    def job(self, job: Job) -> Job:
        return Job.objects.get(pk=job.pk)


@pytest.fixture
def live(tree) -> Live:
    """A 4 x 8-GPU cluster in memory and its row (30 s grace), the example tree."""
    run_cycle.worker.reset()
    now = timezone.now().replace(microsecond=0)
    cluster = ClusterFactory(name="live", host_count=4, gpus_per_host=8, grace_s=30)
    return Live(
        cluster=cluster,
        memory=MemoryCluster.of(4, 8, now),
        tree=tree,
        user=UserFactory(username="ann"),
    )
