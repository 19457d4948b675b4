"""Every API list and detail endpoint and every page that reads the database runs the same number of queries with
N rows as with 3N (tests/support/querycount.py): jobs (pending, running, ended, with
attempts and events), projects with members, scheduled budget changes, hosts, ledger
hours and API tokens all grow between the two measurements. (Not here: the planner's
scenario pages, which read scenario files; the answers to writes; the admin; the sign-in
page and the API schema, which read nothing that grows.)

Every request is measured in one world, built once (`measured`, in a transaction rolled
back at its end): the API lists with 3 rows of every kind and with 9, the details, pages
and probes with 4 and with 10 (as when each test grew a world of its own); each test then
compares its request's two measurements. The module is one xdist group (tests/conftest.py).

A task a request queues (the queue page's ETA refresh) is not run inside the request,
as a worker runs it (tests/support/querycount.py says why: a flaky count); the tasks are
measured on their own, with 4 and 10 rows (`TASKS`)."""

from __future__ import annotations

import datetime as dt
import itertools

import pytest
from django.db import transaction
from django.test import Client
from django.urls import URLResolver, get_resolver
from django.utils import timezone
from rest_framework.test import APIClient

from accounts.services import token_create
from budgets.models import BudgetEvent
from budgets.services import budget_change_create, membership_add, node_create
from scheduler.models import Job, JobState, Preview
from scheduler.services.previews import preview_request, preview_run
from scheduler.tasks import refresh_etas, run_cycle
from tests.dashboards import data
from tests.factories import ClusterFactory, HostFactory, SuperUserFactory, UserFactory
from tests.support.live import Live
from tests.support.memcluster import MemoryCluster
from tests.support.querycount import assert_same_count, count_queries
from tests.support.tree import example_tree

# (the tests compare numbers only; the mark has the test database set up for `measured`)
pytestmark = pytest.mark.django_db

_serial = itertools.count()


class Rows:
    """A live 4 x 8-GPU cluster with the example tree; `grow(n)` adds n of every kind of row."""

    def __init__(self, tree):
        run_cycle.worker.reset()
        now = timezone.now().replace(microsecond=0)
        self.cluster = ClusterFactory(name="live", host_count=4, gpus_per_host=8, grace_s=30)
        self.live = Live(
            cluster=self.cluster,
            memory=MemoryCluster.of(4, 8, now),
            tree=tree,
            user=UserFactory(username="ann"),
        )
        self.tree = tree
        self.root = SuperUserFactory(username="root")
        self.other = ClusterFactory(name="other", host_count=1, gpus_per_host=8)
        self.hours = 0
        self.live.cycle()

    def grow(self, n: int) -> None:
        live, tree = self.live, self.tree
        for _ in range(n):
            k = next(_serial)
            for project in ("a1", "a2", "b1"):
                live.submit(project, gpus=1 + k % 2, name=f"j{k}", duration_s=120 + 60 * (k % 3))
            live.submit("b1", gpus=32, name=f"big{k}")  # waits in the queue
            project = node_create(
                actor=None, parent_id=tree.node("prog-b").pk, name=f"p{k}", reason="growth"
            )
            user = UserFactory(username=f"member{k}")
            membership_add(actor=None, node_id=project.pk, username=user.username, role="member")
            budget_change_create(
                actor=self.root,
                reason="later",
                changes=[{"node": project.pk, "weight": "2"}],
                effective_at=timezone.now() + dt.timedelta(days=1 + k),
            )
            HostFactory(cluster=self.other, name=f"o{k:03d}")
            token_create(user=self.root, name=f"t{k}")
            token_create(user=tree.user("ann"), name=f"t{k}")
            data.project_hours(
                self.cluster,
                project,
                24,
                allocated_gpu_h=1.0,
                entitled_gpu_h=1.0,
                measured_gpu_h=1.0,
                utilized_gpu_h=0.5,
            )
        live.cycle(advance_s=30)
        live.cycle(advance_s=150)  # some end, others start
        for i in range(n):
            live.submit("a2", gpus=8, name=f"later{i}")  # pending until the next cycle

    def preview(self) -> Preview:
        """A finished what-if preview of prog-a's weights on the live cluster (made once)."""
        found = Preview.objects.order_by("pk").first()
        if found is None:
            found = preview_request(
                actor=self.root,
                node=self.tree.node("prog-a").pk,
                weights=[{"node": self.tree.node("a1").pk, "weight": 3}],
                cluster="live",
            )
            found = preview_run(preview_id=found.pk, parallel=False)
        return found

    def job(self, state: str | None = None) -> Job:
        jobs = Job.objects.filter(cluster=self.cluster).order_by("pk")
        return (jobs.filter(state=state) if state else jobs).first()


def api(user) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {token_create(user=user, name='q')[1]}")
    return client


