"""What-if previews: the service's permission and validation, the task (eager Celery,
no worker fixture for it), the REST endpoints and the empty state."""

from __future__ import annotations

import datetime as dt
import random

import pytest
from django.utils import timezone

from config.errors import PermissionDenied, ValidationFailed
from scheduler.models import Job, JobState, Preview, PreviewState
from scheduler.services.previews import preview_get, preview_request, preview_run
from tests.factories import ClusterFactory, HostFactory

pytestmark = pytest.mark.django_db


@pytest.fixture
def cluster(db):
    c = ClusterFactory(name="gpu", host_count=2)
    for i in range(2):
        HostFactory(cluster=c, name=f"node{i:02d}")
    return c


def seed_jobs(tree, cluster, n: int = 80, seed: int = 1) -> None:
    """Completed allocated jobs of a1, a2 and b1 over the last two days, beyond capacity."""
    rng = random.Random(seed)
    now = timezone.now()
    users = {"a1": tree.user("ann"), "a2": tree.user("bob"), "b1": tree.user("lead-b")}
    for i in range(n):
        project = rng.choice(["a1", "a2", "b1"])
        at = now - dt.timedelta(seconds=rng.uniform(3600, 2 * 86400))
        Job.objects.create(
            cluster=cluster, project=tree.node(project), submitter=users[project],
            name=f"j{i}", gpus=rng.choice((1, 2, 4, 8)), min_runtime_s=600,
            resumable=True, kind=rng.choice(("training", "debug")),
            duration_s=int(rng.uniform(1800, 6 * 3600)), state=JobState.SUCCEEDED,
            submitted_at=at, queued_at=at,
        )  # fmt: skip


def weights(tree, a1: float = 3) -> list[dict]:
    return [{"node": tree.node("a1").pk, "weight": a1}]


def test_manager_may_ask_and_the_task_replays_before_and_after(
    tree, cluster, django_capture_on_commit_callbacks
):
    seed_jobs(tree, cluster)
    with django_capture_on_commit_callbacks(execute=True):
        preview = preview_request(
            actor=tree.user("lead-a"), node=tree.node("prog-a").pk,
            weights=weights(tree, a1=300), cluster="gpu", days=3,
        )  # fmt: skip
    preview.refresh_from_db()
    assert preview.state == PreviewState.DONE, preview.error
    assert preview.progress == 1.0
    rows = {r["project"]: r for r in preview.result["projects"]}
    assert set(rows) == {"org/prog-a/a1", "org/prog-a/a2", "org/prog-b/b1"}
    a1 = rows["org/prog-a/a1"]
    assert a1["entitled_share_after"] > a1["entitled_share_before"]
    assert preview.result["jobs"] == 80
    assert preview.result["changed"][0]["new"] == "300"


@pytest.mark.parametrize("who", ["ann", "lead-b", "pi-a1"])
def test_members_and_other_managers_may_not_ask(tree, cluster, who):
    with pytest.raises(PermissionDenied):
        preview_request(
            actor=tree.user(who), node=tree.node("prog-a").pk, weights=weights(tree),
            cluster="gpu",
        )  # fmt: skip
    assert not Preview.objects.exists()


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        ([{"node": "A1", "weight": 2}], "weights[0].node"),
        ("x", "weights"),
        ([], "weights"),
    ],
)
def test_bad_weights_are_refused_naming_the_field(tree, cluster, changes, field):
    with pytest.raises(ValidationFailed) as info:
        preview_request(
            actor=tree.user("lead-a"), node=tree.node("prog-a").pk, weights=changes,
            cluster="gpu",
        )  # fmt: skip
    assert info.value.field == field


@pytest.mark.parametrize("weight", [-1, "abc", 1e12, "1.00001"])
def test_bad_weight_values_name_the_weight(tree, cluster, weight):
    with pytest.raises(ValidationFailed) as info:
        preview_request(
            actor=tree.user("lead-a"), node=tree.node("prog-a").pk,
            weights=[{"node": tree.node("a1").pk, "weight": weight}], cluster="gpu",
        )  # fmt: skip
    assert info.value.field == "weights[0].weight"


def test_a_weight_outside_the_node_and_bad_days_are_refused(tree, cluster):
    lead = tree.user("lead-a")
    with pytest.raises(ValidationFailed) as info:
        preview_request(
            actor=tree.user("ceo"), node=tree.node("prog-a").pk,
            weights=[{"node": tree.node("b1").pk, "weight": 2}], cluster="gpu",
        )  # fmt: skip
    assert info.value.field == "weights[0].node"
    with pytest.raises(ValidationFailed) as info:
        preview_request(
            actor=lead, node=tree.node("prog-a").pk, weights=weights(tree), cluster="gpu", days=0
        )
    assert info.value.field == "days"
    with pytest.raises(ValidationFailed) as info:
        preview_request(actor=lead, node=tree.node("prog-a").pk, weights=weights(tree), cluster="x")
    assert info.value.field == "cluster"


def test_no_jobs_in_the_window_is_done_and_empty(tree, cluster):
    old = timezone.now() - dt.timedelta(days=40)
    Job.objects.create(
        cluster=cluster, project=tree.node("a1"), submitter=tree.user("ann"), name="old",
        gpus=1, duration_s=60, submitted_at=old, queued_at=old,
    )  # fmt: skip
    preview = preview_request(
        actor=tree.user("lead-a"), node=tree.node("prog-a").pk, weights=weights(tree),
        cluster="gpu",
    )  # fmt: skip
    preview = preview_run(preview_id=preview.pk)
    assert preview.state == PreviewState.DONE
    assert preview.result["empty"] is True and preview.result["jobs"] == 0


def test_who_may_read_a_preview(tree, cluster):
    preview = preview_request(
        actor=tree.user("lead-a"), node=tree.node("prog-a").pk, weights=weights(tree),
        cluster="gpu",
    )  # fmt: skip
    assert preview_get(actor=tree.user("ceo"), preview_id=preview.pk) == preview
    assert preview_get(actor=tree.user("lead-a"), preview_id=preview.pk) == preview
    for who in ("ann", "lead-b", "pi-a1"):
        with pytest.raises(PermissionDenied):
            preview_get(actor=tree.user(who), preview_id=preview.pk)


def test_rest_post_then_get(tree, cluster, api_client, django_capture_on_commit_callbacks):
    seed_jobs(tree, cluster, n=30)
    api_client.force_authenticate(tree.user("lead-a"))
    body = {"node": tree.node("prog-a").pk, "cluster": "gpu", "weights": weights(tree)}
    with django_capture_on_commit_callbacks(execute=True):
        created = api_client.post("/api/v1/previews/", body, format="json")
    assert created.status_code == 201, created.content
    assert created.json()["state"] == "queued"
    got = api_client.get(f"/api/v1/previews/{created.json()['id']}/")
    assert got.status_code == 200
    assert got.json()["state"] == "done"
    assert len(got.json()["result"]["projects"]) == 3

    bad = api_client.post(
        "/api/v1/previews/", {**body, "weights": [{"node": body["node"], "weight": -1}]},
        format="json",
    )  # fmt: skip
    assert bad.status_code == 400
    assert bad.json()["field"].startswith("weights[0]")
    api_client.force_authenticate(tree.user("ann"))
    assert api_client.get(f"/api/v1/previews/{created.json()['id']}/").status_code == 403
    assert api_client.get("/api/v1/previews/999999/").status_code == 404
