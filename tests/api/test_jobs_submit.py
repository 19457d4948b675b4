"""POST /api/v1/jobs/: who may submit, what is stored, bad input for every field,
arrays and dry runs."""

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from pghistory.models import Context

from budgets.models import BudgetNode
from budgets.services import budget_change_create
from scheduler.models import IdempotencyKey, Job, JobEvent, JobState
from tests.api.conftest import job_body

pytestmark = pytest.mark.django_db

URL = "/api/v1/jobs/"


def post(client, user, body, **kwargs):
    client.force_authenticate(user)
    return client.post(URL, body, format="json", **kwargs)


@pytest.mark.parametrize(
    ("username", "allowed"),
    [
        ("ann", True),  # member of a1
        ("pi-a1", True),  # manager of a1 itself
        ("lead-a", True),  # manager of prog-a, above a1
        ("ceo", True),  # manager of the root
        ("root", True),  # superuser
        ("bob", False),  # member of another project (a2)
        ("lead-b", False),  # manager of another program
        ("ops", False),  # staff but no role in the tree
        ("nobody", False),
    ],
)
def test_who_may_submit_to_a_project(world, api_client, username, allowed):
    response = post(api_client, world.user(username), job_body())
    if allowed:
        assert response.status_code == 201, response.json()
        job = Job.objects.get()
        assert job.submitter.username == username and job.state == JobState.PENDING
    else:
        assert response.status_code == 403
        body = response.json()
        if username == "nobody":  # no role at all: refused before the project is read
            assert "no role" in body["detail"]
        else:
            assert body["field"] == "project" and "org/prog-a/a1" in body["detail"]
        assert not Job.objects.exists()


def test_anonymous_submissions_are_refused(world, api_client):
    response = api_client.post(URL, job_body(), format="json")
    assert response.status_code == 401
    assert not Job.objects.exists()


def test_a_submission_is_stored_pending_with_its_first_event(world, api_client):
    response = post(api_client, world.user("ann"), job_body())
    assert response.status_code == 201
    body = response.json()
    assert body["count"] == 1 and body["replayed"] is False and body["array_id"] is None
    row = body["jobs"][0]
    job = Job.objects.get(pk=row["id"])
    assert (job.project, job.cluster) == (world.tree.node("a1"), world.cluster)
    assert (job.gpus, job.min_runtime_s, job.resumable, job.priority) == (8, 3600, True, 1)
    assert job.spec == {"image": "pytorch:2.5", "command": "python train.py", "env": {"SEED": "1"}}
    assert row["project_path"] == "org/prog-a/a1" and row["cluster_name"] == "gpu"
    assert row["allocated"] is True and row["state"] == "pending" and row["spec"] == job.spec
    assert (job.array_id, job.array_index, job.attempt_count, job.progress_s) == (None, None, 0, 0)
    assert job.submitted_at == job.queued_at and job.first_started_at is job.ended_at is None
    assert job.submitter.username == "ann" and job.state_reason == "submitted"
    (event,) = JobEvent.objects.filter(job=job)
    assert (event.from_state, event.to_state, event.actor_name) == ("", "pending", "ann")
    assert (event.actor, event.reason_code, event.at) == (
        job.submitter,
        "submitted",
        job.submitted_at,
    )
    assert event.attempt is event.cycle is event.preempting_job is None


def test_project_and_cluster_by_id_work_like_path_and_name(world, api_client):
    a1 = world.tree.node("a1")
    response = post(
        api_client, world.user("ann"), job_body(project=a1.pk, cluster=world.cluster.pk)
    )
    assert response.status_code == 201
    assert Job.objects.get().project == a1


def test_a_project_named_by_its_slug_alone_is_found_when_one_project_has_it(world, api_client):
    """Like Slurm's `-A account`: "a1" is org/prog-a/a1, the one project with that slug."""
    response = post(api_client, world.user("ann"), job_body(project="a1"))
    assert response.status_code == 201, response.json()
    assert response.json()["jobs"][0]["project_path"] == "org/prog-a/a1"
    assert Job.objects.get().project == world.tree.node("a1")


def test_a_slug_several_projects_share_is_refused_with_their_paths(world, api_client):
    prog_b = world.tree.node("prog-b")
    BudgetNode.objects.create(parent=prog_b, name="a1", slug="a1", weight=1)
    response = post(api_client, world.user("ann"), job_body(project="a1"))
    assert response.status_code == 400
    body = response.json()
    assert body["field"] == "project"
    assert "'a1' names 2 projects (org/prog-a/a1, org/prog-b/a1)" in body["detail"]
    response = post(api_client, world.user("ann"), job_body(project="prog-a"))
    assert response.status_code == 400 and "not a project" in response.json()["detail"]
    response = post(api_client, world.user("ann"), job_body(project="nowhere"))
    assert response.status_code == 400
    # a name of one part may have been meant as a slug alone: the refusal says both work
    assert response.json()["detail"] == (
        "There is no project at the path 'nowhere' (paths are slugs from the root, like "
        "'org/program/project', or a project's slug alone, like 'project')."
    )
    assert not Job.objects.exists()


