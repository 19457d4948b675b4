"""The simulated cluster's GPU metrics, as NVIDIA's DCGM exporter publishes them.

`GET /v1/clusters/{name}/metrics` answers one cluster in the Prometheus text format
with the exporter's metric and label names (one exporter per host, as Prometheus would
scrape them, merged): `DCGM_FI_DEV_GPU_UTIL` (0-100), `DCGM_FI_PROF_SM_ACTIVE` (0-1)
and `DCGM_FI_DEV_FB_USED` (MiB), labelled `gpu`, `UUID`, `device`, `modelName` and
`Hostname`. `GET /metrics` answers every cluster, each series with a `cluster` label
as well. A GPU a running job holds reports the job's profile
(`scheduler.core.utilization`) at the job's simulated age; a free GPU, or one whose job
is still starting, reports 0; a host that is down reports nothing (its exporter is
gone), so a reader sees its GPUs as unknown.
"""

from __future__ import annotations

import sqlite3
import uuid
from collections.abc import Iterable, Mapping

from scheduler.adapters.simcluster.db import _ACTIVE_SQL
from scheduler.adapters.simcluster.state import SimState
from scheduler.core import utilization as profiles

MODEL_NAME = "NVIDIA H100 80GB HBM3"
METRICS: tuple[tuple[str, str], ...] = (
    ("DCGM_FI_DEV_GPU_UTIL", "GPU utilization (in %)."),
    ("DCGM_FI_PROF_SM_ACTIVE", "The ratio of cycles an SM has at least 1 warp assigned (in %)."),
    ("DCGM_FI_DEV_FB_USED", "Framebuffer memory used (in MiB)."),
)
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"

# (labels text, utilization, SM active, memory used) of one GPU
_Gpu = tuple[str, float, float, float]


def gpu_uuid(cluster: str, host: str, gpu: int) -> str:
    """A stable UUID per simulated GPU, shaped like nvidia-smi's."""
    return "GPU-" + str(uuid.uuid5(uuid.NAMESPACE_URL, f"allot-sim/{cluster}/{host}/{gpu}"))


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _held(db: sqlite3.Connection, cluster_id: int) -> dict[tuple[str, int], tuple[str, float]]:
    """(host, gpu) -> (profile, running since, wall epoch) of the GPUs active jobs hold."""
    rows = db.execute(
        "SELECT g.host, g.gpu, j.profile, j.running_at, j.state FROM job_gpus g"
        f" JOIN jobs j ON j.id = g.job_id WHERE g.cluster_id = ? AND j.state IN {_ACTIVE_SQL}",
        (cluster_id,),
    ).fetchall()
    return {(r["host"], r["gpu"]): (r["profile"], r["running_at"]) for r in rows}


def cluster_gpus(state: SimState, name: str, *, with_cluster: bool = False) -> list[_Gpu]:
    """Every GPU of the named cluster's reachable hosts, with its figures now."""
    cluster, now = state._advanced(name)
    hosts = state.db.execute(
        "SELECT name, gpus FROM hosts WHERE cluster_id = ? AND failed = 0 ORDER BY position",
        (cluster["id"],),
    ).fetchall()
    return gpu_figures(
        [(h["name"], h["gpus"]) for h in hosts],
        _held(state.db, cluster["id"]),
        now,
        speed=float(cluster["speed"]),
        cluster=name,
        with_cluster=with_cluster,
    )


def gpu_figures(
    hosts: Iterable[tuple[str, int]],
    held: Mapping[tuple[str, int], tuple[str, float]],
    now: float,
    *,
    speed: float = 1.0,
    cluster: str = "",
    with_cluster: bool = False,
) -> list[_Gpu]:
    """The GPUs of `hosts` ((name, GPU count)) at wall time `now`: a GPU in `held`
    ((host, index) -> (profile, running since)) reports its profile at the run's
    simulated age (`speed` simulated seconds per wall second), any other GPU 0. Also
    what a test's exporter serves for another kind of cluster's nodes."""
    extra = f',cluster="{_escape(cluster)}"' if with_cluster else ""
    gpus: list[_Gpu] = []
    for host, count in hosts:
        for index in range(count):
            profile, since = held.get((host, index), (profiles.IDLE, now))
            if since > now:  # still starting: the job's process has not begun
                profile = profiles.IDLE
            age_s = (now - since) * speed
            labels = (
                f'gpu="{index}",UUID="{gpu_uuid(cluster, host, index)}",'
                f'device="nvidia{index}",modelName="{MODEL_NAME}",'
                f'Hostname="{_escape(host)}"{extra}'
            )
            gpus.append(
                (
                    labels,
                    profiles.utilization_at(profile, age_s),
                    profiles.sm_active_at(profile, age_s),
                    profiles.memory_used_mib(profile),
                )
            )
    return gpus


def render(gpus: Iterable[_Gpu]) -> str:
    """The Prometheus text exposition of the GPUs' three metrics."""
    listed = list(gpus)
    lines: list[str] = []
    for column, (metric, help_text) in enumerate(METRICS, start=1):
        lines.append(f"# HELP {metric} {help_text}")
        lines.append(f"# TYPE {metric} gauge")
        lines.extend(f"{metric}{{{gpu[0]}}} {_number(float(gpu[column]))}" for gpu in listed)
    return "\n".join(lines) + "\n"


def _number(value: float) -> str:
    return str(int(value)) if value == int(value) else repr(value)


def cluster_metrics(state: SimState, name: str) -> str:
    return render(cluster_gpus(state, name))


def all_metrics(state: SimState) -> str:
    return render(
        gpu
        for name in state.list_clusters()
        for gpu in cluster_gpus(state, name, with_cluster=True)
    )
