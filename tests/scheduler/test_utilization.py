"""GPU utilization in Allot: the metrics settings (validated, audited, staff only), the
collection from the simulated cluster's own metrics (no Prometheus), the ledger's
rollup, the pyramid and efficiency figures, the API fields and the pages, and who may
see them."""

from __future__ import annotations

import datetime as dt
from io import StringIO

import pytest
from django.core.management import CommandError, call_command
from django.urls import reverse
from django.utils import timezone

from config.errors import PermissionDenied, ValidationFailed
from ledger import selectors as ledger_selectors
from ledger.models import ProjectHour
from ledger.services import floor_hour, rollups_refresh
from scheduler.core import utilization as profiles
from scheduler.models import Attempt, ClusterMetrics, ClusterPolicyEvent, UtilizationSample
from scheduler.selectors.utilization import attempt_figures, idle_attempt_ids, jobs_utilization
from scheduler.services.utilization import (
    cluster_metrics_update,
    utilization_collect,
    utilization_compact,
)
from scheduler.tasks import run_cycle
from tests.factories import (
    AttemptFactory,
    ClusterFactory,
    HostFactory,
    JobFactory,
    UserFactory,
)
from tests.roles import participant
from tests.support.live import submit_job

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        ({"prometheus_url": "ftp://x"}, "prometheus_url"),
        ({"host_label": "host name"}, "host_label"),
        ({"gpu_label": 3}, "gpu_label"),
        ({"selector": "cluster=a100"}, "selector"),
        ({"colour": "red"}, "colour"),
        ({}, "changes"),
    ],
)
def test_bad_metrics_settings_are_refused_naming_the_field(changes, field):
    cluster = ClusterFactory()
    with pytest.raises(ValidationFailed) as refused:
        cluster_metrics_update(actor=None, cluster_id=cluster.pk, changes=changes, reason="r")
    assert refused.value.field == field
    assert not ClusterPolicyEvent.objects.exists()


def test_metrics_settings_are_audited_without_the_token_and_staff_only(tree):
    cluster = ClusterFactory()
    staff = UserFactory(username="op", is_staff=True)
    changes = {
        "prometheus_url": "https://prom.example.org/",
        "host_label": "instance",
        "selector": 'cluster="a100", job=~"dcgm.*"',
        "bearer_token": "s3cret",
    }
    metrics = cluster_metrics_update(
        actor=staff, cluster_id=cluster.pk, changes=changes, reason="real metrics"
    )
    assert (metrics.prometheus_url, metrics.bearer_token) == ("https://prom.example.org", "s3cret")
    (event,) = ClusterPolicyEvent.objects.filter(cluster=cluster)
    assert event.changes["metrics.bearer_token"] == ["unset", "set"]
    assert event.changes["metrics.host_label"] == ["Hostname", "instance"]
    assert "s3cret" not in str(event.changes) and event.actor_name == "op"
    cluster_metrics_update(actor=staff, cluster_id=cluster.pk, changes=changes, reason="again")
    assert ClusterPolicyEvent.objects.filter(cluster=cluster).count() == 1  # nothing changed
    with pytest.raises(PermissionDenied):
        cluster_metrics_update(
            actor=tree.user("lead-a"), cluster_id=cluster.pk, changes={"gpu_label": "g"}, reason="r"
        )


@pytest.fixture
def sim(tree, make_simulated_cluster):
    """A 2 x 4-GPU simulated cluster (no Prometheus: its own /metrics is read)."""
    run_cycle.worker.reset()
    cluster = make_simulated_cluster(
        "util", hosts=2, gpus_per_host=4, speed=100, adapter_options={"start_delay_s": 0}
    )
    user = UserFactory(username="ann")

    def submit(**kwargs):
        return submit_job(
            cluster=cluster, project=tree.node("a1"), user=user, at=timezone.now(), **kwargs
        )

    cluster.submit = submit
    return cluster


def test_without_prometheus_the_simulated_clusters_metrics_are_read(sim, sim_control):
    train = sim.submit(gpus=2, kind="training", name="train", duration_s=None)
    notebook = sim.submit(gpus=4, kind="interactive", name="nb", duration_s=None)
    run_cycle.worker.run(cluster_id=sim.pk)
    run_cycle.worker.run(cluster_id=sim.pk)
    attempts = {a.job_id: a for a in Attempt.objects.filter(cluster=sim)}
    now = timezone.now() + dt.timedelta(seconds=1)
    assert utilization_collect(cluster=sim, now=now) == 2
    rows = {r.attempt.job_id: r for r in UtilizationSample.objects.all()}
    # the training job is at 92% or in a dip, the notebook idle unless in a burst
    assert rows[train.pk].mean_pct in {20.0, 45.0, 92.0}
    assert rows[notebook.pk].mean_pct in {0.0, 70.0}
    figures = attempt_figures(attempts.values(), now=now)
    assert figures[attempts[train.pk].pk].utilization == pytest.approx(
        rows[train.pk].mean_pct / 100
    )
    # a host down publishes nothing: its attempt's utilization stays unknown
    host = attempts[notebook.pk].placements[0]["host"]
    sim_control("util").fail_host(host, reason="power")
    later = now + dt.timedelta(seconds=30)
    utilization_collect(cluster=sim, now=later)
    assert UtilizationSample.objects.filter(attempt=attempts[notebook.pk]).count() == 1


