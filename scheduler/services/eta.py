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
        if etas_stale(cluster_id=cluster_id, job_ids=job_ids):
            request_eta_refresh(cluster_id)
