"""Asking a worker for fresh ETAs (`scheduler.selectors.eta` only reads them).

Pages and the API call `eta_refresh_request(jobs=)` before they read the ETAs of pending
jobs: a cluster whose cached answer is stale or does not know one of the jobs gets one
refresh queued (at most one per cluster; an eager or fast worker fills the cache before
the read)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable

from scheduler.cycle_requests import request_eta_refresh
from scheduler.models import Job, JobState
from scheduler.selectors.eta import etas_stale


def eta_refresh_request(*, jobs: Iterable[Job]) -> None:
    """Queue an ETA refresh for each cluster of the pending `jobs` whose cached answer is
    stale or misses one of them; never raises (without Redis no ETA until it returns)."""
    by_cluster: dict[int, list[int]] = defaultdict(list)
    for job in jobs:
        if job.state == JobState.PENDING:
            by_cluster[job.cluster_id].append(job.pk)
    for cluster_id, job_ids in by_cluster.items():
        cluster_eta_refresh_request(cluster_id=cluster_id, job_ids=job_ids)


def cluster_eta_refresh_request(*, cluster_id: int, job_ids: list[int]) -> None:
    """Queue an ETA refresh of the cluster when its cached answer is stale or misses one
    of its pending jobs `job_ids` (a page of the cluster's queue); never raises."""
    if job_ids and etas_stale(cluster_id=cluster_id, job_ids=job_ids):
        request_eta_refresh(cluster_id)