def test_an_unreachable_source_is_unknown_and_kept_as_the_error(sim):
    job = sim.submit(gpus=1, kind="training", name="train", duration_s=None)
    run_cycle.worker.run(cluster_id=sim.pk)
    sim.adapter_url = "http://127.0.0.1:9"  # nothing listens
    sim.save(update_fields=["adapter_url"])
    assert utilization_collect(cluster=sim, now=timezone.now()) == 0
    assert "did not answer" in ClusterMetrics.objects.get(cluster=sim).last_error
    assert jobs_utilization([job.pk]) == {}


def _sample(attempt, end, pct, known_s=60.0):
    return UtilizationSample.objects.create(
        attempt=attempt,
        cluster=attempt.cluster,
        start=end - dt.timedelta(seconds=known_s),
        end=end,
        samples=4,
        mean_pct=pct,
        max_pct=pct,
        known_s=known_s,
    )


@pytest.fixture
def history(tree):
    """One cluster, two hours ago: a1 ran 4 GPUs at 80%, b1 2 GPUs at 10%; a2 ran 1 GPU
    without metrics (unknown)."""
    cluster = ClusterFactory(name="gpu", host_count=1, gpus_per_host=8)
    HostFactory(cluster=cluster, name="node00", gpus=8)
    start = floor_hour(timezone.now()) - dt.timedelta(hours=2)
    end = start + dt.timedelta(hours=1)
    runs = {}
    for project, gpus, pct in (("a1", 4, 80.0), ("b1", 2, 10.0), ("a2", 1, None)):
        job = JobFactory(
            cluster=cluster, project=tree.node(project), gpus=gpus, first_started_at=start
        )
        attempt = AttemptFactory(
            job=job,
            state="ended",
            placements=[{"host": "node00", "gpu_indices": list(range(gpus))}],
            started_at=start,
            ended_at=end,
        )
        runs[project] = attempt
        if pct is not None:
            for minute in range(1, 61):
                _sample(attempt, start + dt.timedelta(minutes=minute), pct)
    rollups_refresh(cluster_id=cluster.pk, since=start, until=end + dt.timedelta(hours=1))
    return cluster, runs


def test_the_ledger_rolls_up_measured_and_utilized_gpu_hours(history):
    cluster, runs = history
    rows = {r.project.name: r for r in ProjectHour.objects.filter(cluster=cluster)}
    assert rows["a1"].measured_gpu_h == pytest.approx(4.0)
    assert rows["a1"].utilized_gpu_h == pytest.approx(3.2)
    assert rows["b1"].utilized_gpu_h == pytest.approx(0.2)
    assert (rows["a2"].measured_gpu_h, rows["a2"].allocated_gpu_h) == (0.0, 1.0)


def test_pyramid_and_efficiency_per_project(history, tree):
    cluster, _ = history
    period = ledger_selectors.resolve_period(cluster=cluster.pk, days="7")
    viewer = tree.user("ann")
    pyramid = ledger_selectors.pyramid(period, viewer=viewer)
    assert pyramid["headline"]["utilization"] == pytest.approx(3.4 / 6.0)
    assert pyramid["headline"]["availability"] == pytest.approx(1.0)
    rows = {p["path"].split("/")[-1]: p for p in ledger_selectors.efficiency(period, viewer=viewer)}
    assert rows["b1"]["utilization"] == pytest.approx(0.1)
    assert rows["a1"]["effective_gpu_h"] == pytest.approx(3.2)
    assert (rows["a2"]["utilization"], rows["a2"]["effective_gpu_h"]) == (None, None)
    order = [p["path"].split("/")[-1] for p in ledger_selectors.efficiency(period, viewer=viewer)]
    assert order == ["b1", "a1", "a2"]  # lowest first, unknown last
    with pytest.raises(PermissionDenied):
        ledger_selectors.efficiency(period, viewer=UserFactory(username="outsider"))


