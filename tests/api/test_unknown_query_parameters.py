"""A query parameter an operation does not take is a 400 naming it and the parameters the
operation accepts (a typo such as `?stat=pending` once listed every job), on every
operation of the schema, those without query parameters too (they once ignored any), as
each documents; the documented parameters, the pagination's and `format` are accepted,
and the CLI's requests too."""

from __future__ import annotations

import re

import pytest
from drf_spectacular.generators import SchemaGenerator
from rest_framework.test import APIClient

from accounts.models import ApiToken
from accounts.services import token_create
from budgets.models import Membership
from config.api_schema import UNKNOWN_PARAMETER
from scheduler.models import Job
from tests.api.conftest import job_body

pytestmark = pytest.mark.django_db
METHODS = {"get", "post", "put", "patch", "delete"}


def _client(user) -> APIClient:
    client = APIClient()
    client.force_authenticate(user)
    return client


def _operations() -> dict[tuple[str, str], dict]:
    """(method, path) -> operation, for every operation of the schema, each path
    parameter filled with 1 (the refusal comes before the object is looked up)."""
    schema = SchemaGenerator().get_schema(request=None, public=True)
    return {
        (method, re.sub(r"\{[^}]+\}", "1", path)): operation
        for path, item in schema["paths"].items()
        for method, operation in item.items()
        if method in METHODS
    }


def test_a_typo_in_a_filter_is_refused_not_ignored(world):
    client = _client(world.user("root"))
    for body in (job_body(), job_body(name="other")):
        assert client.post("/api/v1/jobs/", body, format="json").status_code == 201
    Job.objects.filter(name="other").update(state="running")

    filtered = client.get("/api/v1/jobs/?state=pending")
    assert filtered.status_code == 200 and filtered.json()["count"] == 1

    typo = client.get("/api/v1/jobs/?stat=pending")
    assert typo.status_code == 400, typo.content
    body = typo.json()
    assert body["code"] == "invalid" and body["field"] == "stat"
    assert body["errors"] == [
        {
            "field": "stat",
            "code": "unknown_parameter",
            "detail": "Not a query parameter of this operation, which accepts: cluster, kind, "
            "limit, mine, offset, project, state.",
        }
    ]
    assert "results" not in body


def test_every_unknown_parameter_is_named(world):
    response = _client(world.user("root")).get("/api/v1/hosts/?helth=down&limt=2&cluster=gpu")
    assert response.status_code == 400
    assert [e["field"] for e in response.json()["errors"]] == ["helth", "limt"]


def test_a_typo_in_dry_run_stores_nothing(world):
    """`?dryrun=1` once submitted for real: the submission's query is checked too."""
    client = _client(world.user("ann"))
    response = client.post("/api/v1/jobs/?dryrun=1", job_body(), format="json")
    assert response.status_code == 400 and response.json()["field"] == "dryrun"
    assert "dry_run" in response.json()["detail"]
    assert not Job.objects.exists()
    assert client.post("/api/v1/jobs/?dry_run=1", job_body(), format="json").status_code == 200
    assert not Job.objects.exists()


def test_pagination_only_where_the_operation_pages(world):
    client = _client(world.user("root"))
    assert client.get("/api/v1/hosts/?limit=1&offset=1").json()["count"] == 4
    assert len(client.get("/api/v1/hosts/?limit=1&offset=1").json()["results"]) == 1
    refused = client.get("/api/v1/fairshare/?cluster=gpu&limit=1")
    assert refused.status_code == 400 and refused.json()["field"] == "limit"
    assert refused.json()["detail"].endswith("which accepts: cluster.")
    assert client.get("/api/v1/fairshare/?cluster=gpu&format=json").status_code == 200


