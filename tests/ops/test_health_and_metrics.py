"""`/healthz` (the service, naming what is stale), `/healthz/web` (load balancers), the
stalled-scheduler banner and `/metrics`, against the real PostgreSQL and Redis."""

import datetime as dt

import pytest
from django.utils import timezone

from ops.models import Heartbeat
from ops.services import heartbeat_record, scheduling_pause
from scheduler.models import CycleRecord, JobState
from tests.factories import ClusterFactory, JobFactory

pytestmark = pytest.mark.django_db


def beat(kind: str, name: str, age_s: float = 1.0) -> None:
    """A heartbeat of process `name` of `kind` (beat/worker) `age_s` seconds ago."""
    at = timezone.now() - dt.timedelta(seconds=age_s)
    heartbeat_record(kind=kind, name=name, host="test", started_at=at, now=at)


def cycle(cluster, age_s: float, errors: list[str] | None = None) -> None:
    at = timezone.now() - dt.timedelta(seconds=age_s)
    CycleRecord.objects.create(cluster=cluster, started_at=at, errors=errors or [])


@pytest.fixture
def scheduling(settings):
    """Beat and a worker alive (heartbeats 1 s old), default periods: 5 s heartbeats,
    stale after 3 cycle periods."""
    settings.ALLOT_HEARTBEAT_S = 5
    settings.ALLOT_STALE_CYCLES = 3
    beat("beat", "beat")
    beat("worker", "w1@host")


def test_healthz_is_ok_only_when_every_cluster_cycles_and_beat_and_a_worker_beat(
    client, scheduling, monkeypatch
):
    frozen = timezone.now()  # the ages below are exact, however slow the request
    monkeypatch.setattr(timezone, "now", lambda: frozen)
    cycle(ClusterFactory(name="h100", cycle_s=10), age_s=5)
    cycle(ClusterFactory(name="a100", cycle_s=60), age_s=170)
    response = client.get("/healthz")
    assert response.status_code == 200
    body = response.json()
    assert body["status"] == "ok" and body["stale"] == []
    assert body["checks"]["database"]["ok"] and body["checks"]["broker"]["ok"]
    clusters = body["checks"]["scheduling"]["clusters"]
    assert clusters["h100"]["stale"] is False and clusters["h100"]["last_read_age_s"] == 5
    assert clusters["h100"]["stale_after_s"] == 30 and clusters["a100"]["stale_after_s"] == 180
    assert set(body["checks"]["scheduling"]["workers"]) == {"w1@host"}


def test_healthz_is_503_naming_beat_when_its_heartbeat_is_stale(client, scheduling):
    beat("beat", "beat", age_s=16)  # older than 3 heartbeat periods
    h100 = ClusterFactory(name="h100", cycle_s=10)
    cycle(h100, age_s=5)
    body = client.get("/healthz").json()
    assert body["status"] == "unavailable" and body["stale"] == ["beat"]
    cycle(h100, age_s=31)  # and once its cycles are 3 periods old, beat is named their cause
    CycleRecord.objects.filter(started_at__gt=timezone.now() - dt.timedelta(seconds=30)).delete()
    response = client.get("/healthz")
    assert response.status_code == 503
    h100_health = response.json()["checks"]["scheduling"]["clusters"]["h100"]
    assert h100_health["stale"] is True and h100_health["cause"] == "beat"


@pytest.mark.parametrize("cycle_s", [1, 2, 3, 5, 10])
def test_a_dead_beat_is_named_before_any_cluster_it_stops_goes_stale(settings, cycle_s):
    """Default settings (no heartbeat override): beat dies at `killed`, its last heartbeat
    that moment (the latest it can be), the cluster's last cycle as early as beat allows
    (`cycle_s` + one tick before). From the death to 3 cycle periods later, whenever
    anything is stale, beat is named first; and it is named within 3 cycle periods."""
    from ops.heartbeat import heartbeat_interval_s as beats_every_s
    from ops.selectors import cycle_period_s, scheduling_health

    defaults = (
        settings.ALLOT_HEARTBEAT_S,
        settings.ALLOT_CYCLE_TICK_S,
        settings.ALLOT_STALE_CYCLES,
    )
    assert defaults == (5.0, 2.0, 3.0)
    cluster = ClusterFactory(name="fast", cycle_s=cycle_s)
    period = cycle_period_s(cycle_s)
    assert beats_every_s() <= 5.0 and (cycle_s < 10 or beats_every_s() == 5.0)
    killed = timezone.now()
    heartbeat_record(kind="beat", name="beat", host="test", started_at=killed, now=killed)
    heartbeat_record(kind="worker", name="w1@host", host="test", started_at=killed)
    last = killed - dt.timedelta(seconds=cycle_s + settings.ALLOT_CYCLE_TICK_S)
    CycleRecord.objects.create(cluster=cluster, started_at=last, errors=[])
    named_at = None
    for step in range(61):  # 20 looks a period, up to 3 periods after the death
        after_s = step * period / 20
        now = killed + dt.timedelta(seconds=after_s)
        Heartbeat.objects.filter(kind="worker").update(seen_at=now)  # the worker lives on
        health = scheduling_health(now=now)
        if health.stale:
            assert health.stale[0] == "beat", (after_s, health.stale)
            named_at = named_at or after_s
    assert named_at is not None and named_at <= 3 * period