def test_idle_attempts_need_every_known_sample_below_the_threshold(tree):
    cluster = ClusterFactory()
    now = timezone.now()
    idle, busy, unknown, once_busy = (
        AttemptFactory(job=JobFactory(cluster=cluster, project=tree.node("a1")), started_at=now)
        for _ in range(4)
    )
    for minute in range(5):
        at = now - dt.timedelta(minutes=minute)
        _sample(idle, at, 1.0)
        _sample(busy, at, 90.0)
        _sample(once_busy, at, 50.0 if minute == 2 else 0.0)
    assert idle_attempt_ids(cluster, now, 5.0, 300) == frozenset({idle.pk})
    assert idle_attempt_ids(cluster, now, 60.0, 300) == frozenset({idle.pk, once_busy.pk})
    assert unknown.pk not in idle_attempt_ids(cluster, now, 100.0, 300)
    # five known minutes do not make ten idle ones: the gap is unknown, not idle
    assert idle_attempt_ids(cluster, now, 5.0, 600) == frozenset()


def test_api_usage_and_job_detail_carry_utilization(history, api_client, tree):
    cluster, runs = history
    api_client.force_authenticate(tree.user("ann"))
    usage = api_client.get("/api/v1/usage/", {"cluster": cluster.pk, "days": 7}).json()
    by_project = {r["project_path"].split("/")[-1]: r for r in usage["results"]}
    assert by_project["a1"]["utilization"] == pytest.approx(0.8)
    assert by_project["a1"]["effective_gpu_h"] == pytest.approx(3.2)
    assert by_project["a2"]["utilization"] is None
    job = api_client.get(f"/api/v1/jobs/{runs['b1'].job_id}/").json()
    assert job["utilization"]["utilization"] == pytest.approx(0.1)
    assert job["utilization"]["effective_gpu_h"] == pytest.approx(0.2)
    assert job["utilization"]["measured_gpu_h"] == pytest.approx(2.0)
    unknown = api_client.get(f"/api/v1/jobs/{runs['a2'].job_id}/").json()
    assert unknown["utilization"]["utilization"] is None


def test_pages_show_utilization_and_unknown(history, client, tree):
    cluster, runs = history
    client.force_login(tree.user("ann"))
    text = client.get(reverse("scheduler:job-detail", args=[runs["a1"].job_id])).content.decode()
    assert "GPU utilization" in text and "80.0%" in text and "<polyline" in text
    text = client.get(reverse("scheduler:job-detail", args=[runs["a2"].job_id])).content.decode()
    assert "unknown" in text
    part = client.get(reverse("dashboards:efficiency"), {"cluster": cluster.pk}).content.decode()
    assert "Impact" in part and "10.0%" in part and "unknown" in part
    outsider = UserFactory(username="outsider")
    client.force_login(outsider)
    assert client.get(reverse("dashboards:efficiency"), {"cluster": cluster.pk}).status_code == 403
    client.force_login(participant("reader"))
    assert client.get(reverse("dashboards:efficiency"), {"cluster": cluster.pk}).status_code == 200


def test_my_jobs_shows_each_jobs_utilization(history, client, tree):
    cluster, runs = history
    owner = runs["b1"].job.submitter
    client.force_login(owner)
    text = client.get(reverse("dashboards:me")).content.decode()
    assert 'data-label="GPU utilization">10.0%' in text


def test_the_metrics_command_changes_and_audits(tmp_path):
    cluster = ClusterFactory(name="a100")
    token = tmp_path / "token"
    token.write_text("t0ken\n")
    out = StringIO()
    call_command(
        "cluster_metrics", "a100", "--reason", "dcgm", "--prometheus-url", "http://prom:9090",
        "--selector", 'cluster="a100"', "--bearer-token-file", str(token), stdout=out,
    )  # fmt: skip
    assert "http://prom:9090" in out.getvalue()
    metrics = ClusterMetrics.objects.get(cluster=cluster)
    assert (metrics.selector, metrics.bearer_token) == ('cluster="a100"', "t0ken")
    assert ClusterPolicyEvent.objects.get(cluster=cluster).reason == "dcgm"
    with pytest.raises(CommandError, match="gpu_label"):
        call_command("cluster_metrics", "a100", "--reason", "r", "--gpu-label", "no way")


def test_rows_of_attempts_ended_long_ago_are_merged_with_the_same_figures(history):
    cluster, runs = history
    attempt = runs["a1"]
    _sample(attempt, attempt.ended_at - dt.timedelta(seconds=30), 20.0, known_s=180.0)
    before = attempt_figures([attempt], now=attempt.ended_at)[attempt.pk]
    assert utilization_compact(now=timezone.now()) == 0  # ended two hours ago: kept
    assert utilization_compact(now=timezone.now() + dt.timedelta(days=1)) == 2
    (row,) = UtilizationSample.objects.filter(attempt=attempt)
    assert (row.samples, row.max_pct, row.known_s) == (61 * 4, 80.0, 3780.0)
    after = attempt_figures([attempt], now=attempt.ended_at)[attempt.pk]
    assert after.utilization == pytest.approx(before.utilization)
    assert after.measured_gpu_h == pytest.approx(before.measured_gpu_h)


