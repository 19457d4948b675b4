"""The simulated cluster's DCGM-exporter metrics (scheduler/adapters/simcluster/metrics.py)."""

from __future__ import annotations

import asyncio

import httpx
import pytest

from scheduler.adapters.gpu_metrics import parse_exposition
from scheduler.adapters.simcluster.app import build_app
from scheduler.adapters.simcluster.metrics import cluster_metrics
from scheduler.adapters.simcluster.state import SimState
from scheduler.core import utilization as u


@pytest.fixture
def sim(tmp_path):
    now = [1000.0]
    state = SimState(tmp_path, clock=lambda: now[0])
    state.put_cluster("c", {"hosts": 2, "gpus_per_host": 4, "start_delay_s": 0, "speed": 10})
    yield state, now
    state.close()


def _by_gpu(text, at=0.0):
    return {(s.host, s.gpu): s.util_pct for s in parse_exposition(text, at)}


def test_each_gpu_reports_its_jobs_profile_at_the_jobs_simulated_age(sim):
    state, now = sim
    state.start(
        "c",
        {
            "attempt_id": "a-1",
            "job_name": "train",
            "kind": "training",
            "placements": [{"host": "h000", "gpu_indices": [0, 1]}],
        },
    )
    state.start(
        "c",
        {
            "attempt_id": "a-2",
            "job_name": "nb",
            "kind": "interactive",
            "placements": [{"host": "h001", "gpu_indices": [2]}],
            "spec": {"utilization_profile": "sweep"},
        },
    )
    now[0] += 30.0  # 300 simulated seconds at speed 10
    values = _by_gpu(cluster_metrics(state, "c"))
    assert len(values) == 8
    assert values[("h000", 0)] == values[("h000", 1)] == u.utilization_at(u.TRAINING, 300.0)
    assert values[("h001", 2)] == u.utilization_at(u.SWEEP, 300.0)  # the spec wins
    assert {values[k] for k in values if k not in {("h000", 0), ("h000", 1), ("h001", 2)}} == {0}


def test_the_exposition_uses_the_exporters_names_and_labels(sim):
    state, _ = sim
    text = cluster_metrics(state, "c")
    for metric in ("DCGM_FI_DEV_GPU_UTIL", "DCGM_FI_PROF_SM_ACTIVE", "DCGM_FI_DEV_FB_USED"):
        assert f"# TYPE {metric} gauge" in text
    line = next(x for x in text.splitlines() if x.startswith("DCGM_FI_DEV_GPU_UTIL{"))
    for label in ('gpu="0"', 'UUID="GPU-', 'device="nvidia0"', "modelName=", 'Hostname="h000"'):
        assert label in line


def test_a_down_host_publishes_nothing_and_ended_jobs_free_their_gpus(sim):
    state, now = sim
    placement = [{"host": "h000", "gpu_indices": [0]}]
    state.start("c", {"attempt_id": "a-1", "placements": placement, "run_for_s": 100})
    now[0] += 5.0
    assert _by_gpu(cluster_metrics(state, "c"))[("h000", 0)] == 20.0  # loading
    now[0] += 10.0  # 150 simulated seconds: ended
    assert _by_gpu(cluster_metrics(state, "c"))[("h000", 0)] == 0.0
    state.fail_host("c", "h001", "power")
    assert {h for h, _ in _by_gpu(cluster_metrics(state, "c"))} == {"h000"}


def test_served_over_http_per_cluster_and_for_all(sim):
    state, _ = sim
    state.put_cluster("d", {"hosts": 1, "gpus_per_host": 2})

    async def get_all() -> list[httpx.Response]:
        transport = httpx.ASGITransport(app=build_app(state))  # same thread as the state
        async with httpx.AsyncClient(transport=transport, base_url="http://sim") as client:
            paths = ("/v1/clusters/d/metrics", "/metrics", "/v1/clusters/nope/metrics")
            return [await client.get(path) for path in paths]

    one, every, unknown = asyncio.run(get_all())
    assert one.status_code == 200 and one.headers["content-type"].startswith("text/plain")
    assert len(_by_gpu(one.text)) == 2
    assert 'cluster="c"' in every.text and 'cluster="d"' in every.text
    assert unknown.status_code == 404
