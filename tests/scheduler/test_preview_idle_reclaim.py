"""What turning idle-GPU reclaim on would give, in the what-if preview (issue 26): each
job's idle point comes from its recorded utilization (`JobRecord.idle_after_s`: an attempt
whose samples stayed below the cluster's idle threshold from some point to its end), and
the replay with the proposed weights may run with reclaim on."""

from __future__ import annotations

import datetime as dt

import pytest
from django.urls import reverse
from django.utils import timezone

from budgets.selectors import tree_index
from ledger.utilization import KnownSpan, idle_tail_start
from scheduler.models import JobState, PreviewState, UtilizationSample
from scheduler.services.previews import job_records, preview_request, preview_run, preview_window
from scheduler.services.utilization import utilization_compact
from tests.dashboards.data import attempt
from tests.factories import ClusterFactory, HostFactory, JobFactory

pytestmark = pytest.mark.django_db
H = 3600.0


# ---------------------------------------------------------------- the idle tail (pure)


def spans(*rows: tuple[float, float, float]) -> list[KnownSpan]:
    """(end, max %, known s) rows of 600 s each."""
    return [KnownSpan(end - 600.0, end, top, known) for end, top, known in rows]


def test_the_idle_tail_starts_where_every_later_value_is_below_the_threshold():
    rows = spans((600, 90, 600), (1200, 2, 600), (1800, 1, 600), (2400, 0, 600))
    assert idle_tail_start(rows, 5.0, 2400.0) == 600.0
    assert idle_tail_start(rows, 1.5, 2400.0) == 1200.0  # a higher bar: a later tail
    busy_last = spans((600, 1, 600), (1200, 50, 600))
    assert idle_tail_start(busy_last, 5.0, 1200.0) is None
    # values known for under 90% of the tail (the run went on without metrics): unknown
    assert idle_tail_start(rows, 5.0, 2400.0 + 2 * H) is None
    assert idle_tail_start(spans((600, 1, 300), (1200, 1, 300)), 5.0, 1200.0) is None
    assert idle_tail_start([], 5.0, 100.0) is None


# ---------------------------------------------------------------- from the database


@pytest.fixture
def cluster(db):
    c = ClusterFactory(name="gpu", host_count=1, gpus_per_host=8)
    HostFactory(cluster=c, name="node00", gpus=8)
    return c


def _job(tree, cluster, name, start, hours, *, submitted=None, state=JobState.SUCCEEDED):
    submitted = submitted or start
    job = JobFactory(
        cluster=cluster, project=tree.node("a1"), submitter=tree.user("ann"), name=name,
        gpus=8, min_runtime_s=3600, resumable=True, duration_s=int(hours * H), state=state,
        submitted_at=submitted, queued_at=submitted, first_started_at=start,
        ended_at=start + dt.timedelta(hours=hours) if state == JobState.SUCCEEDED else None,
    )  # fmt: skip
    ended = job.ended_at
    return job, attempt(job, started_at=start, ended_at=ended)


