"""Walk tests/security/permissions.py: each of nine roles gets the status its row says,
and the row's effect (issue 31, point 1): a fingerprint of the tables a request can touch
is unchanged by every refusal and every read, and changed by every successful write.

One test per row: its objects are made once and each role's request runs in a savepoint
that is rolled back, so every role starts from the same tables. Every API operation of
the schema, every page of the URL configuration and every model of the admin must have
a row (`missing_rows`); a URL configuration with one more endpoint proves it."""

from __future__ import annotations

import datetime as dt
import hashlib
import json
from types import ModuleType

import pytest
from axes.models import AccessAttempt, AccessFailureLog, AccessLog
from django.apps import apps
from django.contrib import admin
from django.contrib.auth.models import Group
from django.db import connection, transaction
from django.http import HttpResponse
from django.test import Client
from django.urls import get_resolver
from django.urls import path as url_path
from django.utils import timezone
from drf_spectacular.generators import SchemaGenerator
from drf_spectacular.utils import extend_schema
from rest_framework.response import Response
from rest_framework.views import APIView

from accounts.services import token_create
from budgets import services
from budgets.models import BudgetEvent, EventKind, Membership, ScheduledChange
from config import urls as project_urls
from scheduler.models import (
    AttemptState,
    Cluster,
    CycleRecord,
    IdempotencyKey,
    JobEvent,
    Preview,
)
from scheduler.services.clusters import cluster_operators_set
from scheduler.services.hosts import host_set_health
from scheduler.services.jobs import job_submit
from tests.factories import (
    AttemptFactory,
    ClusterFactory,
    HostFactory,
    SuperUserFactory,
    UserFactory,
)
from tests.security.permissions import ROLES, ROWS, USERS, Row, operation_key
from tests.security.urls import all_paths

pytestmark = pytest.mark.django_db

# every table a request of the matrix may write (sessions and caches aside)
TOUCHED = [
    "budgets.BudgetNode", "budgets.Membership", "budgets.BudgetEvent", "budgets.BudgetEventItem",
    "budgets.ScheduledChange", "budgets.TreeState", "scheduler.Job", "scheduler.JobEvent",
    "scheduler.Attempt", "scheduler.Cluster", "scheduler.ClusterPolicyEvent", "scheduler.Host",
    "scheduler.HostEvent", "scheduler.Preview", "scheduler.IdempotencyKey", "scheduler.ClusterMetrics",
    "accounts.ApiToken",
    "auth.User", "auth.Group",
]  # fmt: skip
METHODS = {"get", "post", "put", "patch", "delete"}


def fingerprint() -> str:
    """One digest of every row of the touched tables and the cluster operators: each
    table's rows (every column, as PostgreSQL writes the row) in key order, digested in
    one query (the matrix takes two per role and row)."""
    quote = connection.ops.quote_name
    parts = [
        f"(SELECT md5(coalesce(string_agg(t::text, E'\\n' ORDER BY t.{quote(m._meta.pk.column)}), ''))"
        f" FROM {quote(m._meta.db_table)} AS t)"
        for m in [*(apps.get_model(label) for label in TOUCHED), Cluster.operators.through]
    ]
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT ARRAY[{', '.join(parts)}]")
        return hashlib.sha256(repr(cursor.fetchone()[0]).encode()).hexdigest()


