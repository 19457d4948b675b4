"""A Slurm cluster reads GPU utilization like any other (issue 26): a DCGM-exporter
look-alike serves the simulated profiles for the local Slurm cluster's nodes (named by
their fully qualified host names, as a real exporter's `Hostname` is), with the GPU
indices Slurm gave each job; a real Prometheus scrapes it; Allot attributes each
node's GPUs to the attempts Slurm placed there."""

from __future__ import annotations

import datetime as dt
import time

import pytest
from rest_framework.test import APIClient

from scheduler.adapters.simcluster.metrics import gpu_figures
from scheduler.adapters.slurm import adapter_for_cluster
from scheduler.core import utilization as profiles
from scheduler.models import Attempt, AttemptState, Host, Job, UtilizationSample
from scheduler.services.clusters import cluster_create
from scheduler.services.utilization import cluster_metrics_update, utilization_collect
from scheduler.tasks import run_cycle
from tests.factories import SuperUserFactory
from tests.support.dcgm_exporter import DcgmExporter
from tests.support.polling import wait_for
from tests.support.prometheus import MISSING_REASON, PROMETHEUS, SCRAPE_S, PrometheusServer

pytestmark = [
    pytest.mark.django_db,
    pytest.mark.skipif(PROMETHEUS is None, reason=MISSING_REASON),
]
SPEED = 10.0
DOMAIN = ".cluster.local"


@pytest.fixture
def emu(tree, slurm_cluster, tmp_path):
    run_cycle.worker.reset()
    cluster = cluster_create(
        name="emu",
        adapter="slurm",
        gpus_per_host=None,
        grace_s=5,
        adapter_options={
            "slurm_conf": str(slurm_cluster.conf_path),
            "partition": "pair",
            "workdir": str(tmp_path),
        },
    )
    yield cluster
    slurm_cluster.reset()


def _submit(tree, cluster, name: str, gpus: int, kind: str) -> Job:
    client = APIClient()
    client.force_authenticate(SuperUserFactory(username=f"root-{name}"))
    body = {
        "project": tree.node("a1").pk, "cluster": cluster.name, "name": name, "gpus": gpus,
        "kind": kind, "min_runtime_s": 600, "spec": {"command": "sleep 300"},
    }  # fmt: skip
    response = client.post("/api/v1/jobs/", body, format="json")
    assert response.status_code == 201, response.json()
    return Job.objects.get(pk=response.json()["jobs"][0]["id"])


def _exporter_for(cluster, profile_of: dict[str, str]) -> DcgmExporter:
    """Serves every node's GPUs (hosts named <node>.cluster.local): a GPU Slurm gave an
    attempt reports the attempt's profile since Slurm started it, at SPEED. Slurm's jobs
    are read once (they run through the test): a scrape must answer within a second."""
    hosts = [(f"{h.name}{DOMAIN}", h.gpus) for h in Host.objects.filter(cluster=cluster)]
    held = {}
    for job in adapter_for_cluster(cluster).jobs():
        if job.attempt_id in profile_of and job.started_at and not job.ended:
            for p in job.placements:
                for index in p.gpu_indices:
                    held[(f"{p.host}{DOMAIN}", index)] = (
                        profile_of[job.attempt_id],
                        job.started_at.timestamp(),
                    )
    assert len(held) == 3  # the GPUs Slurm reported for the two attempts

    def gpus() -> list:
        return gpu_figures(hosts, held, time.time(), speed=SPEED, cluster=cluster.name)

    return DcgmExporter(gpus)


def test_a_slurm_clusters_gpus_are_attributed_to_its_attempts(tree, emu, tmp_path):
    jobs = {"training": _submit(tree, emu, "train", 2, "training"),
            "sweep": _submit(tree, emu, "sweep", 1, "sweep")}  # fmt: skip
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        assert run_cycle.worker.run(cluster_id=emu.pk).errors == []
        if all(Attempt.objects.filter(job=j, state=AttemptState.RUNNING).exists()
               for j in jobs.values()):  # fmt: skip
            break
        time.sleep(0.3)
    attempts = {k: Attempt.objects.get(job=j) for k, j in jobs.items()}
    assert all(a.state == AttemptState.RUNNING for a in attempts.values())
    profile_of = {
        a.attempt_id: profiles.profile_for(kind=k, key=a.job.name) for k, a in attempts.items()
    }
    prom = PrometheusServer(tmp_path / "prometheus")
    prom.directory.mkdir()
    with _exporter_for(emu, profile_of) as exporter:
        prom.start({"dcgm": exporter.url})
        try:
            cluster_metrics_update(
                actor=None, cluster_id=emu.pk, changes={"prometheus_url": prom.url},
                reason="the nodes' DCGM exporters",
            )  # fmt: skip
            gpus = sum(h.gpus for h in Host.objects.filter(cluster=emu))
            wait_for(lambda: prom.series_count("DCGM_FI_DEV_GPU_UTIL") == gpus, 30, "a scrape")
            until = dt.datetime.now(dt.UTC) + dt.timedelta(seconds=10)  # scraped from now on
            wait_for(lambda: prom.scraped_after(until.timestamp()), 60, "ten seconds of scrapes")
            assert utilization_collect(cluster=emu, now=until, step=1.0) == 2
        finally:
            prom.stop()
    for kind, attempt in attempts.items():
        (row,) = UtilizationSample.objects.filter(attempt=attempt)
        start_s = attempt.started_at.timestamp()
        lows, highs = [], []
        for k in range(row.samples):
            t = row.end.timestamp() - k
            # a value is a scrape up to two intervals old; Slurm's start is in whole seconds,
            # so the exporter's start may differ from the attempt's by a second either way
            ages = [(t - start_s - d / 10) * SPEED
                    for d in range(-10, int((2 * SCRAPE_S + 1) * 10) + 1)]  # fmt: skip
            served = [profiles.utilization_at(profile_of[attempt.attempt_id], a) if a >= 0 else 0.0
                      for a in ages]  # fmt: skip
            lows.append(min(served))
            highs.append(max(served))
        low, high = sum(lows) / len(lows), sum(highs) / len(highs)
        assert row.samples >= 8, (kind, row.samples)
        assert low - 0.5 <= row.mean_pct <= high + 0.5, (kind, row.mean_pct, low, high)
    # the training job's two GPUs, on the node Slurm chose, with the indices it reported
    assert len(attempts["training"].placements[0]["gpu_indices"]) == 2