def test_every_operation_refuses_an_unknown_query_parameter_as_documented(world):
    """Driven by the schema: each operation refuses a query parameter it does not
    document (naming exactly the documented ones as accepted, "none" where it documents
    none), documents that 400, and takes each documented parameter (no
    `unknown_parameter` for it)."""
    client = _client(world.user("root"))
    operations = _operations()
    assert ("get", "/api/v1/jobs/") in operations and ("post", "/api/v1/jobs/") in operations
    assert ("get", "/api/v1/tree/") in operations and (
        "delete",
        "/api/v1/jobs/1/",
    ) not in operations
    for (method, path), operation in operations.items():
        names = sorted(p["name"] for p in operation.get("parameters", []) if p["in"] == "query")
        response = getattr(client, method)(f"{path}?zz_typo=1", {}, format="json")
        assert response.status_code == 400, (method, path, response.content)
        assert response.json()["field"] == "zz_typo", (method, path)
        accepts = ", ".join(names) or "none"
        assert response.json()["detail"].endswith(f"accepts: {accepts}."), (method, path)
        assert UNKNOWN_PARAMETER in operation["responses"]["400"]["description"], path
        for name in names:
            answer = getattr(client, method)(f"{path}?{name}=1", {}, format="json")
            codes = [e["code"] for e in answer.json().get("errors", [])] if answer.content else []
            assert "unknown_parameter" not in codes, (method, path, name)


def test_an_operation_without_query_parameters_refuses_one_before_acting(world):
    """`GET tree/?vesion=3` once answered the tree as if asked nothing, and a removal
    with a stray parameter removed: now a 400 naming it, and nothing is removed."""
    client = _client(world.user("root"))
    tree = client.get("/api/v1/tree/?vesion=3")
    assert tree.status_code == 400 and tree.json()["field"] == "vesion"
    assert tree.json()["detail"].endswith("which accepts: none.")
    membership = Membership.objects.get(user__username="ann")
    removal = client.delete(f"/api/v1/memberships/{membership.pk}/?reason=left")
    assert removal.status_code == 400 and removal.json()["field"] == "reason"
    assert Membership.objects.filter(pk=membership.pk).exists()
    assert client.get("/api/v1/tree/?format=json").status_code == 200
    assert client.delete(f"/api/v1/memberships/{membership.pk}/").status_code == 204


def test_a_method_the_operation_does_not_serve_is_still_a_405(world):
    """`TRACE jobs/?dry_run=true` was answered 400 ("dry_run: ... accepts: none"), not
    the 405 of a method the schema does not list (schemathesis's ST204)."""
    client = _client(world.user("root"))
    for path in ("/api/v1/jobs/?dry_run=true", "/api/v1/tree/?x=1", "/api/v1/jobs/1/?y=1"):
        assert client.generic("TRACE", path).status_code == 405, path
        assert client.put(path, {}, format="json").status_code == 405, path


def test_the_clis_queries_are_accepted(world):
    """What allot_cli sends (queue, jobs, hosts, usage, fair share) is not refused."""
    client = _client(world.user("ann"))
    for url in (
        "/api/v1/queue/?cluster=gpu&mine=true&limit=1",
        "/api/v1/queue/?cluster=gpu&limit=100&offset=0",
        "/api/v1/jobs/?limit=100&offset=0&cluster=gpu&mine=true&state=starting%2Crunning%2Cstopping",
        "/api/v1/hosts/?cluster=gpu&limit=100&offset=0",
        "/api/v1/usage/?cluster=gpu&project=org%2Fprog-a&step=day&limit=100&offset=0",
        "/api/v1/fairshare/?cluster=gpu",
    ):
        assert client.get(url).status_code == 200, (url, client.get(url).content)


def test_a_typo_in_keep_current_revokes_nothing(world):
    """`DELETE auth/tokens/?keep_curent=true` would have revoked every token, the one in
    use too: refused, every token kept."""
    ann = world.user("ann")
    for name in ("laptop", "ci"):
        token_create(user=ann, name=name)
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {token_create(user=ann, name='now')[1]}")
    typo = client.delete("/api/v1/auth/tokens/?keep_curent=true")
    assert typo.status_code == 400 and typo.json()["field"] == "keep_curent"
    assert ApiToken.objects.filter(user=ann).count() == 3
    assert client.delete("/api/v1/auth/tokens/?keep_current=true").status_code == 204
    assert list(ApiToken.objects.filter(user=ann).values_list("name", flat=True)) == ["now"]
