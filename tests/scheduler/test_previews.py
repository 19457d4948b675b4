"""What-if previews: the service's permission and validation, the task (eager Celery,
no worker fixture for it), the REST endpoints and the empty state."""

from __future__ import annotations

import datetime as dt
from types import SimpleNamespace

import pytest
from django.template.loader import render_to_string
from django.utils import timezone

from allot_common.figures import fixed_text, percent_text
from config.errors import PermissionDenied, Throttled, ValidationFailed
from ledger.models import ProjectHour
from scheduler.models import JobState, Preview, PreviewState
from scheduler.services.previews import (
    MAX_PREVIEWS_IN_FLIGHT_PER_USER,
    PREVIEW_RETRY_AFTER_S,
    STALE_RUN_S,
    preview_get,
    preview_request,
    preview_run,
    preview_window,
)
from scheduler.views.whatif import _whatif_context
from tests.dashboards.data import attempt
from tests.factories import ClusterFactory, HostFactory, JobFactory
from tests.support.jobs import seed_jobs


def _whatif_cells(row: dict) -> list[str]:
    """The number cells of a finished preview's table with one project `row`, as shown
    (without the replay's "off the record" note)."""
    preview = SimpleNamespace(
        pk=7, state=PreviewState.DONE, progress=1.0, window_days=7,
        cluster=SimpleNamespace(name="gpu"), result={"jobs": 3, "projects": [row]},
    )  # fmt: skip
    html = render_to_string("scheduler/_whatif.html", _whatif_context(preview))
    return [
        c.split("</td>")[0].split(" <small")[0].strip() for c in html.split('<td class="num">')[1:]
    ]


pytestmark = pytest.mark.django_db


@pytest.fixture
def cluster(db):
    c = ClusterFactory(name="gpu", host_count=2)
    for i in range(2):
        HostFactory(cluster=c, name=f"node{i:02d}")
    return c


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
    JobFactory(
        cluster=cluster, project=tree.node("a1"), submitter=tree.user("ann"), name="old",
        gpus=1, duration_s=60, submitted_at=old, queued_at=old, state=JobState.SUCCEEDED,
        ended_at=old + dt.timedelta(seconds=60),
    )  # fmt: skip
    preview = preview_request(
        actor=tree.user("lead-a"), node=tree.node("prog-a").pk, weights=weights(tree),
        cluster="gpu",
    )  # fmt: skip
    preview = preview_run(preview_id=preview.pk)
    assert preview.state == PreviewState.DONE
    assert preview.result["empty"] is True and preview.result["jobs"] == 0


def test_a_preview_whose_worker_died_running_it_runs_again_when_redelivered(tree, cluster):
    preview = preview_request(
        actor=tree.user("lead-a"), node=tree.node("prog-a").pk, weights=weights(tree),
        cluster="gpu",
    )  # fmt: skip
    started = timezone.now() - dt.timedelta(seconds=STALE_RUN_S + 60)
    Preview.objects.filter(pk=preview.pk).update(state=PreviewState.RUNNING, started_at=started)
    assert preview_run(preview_id=preview.pk).state == PreviewState.DONE
    # one running now (its worker alive) is not run twice
    Preview.objects.filter(pk=preview.pk).update(
        state=PreviewState.RUNNING, started_at=timezone.now()
    )
    assert preview_run(preview_id=preview.pk).state == PreviewState.RUNNING


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


def _run(tree, days: int = 3) -> Preview:
    preview = preview_request(
        actor=tree.user("lead-a"), node=tree.node("prog-a").pk, weights=weights(tree),
        cluster="gpu", days=days,
    )  # fmt: skip
    return preview_run(preview_id=preview.pk, parallel=False)


def test_the_record_stands_beside_both_replays_with_their_difference(tree, cluster, client):
    """The ledger's recorded delivery is its own column, never shown under the replay's
    label; the replay with today's weights says how far it is from it."""
    seed_jobs(tree, cluster)
    since, until = preview_window(timezone.now(), 3)
    ProjectHour.objects.bulk_create(
        ProjectHour(
            cluster=cluster, project=tree.node("a1"), hour=until - dt.timedelta(hours=h),
            allocated_gpu_h=5.0, entitled_gpu_h=4.0,
        )
        for h in range(1, 11)
    )  # fmt: skip
    ProjectHour.objects.create(  # the current hour is not complete: not in the window
        cluster=cluster, project=tree.node("a1"), hour=until, allocated_gpu_h=99.0
    )
    preview = _run(tree)
    assert preview.state == PreviewState.DONE, preview.error
    rows = {r["project"]: r for r in preview.result["projects"]}
    a1 = rows["org/prog-a/a1"]
    assert a1["delivered_gpu_h_recorded"] == pytest.approx(50.0)
    assert a1["ratio_recorded"] == pytest.approx(1.25)  # not capped at 100%
    assert a1["replay_difference"] == pytest.approx(abs(a1["delivered_gpu_h_before"] - 50.0) / 50.0)
    assert preview.result["fidelity"]["judged"] == ["org/prog-a/a1"]
    assert preview.result["window_end"] == until.isoformat()
    client.force_login(tree.user("lead-a"))
    html = client.get(f"/budgets/whatif/{preview.pk}/").content.decode()
    for label in ("Recorded", "Replay, today's weights", "Replay, proposed weights"):
        assert label in html, label
    assert "125.0%" in html and "off the record" in html and "differ from the record" in html


