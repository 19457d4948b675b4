"""What a request costs the database (issue 28): a submission with an Idempotency-Key is
one INSERT statement (the key check, the jobs, their events and the key together), and a
read-only request reads the user's roles once however many permission questions it asks,
while a write reads them afresh (a role granted or removed counts at once)."""

from __future__ import annotations

from typing import Any

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from rest_framework.test import APIClient

from accounts.services import token_create
from budgets.models import Membership
from budgets.services import membership_add
from scheduler.models import IdempotencyKey, Job, JobEvent
from scheduler.services.eta import cluster_etas
from tests.api.conftest import job_body

pytestmark = pytest.mark.django_db


def token_client(user) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {token_create(user=user, name='q')[1]}")
    return client


def statements(request) -> tuple[Any, list[str]]:
    with CaptureQueriesContext(connection) as captured:
        response = request()
    return response, [q["sql"] for q in captured.captured_queries]


def test_a_submission_with_a_key_is_one_statement_and_a_retry_stores_nothing(world):
    client = token_client(world.user("ann"))

    def send():
        return client.post(
            "/api/v1/jobs/", job_body(array=3), format="json", HTTP_IDEMPOTENCY_KEY="one-statement"
        )

    response, sql = statements(send)
    assert response.status_code == 201
    writes = [q for q in sql if "INSERT" in q]
    assert len(writes) == 1
    assert not any("SAVEPOINT" in q for q in sql)
    key = IdempotencyKey.objects.get(key="one-statement")
    ids = [row["id"] for row in response.json()["jobs"]]
    assert key.job_ids == ids
    assert [j.array_index for j in Job.objects.filter(pk__in=ids).order_by("pk")] == [0, 1, 2]
    assert JobEvent.objects.filter(job_id__in=ids, to_state="pending").count() == 3
    # the token with the user's roles, the project's path with the cluster, the insert
    assert len(sql) == 3, sql

    again, _ = statements(send)
    assert again.status_code == 201 and again.json()["replayed"] is True
    assert [row["id"] for row in again.json()["jobs"]] == ids
    assert Job.objects.count() == 3 and IdempotencyKey.objects.count() == 1


@pytest.mark.parametrize(
    ("project", "cluster", "field", "statements_at_most"),
    [
        ("org/prog-a/a1", "gpu", None, 3),
        ("org/prog-a/a1", "nope", "cluster", 5),  # refused: the clusters' names are read
        ("org/prog-a/nope", "gpu", "project", 3),
        ("org/prog-a", "gpu", "project", 3),  # a program, not a project
        ("org/prog-b/b1", "gpu", "project", 4),  # not a member: 403 (managers read)
        ("org/prog-a/a1", 10**30, "cluster", 5),  # beyond bigint: no such cluster
        ("org/prog-a/a1", "", "cluster", 3),
    ],
)
def test_a_submission_reads_its_project_and_cluster_in_one_statement_and_refuses_as_before(
    world, project, cluster, field, statements_at_most
):
    """The project's path and the cluster are one statement; the answers to a missing
    project, a program, a project the user may not use and a missing cluster are the
    ones each field's own check gives, in the order the fields are checked."""
    client = token_client(world.user("ann"))
    body = job_body(project=project, cluster=cluster)
    response, sql = statements(lambda: client.post("/api/v1/jobs/", body, format="json"))
    assert len(sql) <= statements_at_most, sql
    if field is None:
        assert response.status_code == 201
        assert response.json()["jobs"][0]["cluster_name"] == "gpu"
        by_id = client.post("/api/v1/jobs/", job_body(cluster=str(world.cluster.pk)), format="json")
        assert by_id.status_code == 201 and by_id.json()["jobs"][0]["cluster_name"] == "gpu"
        return
    assert response.status_code in (400, 403) and response.json()["field"] == field


def test_a_read_asks_for_the_users_roles_once(world):
    client = token_client(world.user("ann"))
    job_id = client.post("/api/v1/jobs/", job_body(), format="json").json()["jobs"][0]["id"]

    response, sql = statements(lambda: client.get(f"/api/v1/jobs/{job_id}/"))
    assert response.status_code == 200
    assert len([q for q in sql if 'FROM "budgets_membership"' in q]) == 1


def test_a_role_changed_between_requests_counts_at_once(world):
    """The roles read once belong to one request, not to the user: bob, a member of a2
    only, may submit to a1 as soon as he is made a member of it."""
    bob = world.user("bob")
    client = token_client(bob)
    refused = client.post("/api/v1/jobs/", job_body(), format="json")
    assert refused.status_code == 403
    membership_add(actor=None, node_id=world.tree.node("a1").pk, username="bob", role="member")
    assert client.post("/api/v1/jobs/", job_body(), format="json").status_code == 201
    Membership.objects.filter(user=bob).delete()
    assert client.get("/api/v1/jobs/").status_code == 403