def page(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


API_LISTS = [
    "/api/v1/auth/tokens/",
    "/api/v1/nodes/",
    "/api/v1/tree/",
    "/api/v1/budget-changes/",
    "/api/v1/memberships/",
    "/api/v1/jobs/",
    "/api/v1/jobs/?state=running",
    "/api/v1/queue/?cluster=live",
    "/api/v1/queue/?cluster=live&limit=50",
    "/api/v1/clusters/",
    "/api/v1/hosts/",
    "/api/v1/usage/",
    "/api/v1/occupancy/?cluster=live",
    "/api/v1/fairshare/?cluster=live",
    "/api/v1/waits/?cluster=live",
]
API_DETAILS = {
    "job": lambda r: f"/api/v1/jobs/{r.job(JobState.RUNNING).pk}/",
    "pending job": lambda r: f"/api/v1/jobs/{r.job(JobState.PENDING).pk}/",
    "node": lambda r: f"/api/v1/nodes/{r.tree.node('prog-a').pk}/",
    "cluster": lambda r: f"/api/v1/clusters/{r.cluster.pk}/",
    "host": lambda r: f"/api/v1/hosts/{r.other.hosts.order_by('pk').first().pk}/",
    "budget change": lambda r: f"/api/v1/budget-changes/{BudgetEvent.objects.first().pk}/",
    "preview": lambda r: f"/api/v1/previews/{r.preview().pk}/",
}
PAGES = {
    "home": "/",  # a redirect to the user's first page
    "tree": "/budgets/",
    "edit": lambda r: f"/budgets/nodes/{r.tree.node('prog-a').pk}/edit/",
    "history": "/budgets/history/",
    "job": lambda r: f"/jobs/{r.job(JobState.RUNNING).pk}/",
    "pending job": lambda r: f"/jobs/{r.job(JobState.PENDING).pk}/",
    "waiting": lambda r: f"/jobs/{r.job(JobState.PENDING).pk}/waiting/",
    "now": "/now/",
    "planner list": "/planner/",
    "dashboard": "/dashboards/?days=7&step=hour",
    "occupancy": "/dashboards/occupancy/",
    "delivery": "/dashboards/delivery/",
    "efficiency": "/dashboards/efficiency/",
    "fairshare": "/dashboards/fairshare/",
    "waits": "/dashboards/waits/",
    "me": "/me/",
    "my tokens": "/me/tokens/",
    "queue": lambda r: f"/clusters/{r.cluster.pk}/queue/",
    "queue page 2": lambda r: f"/clusters/{r.cluster.pk}/queue/?page=2&running_page=2",
    "queue filtered": lambda r: f"/clusters/{r.cluster.pk}/queue/?project=org/prog-b&mine=1",
    "queue home": "/queue/?cluster=live",
    "what-if status": lambda r: f"/budgets/whatif/{r.preview().pk}/",
}
PROBES = ["/healthz", "/healthz/web", "/metrics"]
# The background tasks the pages ask for, run as a worker runs them.
TASKS = {"eta refresh": lambda r: refresh_etas(r.cluster.pk)}
# The routes measured nowhere above, and why: the rest of the URLconf must be measured
# (test_every_route_that_reads_is_measured), so a new list, detail or page cannot be missed.
NOT_MEASURED = {
    "accounts/login/": "the sign-in page reads nothing that grows",
    "accounts/logout/": "a write (POST)",
    "budgets/nodes/<int:node_id>/preview/": "a write's preview (POST only)",
    "budgets/scheduled/<int:event_id>/cancel/": "a write (POST only)",
    "budgets/nodes/<int:node_id>/whatif/": "a write (POST only)",
    "planner/<slug:name>/": "reads a scenario file, not the database",
    "api/v1/auth/token/": "a write (POST only)",
    "api/v1/auth/tokens/<str:token_key>/": "a write (DELETE only)",
    "me/tokens/<str:token_key>/revoke/": "a write (POST only)",
    "me/tokens/revoke-all/": "a write (POST only)",
    "api/v1/budget-changes/<int:event_id>/cancel/": "a write (POST only)",
    "api/v1/memberships/<int:membership_id>/": "a write (DELETE only)",
    "api/v1/jobs/<int:job_id>/cancel/": "a write (POST only)",
    "api/v1/clusters/<int:cluster_id>/metrics/": "a write (PATCH only)",
    "api/v1/previews/": "a write (POST only)",
    "favicon.ico": "a static file",
    "api/schema/": "the API schema reads nothing that grows",
    "api/docs/": "a static page",
}
USERS = ["root", "ann"]


def _requests(rows: Rows) -> tuple[dict, dict]:
    """The requests measured with 3 and 9 rows (the API lists) and those measured with 4
    and 10 (details, pages, probes): key -> (client, url or url maker, statuses)."""
    apis = {user: api(rows.tree.user(user)) for user in USERS}
    pages = {user: page(rows.tree.user(user)) for user in [*USERS, "lead-a"]}
    lists = {
        ("list", url, user): (apis[user], url, (200, 302)) for url in API_LISTS for user in USERS
    }
    later = {
        ("detail", what): (apis["root"], make, (200, 302)) for what, make in API_DETAILS.items()
    }
    for what, url in PAGES.items():
        for user in USERS:
            reader = "lead-a" if what in ("edit", "what-if status") and user == "ann" else user
            later[("page", what, user)] = (pages[reader], url, (200, 302))  # lead-a may edit prog-a
    # the health probe answers 503 while the idle second cluster has no cycle
    later.update({("probe", url): (Client(), url, (200, 503)) for url in PROBES})
    return lists, later


def _measure(rows: Rows, requests: dict, out: dict, size: str) -> None:
    """Each request's queries, into out[key][size] (or why the request failed)."""
    for key, (client, url, statuses) in requests.items():
        try:
            with transaction.atomic():  # a request that fails leaves the world as it was
                queries, route = _queries(rows, client, url, statuses, warm=size == "small")
            out.setdefault(key, {})[size] = queries
            out[key]["route"] = route
        except Exception as failed:  # reported by the request's own test
            out.setdefault(key, {})["failed"] = f"{size}: {failed!r}"


def _measure_tasks(rows: Rows, out: dict, size: str) -> None:
    """Each task's queries, into out[("task", name)][size] (or why it failed)."""
    for what, run in TASKS.items():
        key = ("task", what)
        try:
            with transaction.atomic():
                if size == "small":
                    run(rows)  # first use: per-process caches
                out.setdefault(key, {})[size] = count_queries(lambda run=run: run(rows))
        except Exception as failed:  # reported by the task's own test
            out.setdefault(key, {})["failed"] = f"{size}: {failed!r}"


def _queries(rows: Rows, client, url, statuses, *, warm: bool) -> tuple[list[str], str]:
    """The request's queries and the route that answered it."""
    routes = []

    def request():
        response = client.get(url(rows) if callable(url) else url)
        assert response.status_code in statuses, (response.status_code, response.content[:500])
        routes.append(response.resolver_match.route)

    if warm:
        request()  # first use: content types, permissions and other per-process caches
    return count_queries(request), routes[-1]


@pytest.fixture(scope="module")
def measured(django_db_setup, django_db_blocker) -> dict:
    """Every request's queries with few and with three times as many rows, in one world
    built once: {key: {"small": [sql], "large": [sql], "route": route}, or with "failed": why}."""
    out: dict = {}
    with django_db_blocker.unblock(), transaction.atomic():
        rows = Rows(example_tree())
        lists, later = _requests(rows)
        rows.grow(3)
        _measure(rows, lists, out, "small")  # 3 rows of every kind
        rows.grow(1)
        _measure(rows, later, out, "small")  # 4
        _measure_tasks(rows, out, "small")
        rows.grow(5)
        _measure(rows, lists, out, "large")  # 9
        rows.grow(1)
        _measure(rows, later, out, "large")  # 10
        _measure_tasks(rows, out, "large")
        transaction.set_rollback(True)
    run_cycle.worker.reset()  # its warm state names the rows rolled back
    return out


def check(measured: dict, key: tuple, n: int, large_n: int) -> None:
    found = measured[key]
    assert "failed" not in found, found.get("failed")
    assert_same_count(found["small"], found["large"], n, large_n)


@pytest.mark.parametrize("user", USERS)
@pytest.mark.parametrize("url", API_LISTS)
def test_api_lists(measured, url, user):
    check(measured, ("list", url, user), 3, 9)


@pytest.mark.parametrize("what", list(API_DETAILS))
def test_api_details(measured, what):
    check(measured, ("detail", what), 4, 10)


@pytest.mark.parametrize("user", USERS)
@pytest.mark.parametrize("what", list(PAGES))
def test_pages(measured, what, user):
    check(measured, ("page", what, user), 4, 10)


@pytest.mark.parametrize("url", PROBES)
def test_probes(measured, url):
    """The health probe (503 while the idle second cluster has no cycle) and the
    Prometheus scrape, whose state collectors read jobs and GPUs by cluster and project."""
    check(measured, ("probe", url), 4, 10)


@pytest.mark.parametrize("what", list(TASKS))
def test_tasks(measured, what):
    """The tasks the pages queue, as a worker runs them (not inside the request)."""
    check(measured, ("task", what), 4, 10)


def _routes(patterns, prefix: str = "") -> list[str]:
    """Every route of the URLconf but the admin's, as `resolver_match.route` writes it."""
    found = []
    for pattern in patterns:
        route = prefix + str(pattern.pattern)
        if isinstance(pattern, URLResolver):
            if not route.startswith("admin/"):
                found += _routes(pattern.url_patterns, route)
        else:
            found.append(route)
    return found


def test_every_route_that_reads_is_measured(measured):
    """Each route is measured above or named in NOT_MEASURED with its reason."""
    measured_routes = {found["route"] for found in measured.values() if "route" in found}
    routes = set(_routes(get_resolver().url_patterns))
    assert routes - measured_routes - set(NOT_MEASURED) == set()
    assert set(NOT_MEASURED) <= routes - measured_routes  # no stale or measured exception
