"""`/healthz`, `/metrics`, the page banner and the what-if preview on the background
queue's worker: the same heartbeats as beat's and the cycle workers', told apart by the
queues each worker says it consumes."""

import datetime as dt

import pytest
from celery import Celery
from django.core.cache import cache
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from ops.context_processors import BANNER_CACHE_KEY, read_banners
from ops.heartbeat import consumed_queues
from ops.models import Heartbeat
from ops.selectors import scheduling_health
from ops.services import heartbeat_record
from scheduler.models import CycleRecord, Preview, PreviewState
from tests.factories import ClusterFactory, SuperUserFactory
from tests.support.querycount import count_queries

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
    (age_s,) = background["workers"].values()  # seconds since its beat, counted at request time
    assert set(background["workers"]) == {"background-8078@host"} and 60.0 <= age_s < 70.0


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


BACKGROUND_BANNER = "No background worker is running: what-if previews stay queued"
STALLED_BANNER = "Scheduling has stalled"


def page(user, path: str) -> str:
    """`path` as `user` sees it (None: signed out)."""
    client = Client()
    if user is not None:
        client.force_login(user)
    response = client.get(path)
    assert response.status_code == 200, (path, response.status_code)
    return response.content.decode()


def test_every_page_says_what_stops_while_no_background_worker_beats(cycling, tree):
    """The banner of a dead background worker is on every page of everyone signed in (a
    member whose ETAs go stale, a manager whose previews wait, staff who can start the
    worker, the sign-in page itself once signed in); gone once a worker beats again."""
    views = [
        (tree.user("ann"), "/me/"),  # a member
        (tree.user("lead-a"), "/budgets/"),  # a manager: previews
        (SuperUserFactory(username="root"), "/now/"),  # staff: can start it
        (tree.user("bob"), "/accounts/login/"),
    ]
    beat("worker", "background-8078@host", age_s=60, queues=BACKGROUND)  # > 3 x 5 s
    for user, path in views:
        text = page(user, path)
        assert BACKGROUND_BANNER in text, path
        assert "job ETAs are not refreshed and GPU utilization is not collected" in text
        assert STALLED_BANNER not in text  # cycles go on: only what stopped is named
    beat("worker", "background-8078@host", queues=BACKGROUND)
    cache.delete(BANNER_CACHE_KEY)
    for user, path in views:
        assert BACKGROUND_BANNER not in page(user, path), path


def test_a_signed_out_visitor_is_not_told_of_the_background_worker(cycling, tree):
    """The sign-in page (or any page a signed-out visitor reaches) does not show the
    background worker's banner: nothing it names is theirs; signed in, they see it."""
    beat("worker", "background-8078@host", age_s=60, queues=BACKGROUND)
    assert read_banners().background  # the worker is down
    signed_out = page(None, "/accounts/login/")
    assert BACKGROUND_BANNER not in signed_out and "banner-background" not in signed_out
    assert "Sign in" in signed_out or "sign in" in signed_out.lower()
    assert BACKGROUND_BANNER in page(tree.user("ann"), "/me/")


def test_a_worker_of_both_queues_alive_means_no_background_banner(cycling, tree):
    Heartbeat.objects.filter(name="run-8078@host").delete()
    beat("worker", "worker-1@host", queues=("background", "celery"))
    assert not read_banners()
    assert BACKGROUND_BANNER not in page(tree.user("ann"), "/me/")


def test_a_dead_worker_of_both_queues_names_both_what_stalls_and_what_waits(cycling, tree):
    Heartbeat.objects.filter(name="run-8078@host").delete()
    beat("worker", "worker-1@host", age_s=60, queues=("background", "celery"))
    CycleRecord.objects.update(started_at=timezone.now() - dt.timedelta(seconds=60))
    text = page(tree.user("ann"), "/me/")
    assert "Scheduling has stalled on h100" in text and "no Celery worker is running" in text
    assert BACKGROUND_BANNER in text


def test_the_banners_read_the_heartbeats_once_as_the_scheduling_banner_did(cycling):
    """Both banners come from the one health read the scheduling banner made before (no
    second heartbeat query, no other query), and pages within BANNER_CACHE_S share it."""
    beat("worker", "background-8078@host", age_s=60, queues=BACKGROUND)
    health_alone = count_queries(scheduling_health)
    banners_read = count_queries(read_banners)
    assert len(banners_read) == len(health_alone)
    assert sum('FROM "ops_heartbeat"' in sql for sql in banners_read) == 1
    assert read_banners().background  # (cached now)
    with CaptureQueriesContext(connection) as cached:
        read_banners()
    assert cached.captured_queries == []


@pytest.mark.parametrize(
    ("state", "says"),
    [
        (PreviewState.QUEUED, "It stays queued until an operator starts one"),
        (PreviewState.RUNNING, "The worker that was replaying it stopped"),
    ],
)
def test_a_waiting_preview_says_why_it_does_not_progress(cycling, tree, state, says):
    preview = Preview.objects.create(
        requester=tree.user("lead-a"), node=tree.node("prog-a"),
        cluster=ClusterFactory(name="gpu"), weights=[], state=state,
    )  # fmt: skip
    beat("worker", "background-8078@host", age_s=60, queues=BACKGROUND)
    stuck = page(tree.user("lead-a"), f"/budgets/whatif/{preview.pk}/")
    assert "This preview is not progressing: no background worker is running" in stuck
    assert says in stuck and 'hx-trigger="load delay:1s"' in stuck  # it keeps polling
    beat("worker", "background-8078@host", queues=BACKGROUND)
    cache.delete(BANNER_CACHE_KEY)
    moving = page(tree.user("lead-a"), f"/budgets/whatif/{preview.pk}/")
    assert "not progressing" not in moving and 'hx-trigger="load delay:1s"' in moving
