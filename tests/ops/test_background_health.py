"""`/healthz` and `/metrics` on the background queue's worker: the same heartbeats as
beat's and the cycle workers', told apart by the queues each worker says it consumes."""

import datetime as dt

import pytest
from celery import Celery
from django.utils import timezone

from ops.heartbeat import consumed_queues
from ops.models import Heartbeat
from ops.services import heartbeat_record
from scheduler.models import CycleRecord
from tests.factories import ClusterFactory

pytestmark = pytest.mark.django_db

CYCLES = ("celery",)
BACKGROUND = ("background",)


def beat(kind: str, name: str, age_s: float = 1.0, queues: tuple[str, ...] = ()) -> None:
    """A heartbeat of process `name` `age_s` seconds ago (a worker: of `queues`)."""
    at = timezone.now() - dt.timedelta(seconds=age_s)
    heartbeat_record(kind=kind, name=name, host="test", started_at=at, now=at, queues=queues)


@pytest.fixture
def cycling(settings):
    """Beat and the cycles' worker alive, one cluster cycling: the scheduling check is ok."""
    settings.ALLOT_HEARTBEAT_S = 5
    settings.ALLOT_STALE_CYCLES = 3
    beat("beat", "beat")
    beat("worker", "run-8078@host", queues=CYCLES)
    cluster = ClusterFactory(name="h100", cycle_s=10)
    CycleRecord.objects.create(
        cluster=cluster, started_at=timezone.now() - dt.timedelta(seconds=2), errors=[]
    )


def test_healthz_is_ok_with_the_background_worker_alive(client, cycling):
    beat("worker", "background-8078@host", queues=BACKGROUND)
    response = client.get("/healthz")
    assert response.status_code == 200
    body = response.json()
    assert body["status"] == "ok" and body["stale"] == []
    background = body["checks"]["background"]
    assert background["ok"] is True and background["queue"] == "background"
    assert set(background["workers"]) == {"background-8078@host"}
    assert background["critical"] is False


def test_healthz_names_the_background_worker_when_its_heartbeat_is_stale(client, cycling):
    beat("worker", "background-8078@host", age_s=60, queues=BACKGROUND)  # > 3 x 5 s
    response = client.get("/healthz")
    assert response.status_code == 200  # cycles go on: degraded, not unavailable
    body = response.json()
    assert body["status"] == "degraded" and body["stale"] == ["background worker"]
    assert body["checks"]["scheduling"]["ok"] is True
    background = body["checks"]["background"]
    assert background["ok"] is False and background["stale"] == ["background worker"]
    assert background["workers"] == {"background-8078@host": 60.0}


def test_healthz_names_the_background_worker_when_none_ever_beat(client, cycling):
    body = client.get("/healthz").json()
    assert body["status"] == "degraded" and body["stale"] == ["background worker"]
    assert body["checks"]["background"]["workers"] == {}


def test_a_live_background_worker_does_not_hide_a_dead_cycle_worker(client, cycling):
    Heartbeat.objects.filter(name="run-8078@host").update(
        seen_at=timezone.now() - dt.timedelta(seconds=60)
    )
    beat("worker", "background-8078@host", queues=BACKGROUND)
    response = client.get("/healthz")
    assert response.status_code == 503
    assert response.json()["stale"] == ["worker"]


def test_a_worker_of_both_queues_serves_both(client, cycling):
    Heartbeat.objects.filter(name="run-8078@host").delete()
    beat("worker", "worker-1@host", queues=("background", "celery"))
    response = client.get("/healthz")
    assert response.status_code == 200 and response.json()["status"] == "ok"


def test_metrics_count_the_live_workers_of_each_queue(client, cycling):
    beat("worker", "background-8078@host", age_s=60, queues=BACKGROUND)
    text = client.get("/metrics", REMOTE_ADDR="127.0.0.1").content.decode()
    assert 'allot_queue_workers_alive{queue="celery"} 1.0' in text
    assert 'allot_queue_workers_alive{queue="background"} 0.0' in text
    beat("worker", "background-8078@host", queues=BACKGROUND)
    text = client.get("/metrics", REMOTE_ADDR="127.0.0.1").content.decode()
    assert 'allot_queue_workers_alive{queue="background"} 1.0' in text


def test_a_worker_heartbeat_names_the_queues_its_consumer_takes():
    """What `worker_ready` hands the heartbeat: the consumer, whose app selected `-Q`."""
    app = Celery("queues-probe", set_as_current=False)
    app.amqp.queues.select(["background"])

    class Consumer:
        pass

    consumer = Consumer()
    consumer.app = app
    assert consumed_queues(consumer) == ("background",)
    app.amqp.queues.select(["celery", "background"])
    assert consumed_queues(consumer) == ("background", "celery")
