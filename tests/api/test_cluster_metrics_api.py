"""A cluster's metrics settings through the API (issue 26): `PATCH
/api/v1/clusters/{id}/metrics/` changes where its GPU metrics are read, by
`cluster_metrics_update` (staff; audited, the bearer token never recorded), and the
clusters' GET shows the settings with only whether a token is set. Tests by effect: a
change is stored with its audit row, a refused one writes nothing."""

from __future__ import annotations

import json

import pytest
from django.test import Client
from drf_spectacular.generators import SchemaGenerator
from rest_framework.test import APIClient

from scheduler.models import ClusterMetrics, ClusterPolicyEvent
from tests.factories import ClusterFactory, HostFactory, SuperUserFactory, UserFactory
from tests.roles import participant

pytestmark = pytest.mark.django_db

TOKEN = "s3cret-t0ken"


@pytest.fixture
def cluster():
    cluster = ClusterFactory(name="gpu", host_count=1, gpus_per_host=8)
    HostFactory(cluster=cluster, name="node0")
    return cluster


@pytest.fixture
def ops():
    return UserFactory(username="ops", is_staff=True)


def client_as(user) -> APIClient:
    client = APIClient()
    if user is not None:
        client.force_authenticate(user)
    return client


def patch(user, cluster_id: int, body) -> object:
    return client_as(user).patch(f"/api/v1/clusters/{cluster_id}/metrics/", body, format="json")


def stored(cluster) -> dict | None:
    row = ClusterMetrics.objects.filter(cluster=cluster).first()
    if row is None:
        return None
    return {
        name: getattr(row, name)
        for name in ("prometheus_url", "host_label", "gpu_label", "selector", "bearer_token")
    }


def test_staff_change_is_stored_audited_and_shown_without_the_token(cluster, ops):
    body = {
        "prometheus_url": "https://prom.example.org:9090/",
        "host_label": "instance",
        "gpu_label": "gpu_index",
        "selector": 'cluster="a100"',
        "bearer_token": TOKEN,
        "reason": "real DCGM metrics",
    }
    response = patch(ops, cluster.pk, body)
    assert response.status_code == 200, response.json()
    assert stored(cluster) == {
        "prometheus_url": "https://prom.example.org:9090",
        "host_label": "instance",
        "gpu_label": "gpu_index",
        "selector": 'cluster="a100"',
        "bearer_token": TOKEN,
    }
    (event,) = ClusterPolicyEvent.objects.filter(cluster=cluster)
    assert (event.actor_name, event.reason) == ("ops", "real DCGM metrics")
    assert event.changes["metrics.prometheus_url"] == ["", "https://prom.example.org:9090"]
    assert event.changes["metrics.gpu_label"] == ["gpu", "gpu_index"]
    assert event.changes["metrics.bearer_token"] == ["unset", "set"]
    shown = response.json()
    assert shown["metrics"] == {
        "prometheus_url": "https://prom.example.org:9090",
        "host_label": "instance",
        "gpu_label": "gpu_index",
        "selector": 'cluster="a100"',
        "bearer_token_set": True,
        "collected_until": None,
        "last_error": "",
        "last_error_at": None,
    }
    assert shown["policy_events"][0]["changes"]["metrics.bearer_token"] == ["unset", "set"]
    # nobody reads the token back: not the detail, the list, the audit trail or the admin
    reader = client_as(participant("ann"))
    for path in (f"/api/v1/clusters/{cluster.pk}/", "/api/v1/clusters/"):
        text = reader.get(path).content.decode()
        assert TOKEN not in text and '"bearer_token_set":true' in text
    assert TOKEN not in json.dumps(event.changes) and TOKEN not in response.content.decode()
    admin = Client()
    admin.force_login(SuperUserFactory(username="root"))
    page = admin.get(f"/admin/scheduler/cluster/{cluster.pk}/change/").content.decode()
    assert "prom.example.org" in page and "bearer token set" in page and TOKEN not in page


def test_the_same_values_again_record_nothing_and_a_blank_token_unsets_it(cluster, ops):
    body = {"prometheus_url": "http://prom:9090", "bearer_token": TOKEN, "reason": "r"}
    assert patch(ops, cluster.pk, body).status_code == 200
    assert patch(ops, cluster.pk, body).status_code == 200
    assert ClusterPolicyEvent.objects.filter(cluster=cluster).count() == 1
    response = patch(ops, cluster.pk, {"bearer_token": "", "reason": "rotated away"})
    assert response.json()["metrics"]["bearer_token_set"] is False
    assert stored(cluster)["bearer_token"] == ""
    last = ClusterPolicyEvent.objects.filter(cluster=cluster).order_by("-at", "-pk").first()
    assert last.changes == {"metrics.bearer_token": ["set", "unset"]}


