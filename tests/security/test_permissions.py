"""Walk tests/security/permissions.py: each of nine roles gets the status its row says,
and the row's effect (issue 31, point 1): a fingerprint of the tables a request can touch
is unchanged by every refusal and every read, and changed by every successful write."""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import re

import pytest
from django.apps import apps
from django.test import Client
from django.utils import timezone
from drf_spectacular.generators import SchemaGenerator

from accounts.services import token_create
from budgets import services
from budgets.models import BudgetEvent, EventKind, Membership
from scheduler.models import Preview
from scheduler.services.jobs import job_submit
from tests.factories import ClusterFactory, HostFactory, SuperUserFactory, UserFactory
from tests.security.permissions import ROLES, ROWS, USERS
from tests.security.urls import all_paths

pytestmark = pytest.mark.django_db

# every table a request of the matrix may write (sessions and caches aside)
TOUCHED = [
    "budgets.BudgetNode", "budgets.Membership", "budgets.BudgetEvent", "budgets.BudgetEventItem",
    "budgets.ScheduledChange", "budgets.TreeState", "scheduler.Job", "scheduler.JobEvent",
    "scheduler.Attempt", "scheduler.Cluster", "scheduler.ClusterPolicyEvent", "scheduler.Host",
    "scheduler.HostEvent", "scheduler.Preview", "scheduler.IdempotencyKey", "accounts.ApiToken",
]  # fmt: skip


def fingerprint() -> str:
    """One digest of every row of the touched tables (and the cluster operators)."""
    digest = hashlib.sha256()
    for label in TOUCHED:
        model = apps.get_model(label)
        for row in model.objects.order_by("pk").values_list():
            digest.update(repr(row).encode())
    return digest.hexdigest()


def context(tree) -> dict[str, object]:
    """Objects the rows refer to, by placeholder name."""
    UserFactory(username="bob")
    UserFactory(username="newcomer")
    UserFactory(username="ops", is_staff=True)
    SuperUserFactory(username="root")
    scheduled = services.budget_change_create(
        actor=tree.user("ceo"),
        reason="later",
        changes=[{"node": tree.node("a2").pk, "weight": 2}],
        effective_at=timezone.now() + dt.timedelta(days=1),
    )
    cluster = ClusterFactory(name="gpu")
    host = HostFactory(cluster=cluster, name="node00")
    submit = {"cluster": "gpu", "name": "j", "gpus": 1, "min_runtime_s": 0}
    job = job_submit(actor=tree.user("ann"), project="org/prog-a/a1", **submit).jobs[0]
    job_a2 = job_submit(actor=tree.user("bob"), project="org/prog-a/a2", **submit).jobs[0]
    preview = Preview.objects.create(
        requester=tree.user("lead-a"), node=tree.node("prog-a"), cluster=cluster,
        weights=[{"node": tree.node("a1").pk, "weight": "3"}],
    )  # fmt: skip
    return {
        "scenario": "no-contention",
        "preview": preview.pk,
        "job": job.pk,
        "job_a2": job_a2.pk,
        "host": host.pk,
        "cluster": cluster.pk,
        "a1": tree.node("a1").pk,
        "a2": tree.node("a2").pk,
        "b1": tree.node("b1").pk,
        "prog_a": tree.node("prog-a").pk,
        "scheduled": scheduled.pk,
        "import_event": BudgetEvent.objects.get(kind=EventKind.IMPORTED).pk,
        "ann_a1": Membership.objects.get(user__username="ann", node__name="a1").pk,
        "pi_a1": Membership.objects.get(user__username="pi-a1", node__name="a1").pk,
        "ceo_token": token_create(user=tree.user("ceo"))[0].token_key,
    }


def fill(value, ctx):
    if isinstance(value, str):
        for name, replacement in ctx.items():
            if value == f"{{{name}}}":
                return replacement
            value = value.replace(f"{{{name}}}", str(replacement))
        return value
    if isinstance(value, dict):
        return {fill(k, ctx): fill(v, ctx) for k, v in value.items()}
    if isinstance(value, list):
        return [fill(v, ctx) for v in value]
    return value


@pytest.mark.parametrize("role", ROLES)
@pytest.mark.parametrize("row", ROWS, ids=[f"{r.key}#{i}" for i, r in enumerate(ROWS)])
def test_each_role_gets_what_the_table_says_and_only_that_effect(tree, row, role):
    ctx = context(tree)
    client = Client()
    if USERS[role]:
        client.force_login(tree.user(USERS[role]))
    path, body = fill(row.path, ctx), fill(row.body, ctx)
    before = fingerprint()
    if row.method == "get":
        response = client.get(path)
    elif path.startswith("/api/"):
        response = getattr(client, row.method)(
            path, json.dumps(body), content_type="application/json"
        )
    else:
        response = getattr(client, row.method)(path, body)
    assert response.status_code == row.expected[role], (path, body, response.content[:300])
    changed = fingerprint() != before
    assert changed is row.writes(role), (
        f"{row.key} as {role}: expected the tables {'changed' if row.writes(role) else 'unchanged'}"
    )


def _normalise(key: str) -> str:
    """`GET /api/v1/nodes/{node_id}/` and `GET /api/v1/nodes/{a1}/` are the same operation
    (and a row's query string is not part of it); the URL walk's sample ids too."""
    path = re.sub(r"\{[^}]+\}", "{}", key.partition("?")[0])
    return re.sub(r"/(1|sample)/", "/{}/", path)


def test_every_api_operation_has_a_row():
    schema = SchemaGenerator().get_schema(request=None, public=True)
    operations = {
        f"{method.upper()} {path}"
        for path, item in schema["paths"].items()
        for method in item
        if method in {"get", "post", "put", "patch", "delete"}
    }
    normalised = {_normalise(r.key) for r in ROWS}
    missing = sorted(op for op in operations if _normalise(op) not in normalised)
    assert missing == [], "add these to tests/security/permissions.py (and README's table)"


def test_every_page_has_a_row():
    """Pages of the URL configuration (the API and the admin's own URLs aside, static
    files too); a page added later fails here until its rows are written."""
    rows = {_normalise(r.path) for r in ROWS}
    pages = [
        p for p in all_paths()
        if not p.startswith(("/api/", "/admin/", "/static/")) and p not in ("/healthz", "/metrics")
    ]  # fmt: skip
    missing = sorted(p for p in pages if _normalise(p) not in rows)
    assert missing == [], "add rows for these pages to tests/security/permissions.py"
