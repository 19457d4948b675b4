"""Walk tests/security/permissions.py: each role gets the status its row says."""

import datetime as dt
import json

import pytest
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

pytestmark = pytest.mark.django_db


def context(tree) -> dict[str, object]:
    """Objects the rows refer to, by placeholder name."""
    UserFactory(username="bob")
    scheduled = services.budget_change_create(
        actor=tree.user("ceo"),
        reason="later",
        changes=[{"node": tree.node("a2").pk, "weight": 2}],
        effective_at=timezone.now() + dt.timedelta(days=1),
    )
    cluster = ClusterFactory(name="gpu")
    host = HostFactory(cluster=cluster, name="node00")
    job = job_submit(
        actor=tree.user("ann"), project="org/prog-a/a1", cluster="gpu", name="j", gpus=1,
        min_runtime_s=0,
    ).jobs[0]  # fmt: skip
    preview = Preview.objects.create(
        requester=tree.user("lead-a"), node=tree.node("prog-a"), cluster=cluster,
        weights=[{"node": tree.node("a1").pk, "weight": "3"}],
    )  # fmt: skip
    return {
        "preview": preview.pk,
        "job": job.pk,
        "host": host.pk,
        "cluster": cluster.pk,
        "a1": tree.node("a1").pk,
        "prog_a": tree.node("prog-a").pk,
        "scheduled": scheduled.pk,
        "import_event": BudgetEvent.objects.get(kind=EventKind.IMPORTED).pk,
        "ann_a1": Membership.objects.get(user__username="ann", node__name="a1").pk,
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
        return {k: fill(v, ctx) for k, v in value.items()}
    if isinstance(value, list):
        return [fill(v, ctx) for v in value]
    return value


@pytest.mark.parametrize("role", ROLES)
@pytest.mark.parametrize("row", ROWS, ids=[r.key for r in ROWS])
def test_each_role_gets_what_the_table_says(tree, row, role):
    ctx = context(tree)
    SuperUserFactory(username="root")
    client = Client()
    if USERS[role]:
        client.force_login(tree.user(USERS[role]))
    path, body = fill(row.path, ctx), fill(row.body, ctx)
    if row.method == "get":
        response = client.get(path)
    elif path.startswith("/api/"):
        response = getattr(client, row.method)(
            path, json.dumps(body), content_type="application/json"
        )
    else:
        response = getattr(client, row.method)(path, body)
    assert response.status_code == row.expected[role], (path, body, response.content[:300])


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


def _normalise(key: str) -> str:
    """`GET /api/v1/nodes/{node_id}/` and `GET /api/v1/nodes/{a1}/` are the same operation
    (and a row's query string is not part of it)."""
    import re

    return re.sub(r"\{[^}]+\}", "{}", key.partition("?")[0])