def test_a_submission_asks_for_a_cycle_after_commit(
    world, api_client, django_capture_on_commit_callbacks
):
    from scheduler import cycle_requests

    asked = []
    original = cycle_requests.enqueue_cycle
    cycle_requests.enqueue_cycle = asked.append
    try:
        with django_capture_on_commit_callbacks(execute=True):
            assert post(api_client, world.user("ann"), job_body()).status_code == 201
    finally:
        cycle_requests.enqueue_cycle = original
    assert asked == [world.cluster.pk]


# ---------------------------------------------------------------- bad input


BAD_FIELDS = [
    ("project", "org/prog-a/zz", "no project"),
    ("project", 999999, "no project"),
    ("project", "org/prog-a", "not a project"),  # a program, not a leaf
    ("project", True, "id"),
    ("project", ["a1"], "id"),
    ("project", "", "id"),
    ("cluster", "nope", "no cluster"),
    ("cluster", 999999, "no cluster"),
    ("cluster", None, "may not be null"),
    ("cluster", {"id": 1}, "id or name"),
    ("gpus", 3, "power of two"),
    ("gpus", 12, "no placement"),  # more than a host, not a multiple of 8
    ("gpus", 40, "no placement"),  # 5 whole hosts; the cluster has 4
    ("gpus", 0, "greater than or equal to 1"),
    ("gpus", "eight", "valid integer"),
    ("gpus", 1.5, "valid integer"),
    ("gpus", None, "may not be null"),
    ("min_runtime_s", -1, "greater than or equal to 0"),
    ("min_runtime_s", 8 * 3600 + 1, "between 0 and 28800"),
    ("min_runtime_s", "15m", "valid integer"),
    ("resumable", "maybe", "valid boolean"),
    ("priority", 1001, "less than or equal to 1000"),
    ("priority", [], "valid integer"),
    ("kind", "party", "not a kind of job; one of debug, training"),
    ("name", "", "may not be blank"),
    ("name", "x" * 201, "no more than 200"),
    ("name", "bad\x1bname", "control"),
    ("name", 12, "must be text"),
    ("spec", "python train.py", "must be an object"),
    ("spec", {"cmd": "x"}, "unknown key"),
    ("spec", {"env": {"1X": "a"}}, "variable name"),
    ("spec", {"env": {"SEED": 1}}, "must be text"),
    ("spec", {"env": ["A=1"]}, "object of names"),
    ("spec", {"image": 5}, "must be text"),
    ("spec", {"command": "x" * 10_001}, "at most 10000"),
    ("duration_s", 0, "greater than or equal to 1"),
    ("duration_s", "long", "valid integer"),
    ("array", 0, "greater than or equal to 1"),
    ("array", 10_001, "less than or equal to 10000"),
    ("array", "many", "valid integer"),
]


@pytest.mark.parametrize(("field", "value", "words"), BAD_FIELDS)
def test_bad_input_is_a_400_naming_the_field(world, api_client, field, value, words):
    response = post(api_client, world.user("ann"), job_body(**{field: value}))
    assert response.status_code == 400, response.json()
    body = response.json()
    assert body["field"].split(".")[0] == field, body
    assert words.lower() in body["detail"].lower(), body
    assert not Job.objects.exists()


@pytest.mark.parametrize("field", ["project", "cluster", "gpus", "min_runtime_s"])
def test_missing_required_fields_are_named(world, api_client, field):
    body = job_body()
    del body[field]
    response = post(api_client, world.user("ann"), body)
    assert response.status_code == 400
    assert response.json()["field"] == field


@pytest.mark.parametrize("payload", ["not json", "[1, 2]", "null", '{"gpus": '])
def test_a_body_that_is_not_an_object_is_a_400(world, api_client, payload):
    api_client.force_authenticate(world.user("ann"))
    response = api_client.post(URL, payload, content_type="application/json")
    assert response.status_code == 400
    assert not Job.objects.exists()


def test_gpu_rules_follow_the_hosts_the_cluster_has(world, api_client):
    ann = world.user("ann")
    for gpus in (1, 2, 4, 8, 16, 32):
        assert post(api_client, ann, job_body(gpus=gpus)).status_code == 201, gpus
    world.hosts[0].delete()  # 3 hosts left: 32 GPUs no longer fit
    response = post(api_client, ann, job_body(gpus=32))
    assert response.status_code == 400 and response.json()["field"] == "gpus"
    assert "3 hosts of 8 GPUs" in response.json()["detail"]