def test_a_submission_does_not_make_healthz_ok_while_beat_is_dead(client, scheduling):
    """A cycle asked for by a submission is recent, yet beat stays named."""
    beat("beat", "beat", age_s=120)
    cycle(ClusterFactory(name="h100", cycle_s=10), age_s=0.5)
    response = client.get("/healthz")
    assert response.status_code == 503 and response.json()["stale"] == ["beat"]


def test_healthz_names_the_worker_when_no_worker_beats(client, scheduling):
    Heartbeat.objects.filter(kind="worker").update(
        seen_at=timezone.now() - dt.timedelta(seconds=60)
    )
    cycle(ClusterFactory(name="h100", cycle_s=10), age_s=40)
    response = client.get("/healthz")
    assert response.status_code == 503
    body = response.json()
    assert body["stale"] == ["worker", "background worker"]  # it ran both queues
    assert body["checks"]["scheduling"]["clusters"]["h100"]["cause"] == "worker"


def test_healthz_names_the_cluster_adapter_when_cycles_cannot_read_the_cluster(client, scheduling):
    h100 = ClusterFactory(name="h100", cycle_s=10)
    cycle(h100, age_s=40)
    for age in (25, 15, 5):  # cycles ran, but none could read the cluster
        cycle(h100, age_s=age, errors=["cluster unreachable: cannot reach the simulated cluster"])
    cycle(ClusterFactory(name="a100", cycle_s=10), age_s=2)
    response = client.get("/healthz")
    assert response.status_code == 503
    body = response.json()
    assert body["stale"] == ["cluster adapter: h100"]
    health = body["checks"]["scheduling"]["clusters"]["h100"]
    assert health["cause"] == "cluster adapter" and "cannot reach" in health["error"]
    assert 39 < health["last_read_age_s"] < 45 and health["last_cycle_age_s"] < 10


def test_healthz_is_not_ok_without_any_cluster(client, scheduling):
    response = client.get("/healthz")
    assert response.status_code == 503 and response.json()["stale"] == ["no cluster"]


def test_healthz_names_a_paused_scheduler(client, scheduling):
    cycle(ClusterFactory(name="h100", cycle_s=10), age_s=1)
    scheduling_pause(reason="restored from last night's backup")
    body = client.get("/healthz").json()
    assert body["stale"][0] == "paused"
    assert body["checks"]["scheduling"]["paused"] == "restored from last night's backup"


def test_healthz_web_answers_for_the_web_process_only(client, settings):
    ClusterFactory(name="h100")  # never cycled: /healthz is 503, the web still serves
    assert client.get("/healthz").status_code == 503
    response = client.get("/healthz/web")
    assert response.status_code == 200
    assert set(response.json()["checks"]) == {"database", "broker"}
    settings.CELERY_BROKER_URL = "redis://127.0.0.1:1/0"  # nothing listens on port 1
    broken = client.get("/healthz/web")
    assert broken.status_code == 503 and broken.json()["stale"] == ["broker"]


def test_healthz_is_503_when_the_broker_is_unreachable(client, settings, scheduling):
    cycle(ClusterFactory(name="h100", cycle_s=10), age_s=1)
    settings.CELERY_BROKER_URL = "redis://127.0.0.1:1/0"  # nothing listens on port 1
    response = client.get("/healthz")
    assert response.status_code == 503
    body = response.json()
    assert body["status"] == "unavailable" and body["checks"]["broker"]["ok"] is False
    assert body["stale"] == ["broker"] and "Error" in body["checks"]["broker"]["error"]


def test_every_page_shows_a_banner_while_a_cluster_is_stale(client, scheduling, tree):
    from django.core.cache import cache

    from ops.context_processors import BANNER_CACHE_KEY

    client.force_login(tree.user("ann"))
    h100 = ClusterFactory(name="h100", cycle_s=10)
    cycle(h100, age_s=2)
    for path in ("/budgets/", "/me/"):
        assert "Scheduling has stalled" not in client.get(path).content.decode()
    Heartbeat.objects.filter(kind="beat").update(seen_at=timezone.now() - dt.timedelta(minutes=5))
    CycleRecord.objects.update(started_at=timezone.now() - dt.timedelta(minutes=5))
    cache.delete(BANNER_CACHE_KEY)
    for path in ("/budgets/", "/me/", "/budgets/history/"):
        page = client.get(path).content.decode()
        assert "Scheduling has stalled on h100: no cycle for more than 30 s" in page
        assert "Celery beat is not running" in page