def test_a_job_running_when_the_window_opened_goes_on_as_the_ledger_recorded(tree, cluster):
    """a1's 16-GPU job holds both hosts when the window opens (started an hour before,
    protected to 7 h into the window by its 8 h minimum runtime) while b1's long 8-GPU
    job waits; a1 is the most used project. As the ledger recorded, a1's run goes on
    until its protection ends, then b1 takes a host for the rest of the window. The
    replay continues that run instead of deciding afresh (which started b1 at once and
    left a1, who needs both hosts, nothing), so with unchanged weights it delivers what
    the ledger recorded."""
    since, until = preview_window(timezone.now(), 3)
    past = since - dt.timedelta(days=3)
    used = JobFactory(
        cluster=cluster, project=tree.node("a1"), submitter=tree.user("ann"), gpus=16,
        duration_s=2 * 86400, state=JobState.SUCCEEDED, submitted_at=past, queued_at=past,
        first_started_at=past, ended_at=past + dt.timedelta(days=2),
    )  # fmt: skip
    attempt(used, started_at=past, ended_at=past + dt.timedelta(days=2))  # a1 is the most used
    start = since - dt.timedelta(hours=1)
    long = JobFactory(
        cluster=cluster, project=tree.node("a1"), submitter=tree.user("ann"), gpus=16,
        min_runtime_s=8 * 3600, resumable=True, duration_s=200 * 3600, state=JobState.RUNNING,
        submitted_at=start, queued_at=start, first_started_at=start,
    )  # fmt: skip
    run = attempt(long, started_at=start)
    run.placements = [{"host": h, "gpu_indices": list(range(8))} for h in ("node00", "node01")]
    run.save(update_fields=["placements"])
    waiting = since - dt.timedelta(minutes=30)
    JobFactory(
        cluster=cluster, project=tree.node("b1"), submitter=tree.user("ann"), gpus=8,
        min_runtime_s=3600, resumable=True, duration_s=100 * 3600, state=JobState.PENDING,
        submitted_at=waiting, queued_at=waiting,
    )  # fmt: skip
    hour = dt.timedelta(hours=1)
    ProjectHour.objects.bulk_create(
        [
            ProjectHour(
                cluster=cluster, project=tree.node("a1"), hour=since + h * hour,
                allocated_gpu_h=16.0,
            )
            for h in range(7)
        ]
        + [
            ProjectHour(
                cluster=cluster, project=tree.node("b1"), hour=since + h * hour,
                allocated_gpu_h=8.0,
            )
            for h in range(7, 72)
        ]
    )  # fmt: skip
    preview = _run(tree)
    assert preview.state == PreviewState.DONE, preview.error
    assert preview.result["not_reproduced"]["carried"] == 2
    assert preview.result["not_reproduced"]["carried_running"] == 1
    rows = {r["project"]: r for r in preview.result["projects"]}
    assert rows["org/prog-a/a1"]["delivered_gpu_h_before"] == pytest.approx(16 * 7)
    assert rows["org/prog-b/b1"]["delivered_gpu_h_before"] == pytest.approx(8 * 65)
    assert preview.result["fidelity"]["worst"] == pytest.approx(0.0, abs=1e-9)


def test_a_job_running_when_the_window_opened_is_replayed_with_the_work_left(tree, cluster):
    """Started a day before the 3-day window with 5 days of work: the replay runs its 4
    days left from the window's start (the whole window, 8 GPUs), and says that 24 h x 8
    GPUs of it ran before the window."""
    since, until = preview_window(timezone.now(), 3)
    start = since - dt.timedelta(days=1)
    job = JobFactory(
        cluster=cluster, project=tree.node("a1"), submitter=tree.user("ann"), name="long",
        gpus=8, min_runtime_s=3600, resumable=True, duration_s=5 * 86400,
        state=JobState.RUNNING, submitted_at=start, queued_at=start, first_started_at=start,
    )  # fmt: skip
    attempt(job, started_at=start)
    preview = _run(tree)
    assert preview.state == PreviewState.DONE, preview.error
    assert preview.result["not_reproduced"]["carried"] == 1
    assert preview.result["not_reproduced"]["carried_before_gpu_h"] == pytest.approx(8 * 24)
    a1 = {r["project"]: r for r in preview.result["projects"]}["org/prog-a/a1"]
    assert a1["delivered_gpu_h_before"] == pytest.approx(8 * 72, rel=0.01)