def test_an_allocated_job_in_a_zero_weight_project_says_why_and_what_to_do(world, api_client):
    b1 = world.tree.node("b1")
    budget_change_create(
        actor=world.user("lead-b"), reason="pause", changes=[{"node": b1.pk, "weight": 0}]
    )
    lead = world.user("lead-b")
    response = post(api_client, lead, job_body(project="org/prog-b/b1"))
    assert response.status_code == 400
    body = response.json()
    assert body["field"] == "min_runtime_s"
    assert "weight 0" in body["detail"] and "min_runtime_s 0" in body["detail"]
    assert "program lead" in body["detail"]
    # unallocated work is welcome
    assert (
        post(api_client, lead, job_body(project="org/prog-b/b1", min_runtime_s=0)).status_code
        == 201
    )


def test_the_cluster_cap_on_min_runtime_is_the_clusters_own(world, api_client):
    world.cluster.max_min_runtime_s = 900
    world.cluster.save()
    response = post(api_client, world.user("ann"), job_body(min_runtime_s=901))
    assert response.status_code == 400 and "up to 900" in response.json()["detail"]
    assert post(api_client, world.user("ann"), job_body(min_runtime_s=900)).status_code == 201


# ---------------------------------------------------------------- arrays


def test_an_array_submits_n_jobs_in_bulk(world, api_client):
    with CaptureQueriesContext(connection) as queries:
        response = post(api_client, world.user("ann"), job_body(array=500))
    assert response.status_code == 201
    body = response.json()
    assert body["count"] == 500 and len(body["jobs"]) == 500 and body["array_id"]
    jobs = Job.objects.filter(array_id=body["array_id"])
    assert jobs.count() == 500
    assert sorted(jobs.values_list("array_index", flat=True)) == list(range(500))
    assert JobEvent.objects.filter(job__in=jobs, to_state="pending").count() == 500
    assert len(queries) < 30  # bulk inserts, not one per job


# ---------------------------------------------------------------- dry run


def test_a_dry_run_validates_estimates_and_stores_nothing(world, api_client):
    response = post(api_client, world.user("ann"), job_body(), QUERY_STRING="dry_run=1")
    assert response.status_code == 200, response.json()
    body = response.json()
    assert body["dry_run"] is True and body["job"]["project_path"] == "org/prog-a/a1"
    assert body["estimate"]["starts_now"] is True  # the cluster is empty
    assert not Job.objects.exists() and not JobEvent.objects.exists()


def test_a_dry_run_behind_a_full_cluster_gives_a_position_and_reason(world, api_client):
    ann = world.user("ann")
    from django.utils import timezone

    from tests.support.live import submit_job

    now = timezone.now()
    for _ in range(6):  # 6 whole-host jobs on a 4-host cluster, nothing running
        submit_job(cluster=world.cluster, project=world.tree.node("a1"), user=ann, at=now, gpus=8)
    response = post(api_client, ann, job_body(gpus=8, priority=0), QUERY_STRING="dry_run=1")
    estimate = response.json()["estimate"]
    assert estimate["starts_now"] is False
    assert estimate["position"] == 3 and estimate["project_position"] == 3
    assert estimate["reason"] and estimate["queue_length"] == 3
    assert Job.objects.count() == 6


def test_a_dry_run_checks_input_like_a_submission(world, api_client):
    response = post(api_client, world.user("ann"), job_body(gpus=3), QUERY_STRING="dry_run=1")
    assert response.status_code == 400 and response.json()["field"] == "gpus"
    response = post(api_client, world.user("bob"), job_body(), QUERY_STRING="dry_run=1")
    assert response.status_code == 403


def test_a_dry_run_with_an_idempotency_key_stores_no_key(world, api_client):
    post(
        api_client,
        world.user("ann"),
        job_body(),
        QUERY_STRING="dry_run=1",
        HTTP_IDEMPOTENCY_KEY="k1",
    )
    assert not IdempotencyKey.objects.exists()


def test_a_submission_enters_no_audit_context(world, api_client):
    """It changes no model pghistory tracks, so its statements carry no context
    (config.middleware.HistoryMiddleware)."""
    contexts = Context.objects.count()
    with CaptureQueriesContext(connection) as queries:
        assert post(api_client, world.user("ann"), job_body()).status_code == 201
    assert not any("pghistory" in query["sql"] for query in queries.captured_queries)
    assert Context.objects.count() == contexts


@pytest.mark.parametrize(
    ("field", "value"),
    [("cluster", "gp\x00u"), ("project", "org/prog-a/a\x001"), ("cluster", "_p\x11\x00")],
)
def test_a_nul_in_the_project_or_cluster_is_a_400_naming_it(world, api_client, field, value):
    """The fuzzer's `"cluster": "_p\\x11...\\x00"` reached the one-statement lookup of the
    project and cluster, and PostgreSQL refused the NUL: a 500. It is refused as any
    control character is, naming the field, and nothing is stored."""
    response = post(api_client, world.user("ann"), job_body(**{field: value}))
    assert response.status_code == 400, response.content
    assert response.json()["field"] == field
    assert not Job.objects.exists()
