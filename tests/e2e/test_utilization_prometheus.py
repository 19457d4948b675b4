"""GPU utilization read from a real Prometheus server scraping the simulated cluster's
DCGM-exporter metrics (issue 26): what is recorded per attempt is what the simulated
cluster served, within the scrape resolution; Prometheus down or a metric missing
leaves utilization unknown and the cycle, the pages and the API carry on."""

from __future__ import annotations

import datetime as dt
import time

import pytest
from django.test import Client
from django.utils import timezone
from rest_framework.test import APIClient

from scheduler.adapters.simulated import metrics_url_for_cluster
from scheduler.core import utilization as profiles
from scheduler.models import Attempt, AttemptState, ClusterMetrics, UtilizationSample
from scheduler.selectors.utilization import attempt_figures, idle_attempt_ids
from scheduler.services.utilization import cluster_metrics_update, utilization_collect
from scheduler.tasks import run_cycle
from tests.factories import SuperUserFactory, UserFactory
from tests.support.live import submit_job
from tests.support.polling import wait_for
from tests.support.prometheus import MISSING_REASON, PROMETHEUS, SCRAPE_S, PrometheusServer

pytestmark = [
    pytest.mark.django_db,
    pytest.mark.skipif(PROMETHEUS is None, reason=MISSING_REASON),
]
SPEED = 10.0  # simulated seconds per wall second: a sweep's period is 30 wall seconds


@pytest.fixture
def prom(tmp_path):
    server = PrometheusServer(tmp_path / "prometheus")
    server.directory.mkdir()
    yield server
    server.stop()


@pytest.fixture
def sim(tree, make_simulated_cluster, prom):
    """A 2 x 4-GPU simulated cluster at speed 10 whose metrics a real Prometheus scrapes
    every second, configured as the cluster's utilization source."""
    run_cycle.worker.reset()
    cluster = make_simulated_cluster(
        "gpus", hosts=2, gpus_per_host=4, speed=SPEED, adapter_options={"start_delay_s": 0}
    )
    prom.start({"dcgm": metrics_url_for_cluster(cluster)})
    cluster_metrics_update(
        actor=None,
        cluster_id=cluster.pk,
        changes={"prometheus_url": prom.url},
        reason="read the DCGM exporter",
    )
    # every GPU is scraped (idle ones report 0) before any job starts
    wait_for(lambda: prom.series_count("DCGM_FI_DEV_GPU_UTIL") == 8, 30, "the first scrape")
    user = UserFactory(username="ann")

    def submit(**kwargs):
        return submit_job(
            cluster=cluster, project=tree.node("a1"), user=user, at=timezone.now(), **kwargs
        )

    cluster.submit = submit
    return cluster


def _expected_bounds(profile: str, attempt: Attempt, row: UtilizationSample, step: float):
    """The profile's mean over the row's sample times, lowest and highest: each value
    Prometheus returns is a scrape up to two scrape intervals old (an idle GPU's 0 when
    that scrape came before the start)."""
    start_s = attempt.started_at.timestamp()
    end_s = row.end.timestamp()
    times = [end_s - k * step for k in range(row.samples)]
    slack = 2 * SCRAPE_S
    lows, highs = [], []
    for t in times:
        ages = [(t - start_s - d / 10) * SPEED for d in range(int(slack * 10) + 1)]
        # a scrape from before the start saw the GPU idle
        served = [profiles.utilization_at(profile, a) if a >= 0 else 0.0 for a in ages]
        lows.append(min(served))
        highs.append(max(served))
    return sum(lows) / len(lows), sum(highs) / len(highs)


