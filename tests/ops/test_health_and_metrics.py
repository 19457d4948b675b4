"""`/healthz` for load balancers and `/metrics` for operators, against the real
PostgreSQL and Redis."""

import datetime as dt

import pytest
from django.utils import timezone

from scheduler.models import CycleRecord, Job, JobState
from tests.factories import ClusterFactory

pytestmark = pytest.mark.django_db


def test_healthz_checks_database_broker_and_each_clusters_last_cycle(client):
    fresh = ClusterFactory(name="h100", cycle_s=10)
    ClusterFactory(name="a100")  # no cycle yet
    CycleRecord.objects.create(cluster=fresh, started_at=timezone.now() - dt.timedelta(seconds=5))
    response = client.get("/healthz")
    assert response.status_code == 200
    body = response.json()
    assert body["checks"]["database"]["ok"] and body["checks"]["broker"]["ok"]
    clusters = body["checks"]["cycles"]["clusters"]
    assert clusters["h100"]["stale"] is False and 4 <= clusters["h100"]["last_cycle_age_s"] < 60
    assert clusters["a100"] == {"last_cycle_age_s": None, "stale_after_s": 60, "stale": True}
    assert body["status"] == "degraded"  # a stale scheduler does not take the web down


def test_healthz_is_503_when_the_broker_is_unreachable(client, settings):
    settings.CELERY_BROKER_URL = "redis://127.0.0.1:1/0"  # nothing listens on port 1
    response = client.get("/healthz")
    assert response.status_code == 503
    body = response.json()
    assert body["status"] == "unavailable" and body["checks"]["broker"]["ok"] is False
    assert "Error" in body["checks"]["broker"]["error"]


def test_metrics_from_an_allowed_network_show_tree_jobs_and_requests(tree, client):
    cluster = ClusterFactory(name="h100")
    for gpus, state in [(8, JobState.PENDING), (4, JobState.PENDING), (2, JobState.RUNNING)]:
        Job.objects.create(
            cluster=cluster,
            project=tree.node("a1"),
            submitter=tree.user("ann"),
            name="train",
            gpus=gpus,
            state=state,
            submitted_at=timezone.now(),
            queued_at=timezone.now(),
        )
    client.get("/healthz")
    text = client.get("/metrics", REMOTE_ADDR="127.0.0.1").content.decode()
    assert 'allot_budget_nodes{kind="project"} 3.0' in text
    assert 'allot_jobs{cluster="h100",project="a1",state="pending"} 2.0' in text
    assert 'allot_job_gpus{cluster="h100",project="a1",state="pending"} 12.0' in text
    assert 'allot_job_gpus{cluster="h100",project="a1",state="running"} 2.0' in text
    assert 'allot_http_requests_total{method="GET",route="/healthz",status="200"}' in text


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


def test_metrics_show_last_hour_occupancy_and_entitlement_ratios(tree, client):
    from ledger.models import ClusterHour
    from tests.dashboards import data

    cluster = ClusterFactory(name="h100", host_count=2, gpus_per_host=8)
    # hour 0 is the current (partial) hour: the metric reads hour 1, the last complete one
    data.cluster_hours(cluster, 3, within_entitlement_gpu_h=6, borrowed_gpu_h=2, down_gpu_h=1)
    ClusterHour.objects.filter(cluster=cluster, hour=data.hour_ago(0)).update(
        borrowed_gpu_h=5, idle_gpu_h=4
    )
    data.project_hours(cluster, tree.node("a1"), 4, allocated_gpu_h=3, entitled_gpu_h=4)
    data.project_hours(cluster, tree.node("a2"), 2, allocated_gpu_h=2, entitled_gpu_h=1)
    data.project_hours(cluster, tree.node("b1"), 2, unallocated_gpu_h=5)  # entitled to nothing
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
