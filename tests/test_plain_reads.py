"""The hot reads written as plain SQL (config.plainsql, issue 28) give what the ORM gives:
the same field values, JSON and decimals and times converted, the related objects
attached; and the CSP header built once per process (config.csp) is django-csp's."""

from __future__ import annotations

import datetime as dt

import pytest
from csp.exceptions import CSPNonceError
from csp.utils import build_policy
from django.contrib.sessions.models import Session
from django.db import connection
from django.db.models import Model
from django.db.models.signals import post_init
from django.http import HttpResponse
from django.test import Client, RequestFactory
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from accounts.authentication import BearerOrTokenAuthentication
from accounts.services import token_create
from budgets import permissions
from budgets.models import BudgetNode, Membership
from budgets.selectors import node_paths, tree_index, tree_version
from config.csp import CSPMiddleware
from config.plainsql import columns, fetch_all, instance
from config.sessions import SessionStore
from scheduler.models import Attempt, Job, JobEvent
from scheduler.selectors.clusters import cluster_list, resolve_cluster
from scheduler.selectors.job_reads import job_events
from scheduler.selectors.jobs import job_attempts, job_detail
from tests.factories import AttemptFactory, JobFactory, MembershipFactory, UserFactory


def values(obj: Model) -> dict:
    return {f.attname: getattr(obj, f.attname) for f in obj._meta.concrete_fields}


@pytest.mark.django_db
def test_a_job_read_plainly_is_the_orms_with_its_relations_and_attempts():
    job = JobFactory(spec={"image": "pytorch:2.5", "env": {"SEED": "1"}}, gpus=2)
    AttemptFactory(
        job=job, number=2, attempt_id="b", placements=[{"host": "h1", "gpu_indices": [0, 1]}]
    )
    AttemptFactory(job=job, number=1, attempt_id="a", state="ended", ended_at=timezone.now())
    orm = Job.objects.select_related("submitter", "cluster", "project").get(pk=job.pk)

    plain = job_detail(job_id=job.pk)

    assert values(plain) == values(orm) and plain.spec == {
        "image": "pytorch:2.5",
        "env": {"SEED": "1"},
    }
    for relation in ("submitter", "cluster", "project"):
        assert values(getattr(plain, relation)) == values(getattr(orm, relation))
    assert not plain._state.adding and plain._state.db == "default"
    expected = [values(a) for a in Attempt.objects.filter(job=job).order_by("number")]
    assert [values(a) for a in job_attempts(plain)] == expected
    assert [a.attempt_id for a in job_attempts(plain)] == ["a", "b"]
    assert job_detail(job_id=job.pk + 1000) is None


@pytest.mark.django_db
def test_a_jobs_events_read_with_it_are_the_events_statements():
    """`job_detail` brings the job's events (JSON in its statement); they are what the
    events' own statement gives, times included (to the microsecond, any number of
    digits), in the same order, for the API and the page alike."""
    job = JobFactory(gpus=2)
    attempt = AttemptFactory(job=job, number=1, attempt_id="a")
    other = JobFactory(project=job.project, cluster=job.cluster)
    at = timezone.now().replace(microsecond=120000)
    JobEvent.objects.create(job=job, at=at, to_state="pending", reason="submitted")
    JobEvent.objects.create(
        job=job, at=at + dt.timedelta(microseconds=5), from_state="pending",
        to_state="running", reason="started", attempt=attempt, actor_name="x",
    )  # fmt: skip
    JobEvent.objects.create(
        job=job, at=at + dt.timedelta(seconds=1, microseconds=123456), from_state="running",
        to_state="pending", reason="preempted", attempt=attempt, preempting_job=other,
        preempting_project=job.project, rule="fairshare",
    )  # fmt: skip
    plain = job_detail(job_id=job.pk)
    read = [{**e} for e in job_events(plain)]
    del plain.events_read  # the events' own statement
    assert read == job_events(plain) and len(read) == 3
    assert [e["at"] for e in read] == [
        at,
        at + dt.timedelta(microseconds=5),
        at + dt.timedelta(seconds=1, microseconds=123456),
    ]
    assert read[2]["attempt"] == 1 and read[2]["preempting_job"] == other.pk
    assert job_detail(job_id=other.pk).events_read == []


@pytest.mark.django_db
def test_a_plain_instance_is_what_from_db_builds_and_init_runs_when_someone_listens():
    """`instance` fills the attributes directly; the object is `Model.from_db`'s
    (same attributes, same state) and saves like one. With a `post_init` receiver
    connected it goes through `from_db`, so the receiver sees the object."""
    job = JobFactory(spec={"image": "x"}, gpus=4)
    sql = f'SELECT {columns(Job, "j")} FROM "{Job._meta.db_table}" j WHERE j.id = %s'
    row = fetch_all(sql, [job.pk])[0]
    plain, end = instance(Job, row)
    built = Job.objects.get(pk=job.pk)  # through from_db
    assert end == len(Job._meta.concrete_fields) and type(plain) is Job
    assert {k: v for k, v in plain.__dict__.items() if k != "_state"} == {
        k: v for k, v in built.__dict__.items() if k != "_state"
    }
    assert (plain._state.adding, plain._state.db) == (False, "default")
    assert plain.cluster == job.cluster and plain.project_id == job.project_id
    plain.name = "renamed"
    plain.save(update_fields=["name"])
    assert Job.objects.get(pk=job.pk).name == "renamed"
    seen = []

    def listener(sender, instance, **kwargs):
        seen.append(instance)

    post_init.connect(listener, sender=Job)
    try:
        through_init, _ = instance(Job, row)
    finally:
        post_init.disconnect(listener, sender=Job)
    assert seen == [through_init] and values(through_init) == values(built)


