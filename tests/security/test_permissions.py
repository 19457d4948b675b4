"""Walk tests/security/permissions.py: each of nine roles gets the status its row says,
and the row's effect (issue 31, point 1): every table of the database is digested (row
count and an md5 of its rows) before and after each request; a refusal, an invalid
request and a read change no table, and a write that succeeds changes exactly the
tables its row names (`Row.tables`: the rows and their audit trail), no other. The
broken services at the end (a refusal that still writes, a write that touches another
table, misses its audit row or writes nothing) show the walk reports each.

One test per row: each role's request runs in a savepoint that is rolled back, so every
role starts from the same tables (digested once per row). The objects the rows refer to
and the roles' sign-ins are made once for the module (`world`, in a transaction rolled
back at its end; the module is one xdist group, tests/conftest.py): every row starts
from the same tables as when each row made its own, without the ~40% of the module's
time that making them 107 times cost. Every API operation of the schema, every page of the URL
configuration and every model of the admin must have a row (`missing_rows`); a URL
configuration with one more endpoint proves it."""

from __future__ import annotations

import datetime as dt
import json
from dataclasses import dataclass
from types import ModuleType

import pytest
from axes.models import AccessAttempt, AccessFailureLog, AccessLog
from django.conf import settings
from django.contrib import admin
from django.contrib.auth.models import Group, User
from django.db import connection, transaction
from django.http import HttpResponse
from django.test import Client
from django.urls import get_resolver
from django.urls import path as url_path
from django.utils import timezone
from django.views.decorators.csrf import csrf_exempt
from drf_spectacular.generators import SchemaGenerator
from drf_spectacular.utils import extend_schema
from rest_framework.response import Response
from rest_framework.views import APIView

from accounts.models import TokenEvent
from accounts.services import token_create
from budgets import services
from budgets.models import BudgetEvent, EventKind, Membership, ScheduledChange
from budgets.permissions import may_cancel_job
from config import urls as project_urls
from config.errors import PermissionDenied
from scheduler.models import (
    AttemptState,
    CycleRecord,
    IdempotencyKey,
    Job,
    JobEvent,
    JobState,
    Preview,
)
from scheduler.services import jobs as job_services
from scheduler.services.clusters import cluster_operators_set
from scheduler.services.hosts import host_set_health
from scheduler.services.jobs import job_submit
from scheduler.services.transitions import job_transition
from tests.factories import (
    AttemptFactory,
    ClusterFactory,
    HostFactory,
    SuperUserFactory,
    UserFactory,
)
from tests.security.permissions import ROLES, ROWS, USERS, Row, operation_key
from tests.security.urls import all_paths
from tests.support.tree import example_tree

pytestmark = pytest.mark.django_db

METHODS = {"get", "post", "put", "patch", "delete"}

# Every table of the database is digested, none left out: the tables that change on any
# request elsewhere do not here. The sessions are written by each role's sign-in before
# the first digest, and then only by the sign-out (its row names the table); heartbeats
# are written by the beat and the workers, which do not run here; the caches are Redis.
# So a request that writes a table no row names is caught wherever it writes.
DIGESTS_STATEMENT = "allot_matrix_digests"

Digests = dict[str, tuple[int, str]]


def digests_sql(tables: list[str]) -> str:
    """Each table's name, row count and md5 of its rows (every column, as PostgreSQL
    writes the row, in text order: no key needed), all in one statement."""
    quote = connection.ops.quote_name
    assert not any("'" in table for table in tables), tables
    return " UNION ALL ".join(
        f"SELECT '{table}', count(*), md5(coalesce(string_agg(t::text, E'\\n' ORDER BY t::text), ''))"
        f" FROM {quote(table)} AS t"
        for table in tables
    )


def digests() -> Digests:
    """Every table's row count and digest. The statement is prepared once per database
    session (asked of the server: a new connection, or a DEALLOCATE, prepares it again):
    parsing and planning its ~45 parts cost more than running it (a call 4.4 -> 1.2 ms)."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1 FROM pg_prepared_statements WHERE name = %s", [DIGESTS_STATEMENT])
        if cursor.fetchone() is None:
            tables = sorted(connection.introspection.table_names(cursor))
            cursor.execute(f"PREPARE {DIGESTS_STATEMENT} AS {digests_sql(tables)}")
        cursor.execute(f"EXECUTE {DIGESTS_STATEMENT}")
        return {table: (count, digest) for table, count, digest in cursor.fetchall()}


def changed(before: Digests, after: Digests) -> dict[str, str]:
    """The tables whose digest differs, each with its row counts before -> after."""
    return {
        table: f"{before[table][0]} -> {after[table][0]} rows"
        for table in sorted(before)
        if before[table] != after[table]
    }


def running_job(tree, cluster, submit: dict, now) -> Job:
    """Ann's job in a1, running on node00 (its attempt is what a cancel asks to stop)."""
    job = job_submit(actor=tree.user("ann"), project="org/prog-a/a1", **submit).jobs[0]
    AttemptFactory(
        job=job, attempt_id="a-run", cluster=cluster, gpus=1, created_at=now,
        started_at=now, placements=[{"host": "node00", "gpu_indices": [0]}],
    )  # fmt: skip
    job_transition(job=job, to_state=JobState.STARTING, reason="starting")
    job_transition(job=job, to_state=JobState.RUNNING, reason="running")
    return job