def test_metrics_from_an_allowed_network_show_tree_jobs_and_requests(tree, client):
    cluster = ClusterFactory(name="h100")
    for gpus, state in [(8, JobState.PENDING), (4, JobState.PENDING), (2, JobState.RUNNING)]:
        JobFactory(
            cluster=cluster,
            project=tree.node("a1"),
            submitter=tree.user("ann"),
            name="train",
            gpus=gpus,
            state=state,
            submitted_at=timezone.now(),
            queued_at=timezone.now(),
        )
    # counted with the status it had (a loaded test machine can make it 503: degraded)
    health_status = client.get("/healthz").status_code
    text = client.get("/metrics", REMOTE_ADDR="127.0.0.1").content.decode()
    assert 'allot_budget_nodes{kind="project"} 3.0' in text
    assert 'allot_jobs{cluster="h100",project="a1",state="pending"} 2.0' in text
    assert 'allot_job_gpus{cluster="h100",project="a1",state="pending"} 12.0' in text
    assert 'allot_job_gpus{cluster="h100",project="a1",state="running"} 2.0' in text
    assert (
        f'allot_http_requests_total{{method="GET",route="/healthz",status="{health_status}"}}'
        in text
    )


def test_metrics_are_refused_outside_the_networks_without_the_token(client, settings):
    settings.METRICS_TOKEN = "scrape-secret-0123456789"
    outside = {"REMOTE_ADDR": "203.0.113.9"}
    assert client.get("/metrics", **outside).status_code == 403
    wrong = client.get("/metrics", HTTP_AUTHORIZATION="Bearer nope", **outside)
    assert wrong.status_code == 403
    right = client.get("/metrics", HTTP_AUTHORIZATION="Bearer scrape-secret-0123456789", **outside)
    assert right.status_code == 200 and b"allot_budget_nodes" in right.content


def test_metrics_network_list_comes_from_the_environment(client, settings):
    import ipaddress

    settings.METRICS_NETWORKS = [ipaddress.ip_network("10.0.0.0/8")]
    assert client.get("/metrics", REMOTE_ADDR="10.2.3.4").status_code == 200
    assert client.get("/metrics", REMOTE_ADDR="127.0.0.1").status_code == 403


def test_metrics_show_last_hour_occupancy_and_entitlement_ratios(tree, client, mid_hour):
    from ledger.models import ClusterHour
    from tests.dashboards import data

    cluster = ClusterFactory(name="h100", host_count=2, gpus_per_host=8)
    # hour 0 is the current (partial) hour: the metric reads hour 1, the last complete one
    # (on the mid-hour clock: the hour cannot turn between the rows and the scrape)
    data.cluster_hours(
        cluster, 3, first=0, within_entitlement_gpu_h=6, borrowed_gpu_h=2, down_gpu_h=1
    )
    ClusterHour.objects.filter(cluster=cluster, hour=data.hour_ago(0)).update(
        borrowed_gpu_h=5, idle_gpu_h=4
    )
    data.project_hours(cluster, tree.node("a1"), 4, first=0, allocated_gpu_h=3, entitled_gpu_h=4)
    data.project_hours(cluster, tree.node("a2"), 2, first=0, allocated_gpu_h=2, entitled_gpu_h=1)
    data.project_hours(
        cluster, tree.node("b1"), 2, first=0, unallocated_gpu_h=5
    )  # entitled to nothing
    text = client.get("/metrics", REMOTE_ADDR="127.0.0.1").content.decode()
    occupancy = {
        line.split('bucket="')[1].split('"')[0]: float(line.rsplit(" ", 1)[1])
        for line in text.splitlines()
        if line.startswith("allot_occupancy_gpu_hours{") and 'cluster="h100"' in line
    }
    assert occupancy == {
        "within_entitlement": 6.0,
        "borrowed": 2.0,
        "unallocated": 0.0,
        "idle_demand": 0.0,
        "idle": 7.0,
        "draining": 0.0,
        "down": 1.0,
    }
    assert sum(occupancy.values()) == cluster.gpu_capacity
    # complete hours only: a1 3 of its 4 rows (the current hour is left out), a2 1 of 2
    assert 'allot_entitlement_ratio{cluster="h100",project="org/prog-a/a1"} 0.75' in text
    assert 'allot_entitlement_ratio{cluster="h100",project="org/prog-a/a2"} 2.0' in text
    assert 'project="org/prog-b/b1"' not in text