# ---------------------------------------------------------------- SM activity and memory


def test_sm_activity_and_memory_are_stored_per_sample_from_the_simulated_cluster(sim):
    train = sim.submit(gpus=2, kind="training", name="train", duration_s=None)
    run_cycle.worker.run(cluster_id=sim.pk)
    run_cycle.worker.run(cluster_id=sim.pk)
    assert utilization_collect(cluster=sim, now=timezone.now() + dt.timedelta(seconds=1)) == 1
    (row,) = UtilizationSample.objects.filter(attempt__job=train)
    # the simulated exporter's SM activity is 0.85 x utilization, its memory the profile's
    assert row.sm_active_pct == pytest.approx(0.85 * row.mean_pct, abs=0.01)
    assert row.memory_used_max_mib == profiles.memory_used_mib(profiles.TRAINING)
    assert row.sm_active_known_s == row.known_s


def _with_extras(attempt, end, pct, sm, memory, known_s=60.0):
    row = _sample(attempt, end, pct, known_s=known_s)
    row.sm_active_pct, row.memory_used_max_mib = sm, memory
    row.sm_active_known_s = known_s if sm is not None else 0.0
    row.save()
    return row


def test_the_job_shows_mean_sm_activity_and_peak_memory_and_unknown_where_missing(
    history, api_client, client, tree
):
    cluster, runs = history
    a1 = runs["a1"]  # 60 minutes at 80% utilization, without SM or memory so far
    UtilizationSample.objects.filter(
        attempt=a1, end__gt=a1.started_at + dt.timedelta(minutes=2)
    ).delete()
    UtilizationSample.objects.filter(attempt=a1).update(
        sm_active_pct=60.0, sm_active_known_s=60.0, memory_used_max_mib=30000.0
    )  # two minutes at 60% SM
    _with_extras(a1, a1.started_at + dt.timedelta(minutes=4), 80.0, 30.0, 70000.0, known_s=120.0)
    _with_extras(a1, a1.started_at + dt.timedelta(minutes=5), 80.0, None, None)
    api_client.force_authenticate(tree.user("ann"))
    body = api_client.get(f"/api/v1/jobs/{a1.job_id}/").json()["utilization"]
    assert body["sm_active"] == pytest.approx((0.6 * 120 + 0.3 * 120) / 240)
    assert body["memory_used_max_mib"] == 70000.0
    unknown = api_client.get(f"/api/v1/jobs/{runs['b1'].job_id}/").json()["utilization"]
    assert unknown["utilization"] == pytest.approx(0.1)  # utilization known...
    assert (unknown["sm_active"], unknown["memory_used_max_mib"]) == (None, None)  # ...these not
    client.force_login(tree.user("ann"))
    text = client.get(reverse("scheduler:job-detail", args=[a1.job_id])).content.decode()
    assert "<th>SM active</th><td>45.0%</td>" in text
    assert "<th>Peak GPU memory used (MiB)</th><td>70000</td>" in text
    text = client.get(reverse("scheduler:job-detail", args=[runs["b1"].job_id])).content.decode()
    assert "<th>SM active</th><td>unknown</td>" in text
    assert "<th>Peak GPU memory used (MiB)</th><td>unknown</td>" in text


def test_merging_rows_keeps_sm_activity_and_peak_memory(history):
    cluster, runs = history
    attempt = runs["b1"]
    UtilizationSample.objects.filter(attempt=attempt).delete()
    start = attempt.started_at
    _with_extras(attempt, start + dt.timedelta(minutes=1), 10.0, 20.0, 1000.0)
    _with_extras(attempt, start + dt.timedelta(minutes=3), 10.0, 50.0, 3000.0, known_s=120.0)
    _with_extras(attempt, start + dt.timedelta(minutes=4), 10.0, None, None)
    before = attempt_figures([attempt], now=attempt.ended_at)[attempt.pk]
    utilization_compact(now=timezone.now() + dt.timedelta(days=1))
    (row,) = UtilizationSample.objects.filter(attempt=attempt)
    assert row.sm_active_pct == pytest.approx((20.0 * 60 + 50.0 * 120) / 180)
    assert (row.sm_active_known_s, row.memory_used_max_mib) == (180.0, 3000.0)
    after = attempt_figures([attempt], now=attempt.ended_at)[attempt.pk]
    assert after.sm_active == pytest.approx(before.sm_active)
    assert after.memory_used_max_mib == before.memory_used_max_mib == 3000.0