def context(tree) -> dict[str, object]:
    """Objects the rows refer to, by placeholder name."""
    UserFactory(username="bob")
    UserFactory(username="newcomer")
    ops = UserFactory(username="ops", is_staff=True)
    SuperUserFactory(username="root")
    for name in USERS.values():
        if name:
            tree.user(name)  # a usable password, set before any digest
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
    running = running_job(tree, cluster, submit, now)
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
        "job_running": running.pk,
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
        "token_event": TokenEvent.objects.get(token_key=ceo_token.token_key).pk,
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


def signed_in_sessions(tree) -> dict[str, str]:
    """Each role's session key, signed in before any digest (a sign-in writes the session
    and the user's last sign-in); the anonymous role has none."""
    sessions = {}
    for role in ROLES:
        if USERS[role]:
            client = Client()
            client.force_login(tree.user(USERS[role]))
            sessions[role] = client.cookies[settings.SESSION_COOKIE_NAME].value
    return sessions


def signed_in_clients(sessions: dict[str, str]) -> dict[str, Client]:
    """A fresh client per role carrying only its session: a response of an earlier row
    (a sign-out, a new session key rolled back with its savepoint) never reaches it."""
    clients = {}
    for role in ROLES:
        clients[role] = Client()
        if role in sessions:
            clients[role].cookies[settings.SESSION_COOKIE_NAME] = sessions[role]
    return clients


@dataclass(frozen=True)
class World:
    """The rows' objects by placeholder name (`context`) and each role's session."""

    ctx: dict[str, object]
    sessions: dict[str, str]


@pytest.fixture(scope="module")
def world(django_db_setup, django_db_blocker):
    """The example tree, the rows' objects and the roles' sign-ins, made once for the
    module in a transaction rolled back at its end; each test's own savepoint (the
    `django_db` mark) and each role's request's are rolled back inside it."""
    with django_db_blocker.unblock(), transaction.atomic():
        tree = example_tree()
        yield World(context(tree), signed_in_sessions(tree))
        transaction.set_rollback(True)


def send(client: Client, row: Row, path: str, body) -> int:
    if row.method == "get":
        return client.get(path).status_code
    if path.startswith("/api/"):
        return getattr(client, row.method)(
            path, json.dumps(body), content_type="application/json"
        ).status_code
    return getattr(client, row.method)(path, body).status_code


def expected_tables(row: Row, role: str) -> set[str]:
    """The tables `role`'s request must change, exactly: the row's for a write it is let
    through, none for a read, a refusal or an invalid request."""
    return set(row.tables) if row.writes(role) else set()


def wrong_effects(world: World, row: Row) -> list[str]:
    """Each role's request of `row`, in a savepoint rolled back after it (every role starts
    from the same tables): what differs from the row, the status or the tables changed."""
    path, body = fill(row.path, world.ctx), fill(row.body, world.ctx)
    clients = signed_in_clients(world.sessions)
    before = digests()
    wrong = []
    for role in ROLES:
        with transaction.atomic():
            status = send(clients[role], row, path, body)
            tables = changed(before, digests())
            transaction.set_rollback(True)
        want = expected_tables(row, role)
        if status != row.expected[role] or set(tables) != want:
            wrong.append(
                f"{role}: got {status}, changed {tables or 'nothing'}; "
                f"the row says {row.expected[role]}, changes {sorted(want) or 'nothing'}"
            )
    return wrong


@pytest.mark.parametrize("row", ROWS, ids=[f"{r.key}#{i}" for i, r in enumerate(ROWS)])
def test_each_role_gets_what_the_table_says_and_only_that_effect(world, row):
    assert wrong_effects(world, row) == [], (row.path, row.body)


def the_row(key: str) -> Row:
    (row,) = [r for r in ROWS if r.key == key]
    return row


def who(wrong: list[str]) -> list[str]:
    return [line.partition(":")[0] for line in wrong]


def let_through(row: Row) -> list[str]:
    return [role for role in ROLES if row.writes(role)]