def test_the_recorded_column_writes_the_dashboards_digits():
    """The demo's post-training: the delivery dashboard said 2268.5 GPU-h delivered, the
    preview's Recorded column "2268" for the same hours. Every delivered figure and ratio
    of the preview is written by the dashboards' functions (`fixed_text` with one
    decimal, `percent_text`), and a ratio rounds from the fraction, as there (0.1005 is
    10.1%, where the float 10.049999... gave 10.0%)."""
    row = {
        "project": "org/prog-a/a1", "entitled_share_before": 0.125, "entitled_share_after": 0.15,
        "delivered_gpu_h_recorded": 2268.46, "delivered_gpu_h_before": 2398.04,
        "delivered_gpu_h_after": 3011.0, "ratio_recorded": 0.1005, "ratio_before": 1.0149,
        "ratio_after": None, "replay_difference": 0.057,
    }  # fmt: skip
    cells = _whatif_cells(row)
    assert cells[1:5] == ["2268.5", "2398.0", "3011.0", "+613.0"]
    assert [fixed_text(2268.46, 1), percent_text(0.1005)] == ["2268.5", "10.1%"]
    assert cells[5:8] == ["10.1%", "101.5%", "–"]


@pytest.mark.parametrize(
    ("before", "after", "shown"),
    [(278.25, 235.54, ["278.3", "235.5", "-42.8"]), (0.96, 1.04, ["1.0", "1.0", "0.0"]),
     (None, 2.25, ["–", "2.3", "+2.3"])],
)  # fmt: skip
def test_the_change_is_the_difference_of_the_figures_shown_beside_it(before, after, shown):
    """The audit's preview read "278.3 -> 235.5" and a Change of "-42.7": the change
    was the unrounded difference (-42.71). It is the difference of the two as shown."""
    row = {"project": "org/prog-a/a1", "delivered_gpu_h_recorded": 1.0,
           "delivered_gpu_h_before": before, "delivered_gpu_h_after": after}  # fmt: skip
    cells = _whatif_cells(row)
    assert cells[2:5] == shown


def test_a_user_has_at_most_the_limit_of_previews_in_flight(tree, cluster, api_client):
    """The API: a preview over the limit is a 429 with Retry-After, and nothing is stored;
    one finished, failed or lost with its worker frees its place; others are not concerned."""
    lead = tree.user("lead-a")
    api_client.force_authenticate(lead)
    body = {"node": tree.node("prog-a").pk, "cluster": "gpu", "weights": weights(tree)}
    for _ in range(MAX_PREVIEWS_IN_FLIGHT_PER_USER):  # no worker: they stay queued
        assert api_client.post("/api/v1/previews/", body, format="json").status_code == 201
    refused = api_client.post("/api/v1/previews/", body, format="json")
    assert refused.status_code == 429, refused.content
    assert refused.json()["code"] == "throttled"
    assert refused.json()["limit"] == MAX_PREVIEWS_IN_FLIGHT_PER_USER
    assert refused["Retry-After"] == str(PREVIEW_RETRY_AFTER_S)
    assert Preview.objects.count() == MAX_PREVIEWS_IN_FLIGHT_PER_USER
    api_client.force_authenticate(tree.user("ceo"))  # another user's own limit
    assert api_client.post("/api/v1/previews/", body, format="json").status_code == 201
    api_client.force_authenticate(lead)
    first, second, third = Preview.objects.filter(requester=lead).order_by("pk")
    Preview.objects.filter(pk=first.pk).update(state=PreviewState.DONE)
    assert api_client.post("/api/v1/previews/", body, format="json").status_code == 201
    long_ago = timezone.now() - dt.timedelta(seconds=STALE_RUN_S + 60)
    Preview.objects.filter(pk=second.pk).update(state=PreviewState.RUNNING, started_at=long_ago)
    Preview.objects.filter(pk=third.pk).update(
        state=PreviewState.RUNNING, started_at=timezone.now()
    )
    assert api_client.post("/api/v1/previews/", body, format="json").status_code == 201
    assert api_client.post("/api/v1/previews/", body, format="json").status_code == 429


def test_the_page_refuses_a_preview_over_the_limit_too(tree, cluster, client):
    lead = tree.user("lead-a")
    for _ in range(MAX_PREVIEWS_IN_FLIGHT_PER_USER):
        preview_request(
            actor=lead, node=tree.node("prog-a").pk, weights=weights(tree), cluster="gpu"
        )
    with pytest.raises(Throttled):
        preview_request(
            actor=lead, node=tree.node("prog-a").pk, weights=weights(tree), cluster="gpu"
        )
    client.force_login(lead)
    a1, a2 = tree.node("a1").pk, tree.node("a2").pk
    page = client.post(
        f"/budgets/nodes/{tree.node('prog-a').pk}/whatif/",
        {f"weight-{a1}": "300", f"weight-{a2}": "30", "cluster": "gpu", "days": "3"},
    )
    assert page.status_code == 200
    assert f"You have {MAX_PREVIEWS_IN_FLIGHT_PER_USER} what-if previews".encode() in page.content
    assert Preview.objects.count() == MAX_PREVIEWS_IN_FLIGHT_PER_USER
