"""The cycle's Celery tasks: debounced requests, beat, retention, a real worker."""

from __future__ import annotations

import datetime as dt
import threading
import time

import pytest
from django.db import connection
from django.utils import timezone

from budgets import services as budget_services
from config.celery import app
from scheduler import adapters, cycle_requests, tasks
from scheduler.cycle.beat import clusters_due, cycle_records_prune
from scheduler.models import CycleRecord, Job, JobEvent, JobState
from scheduler.services.transitions import job_event
from tests.factories import ClusterFactory, UserFactory
from tests.support.live import submit_job
from tests.support.memcluster import MemoryCluster


def queued(client) -> int:
    return client.llen("celery")


@pytest.mark.django_db
def test_requests_are_debounced_to_one_queued_cycle_per_cluster(
    broker, django_capture_on_commit_callbacks
):
    one, two = ClusterFactory(), ClusterFactory()
    with django_capture_on_commit_callbacks(execute=True):
        for _ in range(3):
            cycle_requests.request_cycle(one.pk)
        cycle_requests.request_cycle(two.pk)
    assert queued(broker) == 2
    broker.delete(cycle_requests.QUEUED_KEY.format(cluster_id=one.pk))  # what the cycle does first
    with django_capture_on_commit_callbacks(execute=True):
        cycle_requests.request_cycle(one.pk)
    assert queued(broker) == 3


@pytest.mark.django_db
def test_requests_wait_for_the_commit(broker, django_capture_on_commit_callbacks):
    cluster = ClusterFactory()
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        cycle_requests.request_cycle(cluster.pk)
    assert queued(broker) == 0 and len(callbacks) == 1
    callbacks[0]()
    assert queued(broker) == 1


@pytest.mark.django_db
def test_a_budget_change_requests_a_cycle_of_every_cluster(
    tree, broker, django_capture_on_commit_callbacks
):
    clusters = [ClusterFactory(), ClusterFactory()]
    with django_capture_on_commit_callbacks(execute=True):
        budget_services.budget_change_create(
            actor=tree.user("lead-a"),
            reason="more for a1",
            changes=[{"node": tree.node("a1").pk, "weight": 80}],
        )
    assert queued(broker) == len(clusters)


@pytest.mark.django_db
def test_redis_down_never_fails_the_caller(settings, caplog, django_capture_on_commit_callbacks):
    settings.REDIS_URL = "redis://127.0.0.1:1/0"  # nothing listens there
    cluster = ClusterFactory()
    with django_capture_on_commit_callbacks(execute=True):
        cycle_requests.request_cycle(cluster.pk)  # no exception
    assert "could not queue a cycle" in caplog.text


@pytest.mark.django_db
def test_beat_finds_the_clusters_whose_cycle_is_due():
    now = timezone.now()
    fresh, stale, never = (ClusterFactory(cycle_s=10) for _ in range(3))
    CycleRecord.objects.create(cluster=fresh, started_at=now - dt.timedelta(seconds=4))
    CycleRecord.objects.create(cluster=stale, started_at=now - dt.timedelta(seconds=12))
    CycleRecord.objects.create(cluster=stale, started_at=now - dt.timedelta(seconds=30))
    assert sorted(clusters_due(now=now)) == sorted([stale.pk, never.pk])


@pytest.mark.django_db
def test_old_cycle_records_go_except_those_the_job_history_names(tree):
    now = timezone.now()
    cluster = ClusterFactory()
    old = [CycleRecord.objects.create(cluster=cluster, started_at=now - dt.timedelta(days=31))]
    named = CycleRecord.objects.create(cluster=cluster, started_at=now - dt.timedelta(days=40))
    recent = CycleRecord.objects.create(cluster=cluster, started_at=now - dt.timedelta(days=29))
    job = submit_job(cluster=cluster, project=tree.node("a1"), user=UserFactory(), at=now)
    job_event(
        job=job, from_state="pending", to_state="starting", reason="x", at=now, cycle=named
    ).save()
    assert cycle_records_prune(days=30, now=now) == len(old)
    assert set(CycleRecord.objects.values_list("pk", flat=True)) == {named.pk, recent.pk}


MEMORY: dict[int, MemoryCluster] = {}


def memory_adapter(cluster):
    return MEMORY[cluster.pk]


@pytest.fixture
def memory_kind(monkeypatch):
    monkeypatch.setitem(adapters.ADAPTER_FACTORIES, "memory", f"{__name__}:memory_adapter")
    yield MEMORY
    MEMORY.clear()


@pytest.fixture
def celery_worker_thread():
    from celery.contrib.testing.worker import start_worker

    app.conf.task_always_eager = False
    try:
        with start_worker(app, pool="solo", perform_ping_check=False, shutdown_timeout=10):
            yield
    finally:
        app.conf.task_always_eager = True


@pytest.mark.django_db(transaction=True)
def test_a_real_worker_runs_the_requested_cycle(tree, memory_kind, celery_worker_thread):
    cluster = ClusterFactory(adapter="memory")
    memory_kind[cluster.pk] = MemoryCluster.of(2, 8, timezone.now())
    job = submit_job(
        cluster=cluster, project=tree.node("a1"), user=UserFactory(), at=timezone.now(), gpus=4
    )
    cycle_requests.request_cycle(cluster.pk)  # outside a transaction: queued at once
    record = None
    deadline = time.monotonic() + 30
    while record is None and time.monotonic() < deadline:
        time.sleep(0.1)
        record = CycleRecord.objects.filter(cluster=cluster, duration_ms__isnull=False).first()
    assert record is not None and record.starts == 1
    assert Job.objects.get(pk=job.pk).state == JobState.RUNNING
    assert JobEvent.objects.filter(job=job, to_state=JobState.RUNNING, cycle=record).exists()


class BlockingCluster(MemoryCluster):
    """Holds its cycle inside `hosts()` until the test lets it go."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.entered, self.release = threading.Event(), threading.Event()

    def hosts(self):
        self.entered.set()
        assert self.release.wait(10)
        return super().hosts()


@pytest.mark.django_db(transaction=True)
def test_one_cycle_at_a_time_per_cluster_and_clusters_in_parallel(tree):
    now = timezone.now()
    busy, other = ClusterFactory(), ClusterFactory()
    blocking = BlockingCluster({"n0": 8}, now)
    results = {}

    def first():
        try:
            results["first"] = tasks.run_cycle.worker.run(
                cluster_id=busy.pk, now=now, adapter=blocking
            )
        finally:
            connection.close()

    thread = threading.Thread(target=first)
    thread.start()
    try:
        assert blocking.entered.wait(10)
        # the same cluster: skipped at once; another cluster: runs meanwhile
        worker = tasks.run_cycle.worker
        assert (
            worker.run(cluster_id=busy.pk, now=now, adapter=MemoryCluster({"n0": 8}, now)) is None
        )
        assert worker.run(cluster_id=other.pk, now=now, adapter=MemoryCluster({"n0": 8}, now))
    finally:
        blocking.release.set()
        thread.join(30)
    assert results["first"] is not None
    assert CycleRecord.objects.filter(cluster=busy).count() == 1