def test_utilization_recorded_per_attempt_is_what_the_cluster_served(sim, prom):
    jobs = {
        "training": sim.submit(gpus=2, kind="training", name="train", duration_s=None),
        "sweep": sim.submit(gpus=1, kind="sweep", name="sweep-1", duration_s=None),
        "interactive": sim.submit(gpus=1, kind="interactive", name="nb", duration_s=None),
    }
    record = run_cycle.worker.run(cluster_id=sim.pk)
    assert (record.starts, record.errors) == (3, [])
    attempts = {k: Attempt.objects.get(job=j) for k, j in jobs.items()}
    wait_for(lambda: all(a.__class__.objects.get(pk=a.pk).started_at for a in attempts.values()))
    run_cycle.worker.run(cluster_id=sim.pk)
    attempts = {k: Attempt.objects.get(pk=a.pk) for k, a in attempts.items()}
    assert all(a.state == AttemptState.RUNNING for a in attempts.values())
    # 12 wall seconds: training loads then trains (60 simulated s), the sweep climbs
    until = max(a.started_at for a in attempts.values()) + dt.timedelta(seconds=12)
    # no scrape from after `until` exists before it: polled from then on, not for 12 s
    time.sleep(min(60.0, max(0.0, (until - timezone.now()).total_seconds())))
    wait_for(lambda: prom.scraped_after(until.timestamp()), 60, "twelve seconds of scrapes")
    written = utilization_collect(cluster=sim, now=until, step=1.0)
    assert written == 3
    for kind, attempt in attempts.items():
        (row,) = UtilizationSample.objects.filter(attempt=attempt)
        profile = profiles.profile_for(kind=kind, key=attempt.job.name)
        low, high = _expected_bounds(profile, attempt, row, 1.0)
        assert row.samples >= 10, (kind, row.samples)
        assert low - 0.5 <= row.mean_pct <= high + 0.5, (kind, row.mean_pct, low, high)
        # SM activity and memory came through Prometheus too (the exporter serves SM
        # active as 0.85 x utilization, a 0-1 ratio, and the profile's memory)
        assert row.sm_active_pct == pytest.approx(0.85 * row.mean_pct, abs=0.05), kind
        assert row.memory_used_max_mib == profiles.memory_used_mib(profile), kind
    figures = attempt_figures(attempts.values(), now=until)
    for attempt in attempts.values():  # one collection: the attempt's figure is its row's
        (row,) = UtilizationSample.objects.filter(attempt=attempt)
        assert figures[attempt.pk].utilization == pytest.approx(row.mean_pct / 100)
    assert figures[attempts["interactive"].pk].utilization == 0.0
    eff = figures[attempts["training"].pk]
    assert eff.effective_gpu_h == pytest.approx(eff.gpu_h * eff.utilization)
    # the interactive session sits at 0%: idle below 5% over the last 10 s; the others not
    assert idle_attempt_ids(sim, until, 5.0, 10) == frozenset({attempts["interactive"].pk})


def test_prometheus_down_leaves_utilization_unknown_and_the_cycle_carries_on(sim, prom):
    job = sim.submit(gpus=1, kind="training", name="train", duration_s=None)
    run_cycle.worker.run(cluster_id=sim.pk)
    prom.stop()
    now = timezone.now() + dt.timedelta(seconds=5)
    assert utilization_collect(cluster=sim, now=now, step=1.0) == 0
    metrics = ClusterMetrics.objects.get(cluster=sim)
    assert "did not answer" in metrics.last_error
    attempt = Attempt.objects.get(job=job)
    figures = attempt_figures([attempt], now=now)[attempt.pk]
    assert (figures.utilization, figures.effective_gpu_h) == (None, None)
    assert idle_attempt_ids(sim, now, 50.0, 60) == frozenset()  # unknown is not idle
    record = run_cycle.worker.run(cluster_id=sim.pk)
    assert record.errors == []
    # the pages and the API carry on and say unknown, never 0%
    root = SuperUserFactory(username="root")
    pages = Client()
    pages.force_login(root)
    job_page = pages.get(f"/jobs/{job.pk}/")
    assert job_page.status_code == 200
    assert "<th>GPU utilization</th><td>unknown" in job_page.content.decode()
    assert pages.get(f"/dashboards/efficiency/?cluster={sim.name}").status_code == 200
    pages.force_login(job.submitter)
    my_jobs = pages.get("/me/")
    assert my_jobs.status_code == 200
    assert 'data-label="GPU utilization">unknown<' in my_jobs.content.decode()
    api = APIClient()
    api.force_authenticate(root)
    read = api.get(f"/api/v1/jobs/{job.pk}/").json()["utilization"]
    assert (read["utilization"], read["effective_gpu_h"]) == (None, None)


def test_a_missing_metric_is_unknown_not_zero(sim, prom):
    """A selector that matches no series (e.g. another exporter's labels): no rows."""
    job = sim.submit(gpus=1, kind="training", name="train", duration_s=None)
    run_cycle.worker.run(cluster_id=sim.pk)
    cluster_metrics_update(
        actor=None, cluster_id=sim.pk, changes={"selector": 'job="absent"'}, reason="wrong job"
    )
    now = timezone.now()
    wait_for(lambda: prom.scraped_after(now.timestamp()), 30, "a scrape")
    assert utilization_collect(cluster=sim, now=now, step=1.0) == 0
    attempt = Attempt.objects.get(job=job)
    assert attempt_figures([attempt], now=now)[attempt.pk].utilization is None
    assert ClusterMetrics.objects.get(cluster=sim).last_error == ""