@pytest.mark.django_db
def test_a_job_read_plainly_brings_its_projects_path_as_node_paths_gives_it(tree):
    job = JobFactory(project=tree.node("a1"))
    assert job_detail(job_id=job.pk).project_path == node_paths()[job.project_id] == "org/prog-a/a1"


@pytest.mark.django_db
def test_clusters_and_the_tree_read_plainly_are_the_orms(tree):
    job = JobFactory(project=tree.node("a1"))
    assert [values(c) for c in cluster_list()] == [values(job.cluster)]
    assert values(resolve_cluster(job.cluster.name)) == values(job.cluster)
    index = tree_index(with_people=True)
    assert [values(n) for n in index.nodes.values()] == [
        values(n) for n in BudgetNode.objects.order_by("name")
    ]
    assert index.members and index.managers
    assert tree_version() >= 0


@pytest.mark.django_db
def test_a_cluster_named_by_digits_is_read_in_one_statement_its_name_first():
    """The dashboards' chart requests name their cluster by id: one statement finds it,
    and a cluster whose name is those digits still wins over the one with that id."""
    from config.errors import NotFound
    from tests.factories import ClusterFactory

    first = ClusterFactory(name="h100")
    named = ClusterFactory(name=str(first.pk))
    with CaptureQueriesContext(connection) as queries:
        assert resolve_cluster(str(named.pk), missing=NotFound).pk == named.pk
    assert len(queries) == 1
    assert resolve_cluster(str(first.pk)).pk == named.pk  # the name "<first.pk>" wins
    with pytest.raises(NotFound):
        resolve_cluster(str(named.pk + 1000), missing=NotFound)
    with pytest.raises(NotFound):
        resolve_cluster("9" * 30, missing=NotFound)  # beyond bigint: no error from the database


def directives(header: str) -> set[str]:
    return {part.strip() for part in header.split(";")}


def test_the_csp_header_is_django_csps_and_follows_the_settings(settings):
    client = Client()
    header = client.get("/favicon.ico")["Content-Security-Policy"]
    assert directives(header) == directives(build_policy())
    assert "script-src 'self'" in header and "frame-ancestors 'none'" in header
    settings.CONTENT_SECURITY_POLICY = {"DIRECTIVES": {"default-src": ["'none'"]}}
    assert client.get("/favicon.ico")["Content-Security-Policy"] == "default-src 'none'"


def test_a_response_that_used_a_nonce_names_it_and_a_late_nonce_is_refused():
    def view(request):
        return HttpResponse(f"<script nonce='{request.csp_nonce}'></script>")

    request = RequestFactory().get("/page/")
    middleware = CSPMiddleware(view)
    middleware.process_request(request)
    response = middleware.process_response(request, view(request))
    assert f"'nonce-{request._csp_nonce}'" in response["Content-Security-Policy"]

    plain = RequestFactory().get("/api/v1/jobs/")
    middleware.process_request(plain)
    middleware.process_response(plain, HttpResponse("{}"))
    with pytest.raises(CSPNonceError):
        str(plain.csp_nonce)


@pytest.mark.django_db
def test_a_session_read_plainly_keeps_its_data_and_its_expiry():
    store = SessionStore()
    store["who"] = "ann"
    store.create()
    assert SessionStore(store.session_key).load() == {"who": "ann"}
    Session.objects.filter(session_key=store.session_key).update(
        expire_date=timezone.now() - dt.timedelta(seconds=1)
    )
    expired = SessionStore(store.session_key)
    assert expired.load() == {} and expired.session_key is None


@pytest.mark.django_db
def test_a_token_read_brings_its_users_roles_and_a_write_reads_them_afresh(tree):
    member = MembershipFactory(node=tree.node("a1")).user
    MembershipFactory(user=member, node=tree.node("prog-b"), role="manager")
    roleless = UserFactory()
    expected = sorted(Membership.objects.filter(user=member).values_list("node_id", "role"))
    auth = BearerOrTokenAuthentication()

    token = token_create(user=member, name="t")[1].encode()

    with permissions.roles_read_once(), CaptureQueriesContext(connection) as read:
        user, _ = auth.authenticate_credentials(token)
        assert sorted(permissions._roles(user)) == expected
        assert permissions.is_participant(user)
    assert len(read.captured_queries) == 1  # the token's statement brought the roles

    with permissions.roles_read_once():
        user, _ = auth.authenticate_credentials(token_create(user=roleless, name="t")[1].encode())
        assert permissions._roles(user) == [] and not permissions.is_participant(user)

    user, _ = auth.authenticate_credentials(token_create(user=member, name="w")[1].encode())
    Membership.objects.filter(user=member).delete()
    assert permissions._roles(user) == []  # outside a read: asked afresh


@pytest.mark.django_db
def test_times_read_through_psycopgs_own_loader_are_djangos():
    job = JobFactory(submitted_at=dt.datetime(2026, 3, 1, 12, 30, 5, 250, tzinfo=dt.UTC))
    sql = f"SELECT submitted_at, queued_at FROM {Job._meta.db_table} WHERE id = %s"
    django_read = fetch_all(sql, [job.pk])
    native = fetch_all(sql, [job.pk], native_times=True)
    assert native == django_read and native[0][0] == job.submitted_at
    assert [t.tzinfo for t in native[0] if t] == [t.tzinfo for t in django_read[0] if t]