def test_a_refusal_that_still_writes_fails_its_row(world, monkeypatch):
    """`job_cancel` writing the job before it refuses: a 403 as the row says, and a
    changed table."""
    cancel = job_services.job_cancel

    def writes_then_refuses(*, actor, job_id, **kwargs):
        Job.objects.filter(pk=job_id).update(name="touched")
        return cancel(actor=actor, job_id=job_id, **kwargs)

    monkeypatch.setattr(job_services, "job_cancel", writes_then_refuses)
    row = the_row("POST /api/v1/jobs/{job_a2}/cancel/")  # bob's job in a2
    wrong = wrong_effects(world, row)
    # the roles the service refuses (no role at all is refused before the view)
    assert who(wrong) == ["member", "project_lead", "other_manager"]
    assert all("got 403, changed {'scheduler_job': '5 -> 5 rows'}" in line for line in wrong)


def test_a_write_that_touches_another_table_fails_its_row(world, monkeypatch):
    """`membership_remove` that also renames the member: the row's tables changed, and
    one more."""
    remove = services.membership_remove

    def also_touches_the_user(*, actor, membership_id, **kwargs):
        user_id = Membership.objects.get(pk=membership_id).user_id
        remove(actor=actor, membership_id=membership_id, **kwargs)
        User.objects.filter(pk=user_id).update(first_name="removed")

    monkeypatch.setattr(services, "membership_remove", also_touches_the_user)
    row = the_row("DELETE /api/v1/memberships/{ann_a1}/")
    wrong = wrong_effects(world, row)
    assert (
        who(wrong) == let_through(row) == ["project_lead", "program_manager", "head", "superuser"]
    )
    assert all("'auth_user': '9 -> 9 rows'" in line for line in wrong)


def cancelled_without_its_event(*, actor, job_id, **kwargs):
    job = Job.objects.get(pk=job_id)
    if not may_cancel_job(actor, job):
        raise PermissionDenied("refused")
    Job.objects.filter(pk=job_id).update(state=JobState.CANCELLED)
    return job


def cancelled_nothing(*, actor, job_id, **kwargs):
    job = Job.objects.get(pk=job_id)
    if not may_cancel_job(actor, job):
        raise PermissionDenied("refused")
    return job


@pytest.mark.parametrize(
    ("broken", "tables"),
    [(cancelled_without_its_event, "{'scheduler_job': '5 -> 5 rows'}"), (cancelled_nothing, "nothing")],
)  # fmt: skip
def test_a_success_without_its_effect_fails_its_row(world, monkeypatch, broken, tables):
    """A cancel that leaves out the job's event, or changes nothing, still answers 200."""
    monkeypatch.setattr(job_services, "job_cancel", broken)
    row = the_row("POST /api/v1/jobs/{job}/cancel/")
    wrong = wrong_effects(world, row)
    assert who(wrong) == let_through(row)
    assert all(f"got 200, changed {tables};" in line for line in wrong)


def test_each_row_that_writes_names_its_tables():
    """A write let through names what it changes; a row no role writes names nothing."""
    for row in ROWS:
        assert bool(row.tables) == any(row.writes(role) for role in ROLES), row.key


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


UNSAFE = ("post", "put", "patch", "delete")


def page_writes_without_rows(world: World) -> list[str]:
    """Each method other than GET and HEAD that a page of the URL configuration answers
    (anything but a 405, to a superuser, in a savepoint rolled back) without a row for
    it: a page that writes must have its rows, and one that only reads refuses the rest
    (`config.access.participant_page`)."""
    covered = {operation_key(r.key) for r in ROWS}
    client = signed_in_clients(world.sessions)["superuser"]
    found = []
    for path in all_paths():
        if path.startswith(("/api/", "/admin/", "/static/")):
            continue
        for method in UNSAFE:
            key = operation_key(f"{method.upper()} {path}")
            if key in covered:
                continue
            with transaction.atomic():
                status = getattr(client, method)(path).status_code
                transaction.set_rollback(True)
            if status != 405:
                found.append(f"{key} ({status})")
    return found


def test_every_method_a_page_answers_has_a_row(world):
    assert page_writes_without_rows(world) == [], "add rows, or refuse the method (405)"


def test_a_page_that_answers_a_write_without_rows_fails_the_check(world, settings):
    extended = ModuleType("extended_page_urls")
    extended.urlpatterns = [  # type: ignore[attr-defined]
        *project_urls.urlpatterns,
        url_path("unlisted-write/", csrf_exempt(lambda request: HttpResponse())),
    ]
    settings.ROOT_URLCONF = extended
    assert page_writes_without_rows(world) == [
        f"{method.upper()} /unlisted-write/ (200)" for method in UNSAFE
    ]


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