def _samples(run, busy_min: int, idle_min: int, *, busy=90.0, idle=1.0) -> None:
    """One row per 10 minutes from the attempt's start: busy, then idle."""
    rows = []
    for i in range((busy_min + idle_min) // 10):
        end = run.started_at + dt.timedelta(minutes=10 * (i + 1))
        pct = busy if 10 * i < busy_min else idle
        rows.append(
            UtilizationSample(
                attempt=run,
                cluster=run.cluster,
                start=end - dt.timedelta(minutes=10),
                end=end,
                samples=10,
                mean_pct=pct,
                max_pct=pct,
                known_s=600.0,
            )  # fmt: skip
        )
    UtilizationSample.objects.bulk_create(rows)


@pytest.fixture
def window(tree, cluster):
    """A day's window: a 10 h job of a1 busy for an hour then idle to its end, a busy one,
    one without metrics, and a job of a1 that waited for the host behind the idle one."""
    since, until = preview_window(timezone.now(), 1)
    t0 = since + dt.timedelta(hours=1)
    idle, idle_run = _job(tree, cluster, "notebook", t0, 10)
    _samples(idle_run, 60, 540)
    busy, busy_run = _job(tree, cluster, "train", t0 + dt.timedelta(hours=11), 2)
    _samples(busy_run, 120, 0)
    unknown, _ = _job(tree, cluster, "no-metrics", t0 + dt.timedelta(hours=13), 1)
    waiting, _ = _job(
        tree, cluster, "next", t0 + dt.timedelta(hours=10), 1,
        submitted=t0 + dt.timedelta(minutes=30),
    )  # fmt: skip
    return {"since": since, "until": until, "jobs": (idle, busy, unknown, waiting)}


def test_job_records_carry_the_idle_point_from_the_recorded_utilization(window, cluster):
    idle, busy, unknown, waiting = window["jobs"]
    records = job_records(cluster, tree_index(), window["since"], window["until"])
    by_id = {r.job_id: r for r in records.records}
    assert by_id[str(idle.pk)].idle_after_s == pytest.approx(H)
    assert by_id[str(busy.pk)].idle_after_s is None  # busy to its end
    assert by_id[str(unknown.pk)].idle_after_s is None  # no metrics: unknown, never idle
    assert by_id[str(waiting.pk)].idle_after_s is None
    assert records.idle_jobs == 1
    # a higher threshold on the cluster moves nothing here (1% < 5% < 90%); one above
    # the busy hour makes the whole run idle
    cluster.idle_threshold_pct = 95
    cluster.save(update_fields=["idle_threshold_pct"])
    again = job_records(cluster, tree_index(), window["since"], window["until"])
    assert {r.job_id: r for r in again.records}[str(idle.pk)].idle_after_s == 0.0


def test_the_idle_tail_survives_compaction(window, cluster):
    idle = window["jobs"][0]
    utilization_compact(now=timezone.now() + dt.timedelta(days=3))
    rows = list(UtilizationSample.objects.filter(attempt__job=idle).order_by("end"))
    assert [(r.max_pct, r.known_s, r.compacted) for r in rows] == [
        (90.0, 3600.0, True),
        (1.0, 9 * H, True),
    ]
    assert utilization_compact(now=timezone.now() + dt.timedelta(days=3)) == 0  # not again
    records = job_records(cluster, tree_index(), window["since"], window["until"])
    assert {r.job_id: r for r in records.records}[str(idle.pk)].idle_after_s == pytest.approx(H)


def test_the_preview_shows_what_turning_idle_reclaim_on_would_give(
    window, tree, cluster, client, django_capture_on_commit_callbacks
):
    assert cluster.idle_reclaim is False
    with django_capture_on_commit_callbacks(execute=True):
        preview = preview_request(
            actor=tree.user("lead-a"), node=tree.node("prog-a").pk, weights=[],
            cluster="gpu", days=1, idle_reclaim=True,
        )  # fmt: skip
    preview = preview_run(preview_id=preview.pk, parallel=False)
    preview.refresh_from_db()
    assert preview.state == PreviewState.DONE, preview.error
    result = preview.result
    assert result["idle_reclaim"] == {"before": False, "after": True}
    assert result["idle_jobs"] == 1
    reclaims_before, reclaims_after = result["idle_reclaims"]
    assert reclaims_before == 0 and reclaims_after >= 1
    a1 = {r["project"]: r for r in result["projects"]}["org/prog-a/a1"]
    # off: the notebook holds 8 GPUs idle for its last 9 hours; on: reclaimed 30 min
    # into its idle time (the cluster's idle_reclaim_after_s) for the job that waited
    assert a1["idle_gpu_h_before"] == pytest.approx(8 * 9)
    assert a1["idle_gpu_h_after"] < a1["idle_gpu_h_before"]
    client.force_login(tree.user("lead-a"))
    page = client.get(reverse("scheduler:whatif-status", args=[preview.pk])).content.decode()
    assert "Idle-GPU reclaim off with today's weights, on with the proposed ones" in page
    assert "allocated-but-idle GPU-h 72 → " in page and "idle reclaims 0 → " in page


def test_the_api_takes_idle_reclaim_and_refuses_anything_but_a_boolean(
    tree, cluster, api_client, django_capture_on_commit_callbacks
):
    api_client.force_authenticate(tree.user("lead-a"))
    body = {"node": tree.node("prog-a").pk, "cluster": "gpu", "weights": []}
    for value in ("yes", 1, [True]):
        bad = api_client.post("/api/v1/previews/", {**body, "idle_reclaim": value}, format="json")
        assert bad.status_code == 400 and bad.json()["field"] == "idle_reclaim", value
    with django_capture_on_commit_callbacks(execute=True):
        made = api_client.post("/api/v1/previews/", {**body, "idle_reclaim": True}, format="json")
    assert made.status_code == 201, made.content
    assert made.json()["idle_reclaim"] is True
    got = api_client.get(f"/api/v1/previews/{made.json()['id']}/").json()
    assert got["state"] == "done" and got["result"]["idle_reclaim"]["after"] is True
    # without idle_reclaim a preview is of a weight change, which it must name
    assert api_client.post("/api/v1/previews/", body, format="json").json()["field"] == "weights"
    weights = [{"node": tree.node("a1").pk, "weight": 3}]
    plain = api_client.post("/api/v1/previews/", {**body, "weights": weights}, format="json")
    assert plain.json()["idle_reclaim"] is None  # the cluster's policy