def test_a_cluster_without_settings_shows_the_defaults(cluster):
    body = client_as(participant("ann")).get(f"/api/v1/clusters/{cluster.pk}/").json()
    assert body["metrics"]["prometheus_url"] == ""
    assert (body["metrics"]["host_label"], body["metrics"]["gpu_label"]) == ("Hostname", "gpu")
    assert body["metrics"]["bearer_token_set"] is False
    assert stored(cluster) is None  # a read writes nothing


@pytest.mark.parametrize(
    ("body", "field", "detail"),
    [
        ({"prometheus_url": "ftp://prom:9090"}, "prometheus_url", "http:// or https://"),
        ({"prometheus_url": "prom:9090"}, "prometheus_url", "http:// or https://"),
        ({"prometheus_url": "http://u:pw@prom:9090"}, "prometheus_url", "credentials"),
        ({"prometheus_url": 9090}, "prometheus_url", "text"),
        ({"prometheus_url": "http://p/" + "x" * 500}, "prometheus_url", "500"),
        ({"host_label": "host name"}, "host_label", "Prometheus label name"),
        ({"host_label": "9host"}, "host_label", "Prometheus label name"),
        ({"host_label": "host\n"}, "host_label", "Prometheus label name"),
        ({"gpu_label": ""}, "gpu_label", "blank"),
        ({"gpu_label": "gpu-index"}, "gpu_label", "Prometheus label name"),
        ({"gpu_label": None}, "gpu_label", "null"),
        ({"selector": "cluster=a100"}, "selector", "label matchers"),
        ({"bearer_token": "two words"}, "bearer_token", "visible ASCII"),
        ({"bearer_token": "x" * 1001}, "bearer_token", "1000"),
        ({"colour": "red"}, "colour", "Not a metrics setting"),
        ({}, "changes", "nothing to change"),
        ({"gpu_label": "g", "reason": ""}, "reason", ""),
    ],
)
def test_bad_values_are_400_naming_the_field_and_write_nothing(cluster, ops, body, field, detail):
    body = {"reason": "r", **body}
    response = patch(ops, cluster.pk, body)
    assert response.status_code == 400, response.json()
    assert response.json()["field"] == field
    assert detail.lower() in response.json()["detail"].lower()
    assert stored(cluster) is None and not ClusterPolicyEvent.objects.exists()


def test_only_staff_may_change_them_and_a_refusal_writes_nothing(cluster, tree):
    body = {"prometheus_url": "http://prom:9090", "reason": "r"}
    operator = UserFactory(username="operator")
    cluster.operators.add(operator)
    for user, status in [
        (tree.user("ceo"), 403),  # heads the whole tree: still not a cluster setting
        (operator, 403),  # drains hosts, does not change settings
        (participant("ann"), 403),
        (None, 401),
    ]:
        assert patch(user, cluster.pk, body).status_code == status
    # the service decides before it checks the values: a refused bad value is a 403 too
    refused = patch(tree.user("ceo"), cluster.pk, {"host_label": "a b", "reason": "r"})
    assert refused.status_code == 403
    assert stored(cluster) is None and not ClusterPolicyEvent.objects.exists()


def test_a_missing_cluster_is_404(ops):
    response = patch(ops, 999999, {"gpu_label": "g", "reason": "r"})
    assert response.status_code == 404
    assert not ClusterMetrics.objects.exists()


def test_the_schema_documents_the_operation_its_errors_and_no_token():
    schema = SchemaGenerator().get_schema(request=None, public=True)
    operation = schema["paths"]["/api/v1/clusters/{cluster_id}/metrics/"]["patch"]
    assert operation["operationId"] == "clusters_metrics"
    assert {"200", "400", "401", "403", "404"} <= set(operation["responses"])
    components = schema["components"]["schemas"]
    request = components["ClusterMetricsInputRequest"]
    assert request["additionalProperties"] is False
    assert request["properties"]["host_label"]["pattern"] == r"^[a-zA-Z_][a-zA-Z0-9_]{0,99}$"
    assert request["properties"]["prometheus_url"]["maxLength"] == 500
    assert request["properties"]["bearer_token"]["writeOnly"] is True
    output = components["ClusterMetricsOutput"]["properties"]
    assert "bearer_token_set" in output and "bearer_token" not in output
    assert components["ClusterOutput"]["properties"]["metrics"]["$ref"].endswith(
        "ClusterMetricsOutput"
    )