def test_a_pending_jobs_read_is_two_statements(live):
    """`GET /api/v1/jobs/{id}/` of a waiting job with cached ETAs: the token with the
    user's roles, and the job with its events and where its cluster's stored queue stands
    (the version this process holds: no queue statement; the cluster's last cycle, which
    the ETA's freshness check needs; whether a budget change falls in its window: none
    here, so no notes' statement); no attempts statement for a job that never started; no
    health-check statement on the connection."""
    waiting = _a1_waits_behind_a2(live)
    cluster_etas(cluster=live.cluster, fresh=True)
    client = token_client(live.user)
    client.get(f"/api/v1/jobs/{waiting.pk}/")  # per-process copies (the stored queue)

    response, sql = statements(lambda: client.get(f"/api/v1/jobs/{waiting.pk}/"))
    body = response.json()
    assert response.status_code == 200 and body["state"] == "pending"
    assert body["queue"]["position"] == 1 and body["eta"]["method"] == "forward-simulation"
    assert len(sql) == 2, sql
    assert not any('FROM "scheduler_attempt" a WHERE' in q for q in sql)
    assert not any("budgets_budgeteventitem" in q for q in sql)
    assert sum("scheduler_cyclerecord" in q for q in sql) == 1  # inside the job's statement


def _a1_waits_behind_a2(live):
    """a2's four protected 8-GPU jobs fill the cluster; an 8-GPU a1 job then waits."""
    for _ in range(4):
        live.submit("a2", gpus=8, min_runtime_s=3600, duration_s=7200)
    live.cycle()
    waiting = live.submit("a1", gpus=8)
    live.cycle(advance_s=60)
    return waiting


def test_a_pending_jobs_read_follows_a_new_queue_at_once(live):
    """The job's statement says which version of the stored queue is current: after a
    cycle rewrote it (a job of a1 with a higher priority now starts first), the next
    read reads the new queue (and the room of the hosts as of it: statements more, that
    once) and shows the new place; the read after that needs no queue statement again."""
    waiting = _a1_waits_behind_a2(live)
    client = token_client(live.user)
    path = f"/api/v1/jobs/{waiting.pk}/"
    assert client.get(path).json()["queue"]["position"] == 1
    live.submit("a1", gpus=8, priority=5)
    live.cycle(advance_s=60)

    response, sql = statements(lambda: client.get(path))
    assert response.json()["queue"]["position"] == 2 and len(sql) > 3, sql
    assert any("scheduler_queuesnapshot" in q and "entries" in q for q in sql)
    again, sql = statements(lambda: client.get(path))
    assert again.json()["queue"] == response.json()["queue"] and len(sql) == 2, sql


def test_a_queue_page_is_three_statements_with_each_rows_project_path(live):
    """`GET /api/v1/queue/?cluster=...&limit=50`: the token with the user's roles, the
    cluster with where its stored queue stands (the version this process holds: no
    queue statement; whether a budget change falls in its window: none here) and the
    page's jobs with the slug paths of their projects, walked up from those projects
    alone (the whole tree is not read)."""
    for _ in range(4):
        live.submit("a2", gpus=8, min_runtime_s=3600, duration_s=7200)
    live.cycle()
    for project in ("a1", "b1", "a2", "a1"):
        live.submit(project, gpus=8)
    live.cycle(advance_s=60)
    client = token_client(live.user)
    path = f"/api/v1/queue/?cluster={live.cluster.name}&limit=50"
    client.get(path)  # per-process copies (the stored queue)

    response, sql = statements(lambda: client.get(path))
    rows = response.json()["results"]
    assert response.status_code == 200 and len(rows) == 4
    expected = {"a1": "org/prog-a/a1", "a2": "org/prog-a/a2", "b1": "org/prog-b/b1"}
    jobs = Job.objects.select_related("project").in_bulk([r["job"] for r in rows])
    assert {r["project_path"] for r in rows} == set(expected.values())
    assert all(r["project_path"] == expected[jobs[r["job"]].project.slug] for r in rows)
    assert len(sql) == 3, sql
    assert not any("scheduler_queuesnapshot" in q and "entries" in q for q in sql)
    assert not any(q.strip().startswith("SELECT id, parent_id, slug FROM") for q in sql)


def test_a_queue_page_follows_a_new_queue_at_once(live):
    """The cluster's statement says which version of the stored queue is current: after
    a cycle rewrote it, the next page reads the new queue and shows the new order; the
    page after that needs no queue statement again."""
    first = _a1_waits_behind_a2(live)
    client = token_client(live.user)
    path = f"/api/v1/queue/?cluster={live.cluster.name}&limit=50"
    assert [r["job"] for r in client.get(path).json()["results"]] == [first.pk]
    urgent = live.submit("a1", gpus=8, priority=5)
    live.cycle(advance_s=60)

    response, sql = statements(lambda: client.get(path))
    assert [r["job"] for r in response.json()["results"]] == [urgent.pk, first.pk]
    assert any("scheduler_queuesnapshot" in q and "entries" in q for q in sql), sql
    again, sql = statements(lambda: client.get(path))
    assert again.json() == response.json() and len(sql) == 3, sql