def context(tree) -> dict[str, object]:
    """Objects the rows refer to, by placeholder name."""
    UserFactory(username="bob")
    UserFactory(username="newcomer")
    ops = UserFactory(username="ops", is_staff=True)
    SuperUserFactory(username="root")
    for name in USERS.values():
        if name:
            tree.user(name)  # a usable password, set before any fingerprint
    scheduled = services.budget_change_create(
        actor=tree.user("ceo"),
        reason="later",
        changes=[{"node": tree.node("a2").pk, "weight": 2}],
        effective_at=timezone.now() + dt.timedelta(days=1),
    )
    cluster = ClusterFactory(name="gpu")
    host = HostFactory(cluster=cluster, name="node00")
    drained = HostFactory(cluster=cluster, name="node01")
    host_set_health(actor=ops, host_id=drained.pk, health="draining", reason="repair")
    cluster_operators_set(actor=None, cluster_id=cluster.pk, usernames=["ops"], reason="on call")
    submit = {"cluster": "gpu", "name": "j", "gpus": 1, "min_runtime_s": 0}
    job = job_submit(actor=tree.user("ann"), project="org/prog-a/a1", **submit).jobs[0]
    job_a2 = job_submit(actor=tree.user("bob"), project="org/prog-a/a2", **submit).jobs[0]
    job_b1 = job_submit(actor=tree.user("ceo"), project="org/prog-b/b1", **submit).jobs[0]
    keyed = job_submit(
        actor=tree.user("ann"), project="org/prog-a/a1", idempotency_key="k", fingerprint="f",
        **submit,
    ).jobs[0]  # fmt: skip
    now = timezone.now()
    attempt = AttemptFactory(
        job=keyed, number=1, attempt_id="a-1", cluster=cluster, project=keyed.project,
        gpus=1, allocated=False, state=AttemptState.ENDED, created_at=now, ended_at=now,
    )  # fmt: skip
    preview = Preview.objects.create(
        requester=tree.user("lead-a"), node=tree.node("prog-a"), cluster=cluster,
        weights=[{"node": tree.node("a1").pk, "weight": "3"}],
    )  # fmt: skip
    ceo_token = token_create(user=tree.user("ceo"))[0]
    seen = {"user_agent": "test", "ip_address": "127.0.0.1", "username": "bob",
            "http_accept": "*/*", "path_info": "/accounts/login/"}  # fmt: skip
    return {
        "scenario": "no-contention",
        "preview": preview.pk,
        "job": job.pk,
        "job_a2": job_a2.pk,
        "job_b1": job_b1.pk,
        "host": host.pk,
        "cluster": cluster.pk,
        "a1": tree.node("a1").pk,
        "a2": tree.node("a2").pk,
        "b1": tree.node("b1").pk,
        "prog_a": tree.node("prog-a").pk,
        "prog_b": tree.node("prog-b").pk,
        "scheduled": scheduled.pk,
        "scheduled_change": ScheduledChange.objects.get(event_id=scheduled.pk).pk,
        "import_event": BudgetEvent.objects.get(kind=EventKind.IMPORTED).pk,
        "ann_a1": Membership.objects.get(user__username="ann", node__name="a1").pk,
        "pi_a1": Membership.objects.get(user__username="pi-a1", node__name="a1").pk,
        "ceo_token": ceo_token.token_key,
        "ceo_token_pk": ceo_token.pk,
        "bob": tree.user("bob").pk,
        "group": Group.objects.create(name="readers").pk,
        "host_event": drained.events.get().pk,
        "policy_event": cluster.policy_events.get().pk,
        "job_event": JobEvent.objects.filter(job=job).first().pk,
        "attempt": attempt.pk,
        "cycle": CycleRecord.objects.create(cluster=cluster, started_at=now).pk,
        "idempotency_key": IdempotencyKey.objects.get(key="k").pk,
        # axes' tables (unused with its cache handler; bulk_create skips its signals)
        "access_attempt": AccessAttempt.objects.bulk_create(
            [AccessAttempt(**seen, get_data="", post_data="", failures_since_start=1)]
        )[0].pk,
        "access_log": AccessLog.objects.bulk_create([AccessLog(**seen)])[0].pk,
        "access_failure": AccessFailureLog.objects.bulk_create([AccessFailureLog(**seen)])[0].pk,
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


def outcome(tree, row: Row, role: str, path: str, body) -> tuple[int, bool]:
    """`role`'s status for the row's request and whether it changed the tables."""
    client = Client()
    if USERS[role]:
        client.force_login(tree.user(USERS[role]))
    before = fingerprint()
    if row.method == "get":
        response = client.get(path)
    elif path.startswith("/api/"):
        response = getattr(client, row.method)(
            path, json.dumps(body), content_type="application/json"
        )
    else:
        response = getattr(client, row.method)(path, body)
    return response.status_code, fingerprint() != before


@pytest.mark.parametrize("row", ROWS, ids=[f"{r.key}#{i}" for i, r in enumerate(ROWS)])
def test_each_role_gets_what_the_table_says_and_only_that_effect(tree, row):
    ctx = context(tree)
    path, body = fill(row.path, ctx), fill(row.body, ctx)
    wrong = []
    for role in ROLES:
        with transaction.atomic():  # a savepoint: the next role starts from the same tables
            status, changed = outcome(tree, row, role, path, body)
            transaction.set_rollback(True)
        expected = (row.expected[role], row.writes(role))
        if (status, changed) != expected:
            wrong.append(f"{role}: got {status}, tables {'changed' if changed else 'unchanged'}; "
                         f"the row says {expected[0]}, {'changed' if expected[1] else 'unchanged'}")  # fmt: skip
    assert wrong == [], (path, body, wrong)


def missing_rows(urlconf=None) -> list[str]:
    """Operations of the schema, paths of the URL configuration and models of the admin
    without a row in tests/security/permissions.py."""
    urlconf = urlconf or project_urls
    covered = {operation_key(r.key) for r in ROWS} | {operation_key(r.path) for r in ROWS}
    schema = SchemaGenerator(urlconf=urlconf).get_schema(request=None, public=True)
    wanted = [
        f"{method.upper()} {path}"
        for path, item in schema["paths"].items()
        for method in item
        if method in METHODS
    ]
    wanted += [
        p for p in all_paths(get_resolver(urlconf)) if not p.startswith(("/admin/", "/static/"))
    ]
    wanted += [
        f"/admin/{model._meta.app_label}/{model._meta.model_name}/{{}}/change/"
        for model in admin.site._registry
    ]
    return sorted({key for key in wanted if operation_key(key) not in covered})


def test_every_operation_page_and_admin_model_has_a_row():
    assert missing_rows() == [], "add rows for these to tests/security/permissions.py"


class _UnlistedApi(APIView):
    @extend_schema(responses={200: None})
    def get(self, request):
        return Response({})


def test_an_endpoint_added_without_rows_fails_the_check():
    extended = ModuleType("extended_urls")
    extended.urlpatterns = [  # type: ignore[attr-defined]
        *project_urls.urlpatterns,
        url_path("api/v1/unlisted/<int:thing_id>/", _UnlistedApi.as_view()),
        url_path("unlisted/", lambda request: HttpResponse()),
    ]
    assert missing_rows(extended) == [
        "/api/v1/unlisted/1/",
        "/unlisted/",
        "GET /api/v1/unlisted/{thing_id}/",
    ]
