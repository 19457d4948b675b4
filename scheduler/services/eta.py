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
from scheduler.selectors.eta import CachedJobEtas, current_job_etas


def eta_refresh_request(*, jobs: Iterable[Job]) -> dict[int, CachedJobEtas]:
    """Queue an ETA refresh for each cluster of the pending `jobs` whose cached answer is
    stale or misses one of them; never raises (without Redis no ETA until it returns).
    Answers with the cached answers it found current (cluster id -> the answer for its
    pending `jobs`): the caller reads their ETAs there (`job_eta(current=)`) instead of
    reading the cache a second time."""
    by_cluster: dict[int, list[int]] = defaultdict(list)
    for job in jobs:
        if job.state == JobState.PENDING:
            by_cluster[job.cluster_id].append(job.pk)
    current: dict[int, CachedJobEtas] = {}
    for cluster_id, job_ids in by_cluster.items():
        found = cluster_eta_refresh_request(cluster_id=cluster_id, job_ids=job_ids)
        if found is not None:
            current[cluster_id] = found
    return current


def cluster_eta_refresh_request(*, cluster_id: int, job_ids: list[int]) -> CachedJobEtas | None:
    """Queue an ETA refresh of the cluster when its cached answer is stale or misses one
    of its pending jobs `job_ids` (a page of the cluster's queue); never raises. The
    cached answer for `job_ids` when it is current (nothing queued), else None."""
    if not job_ids:
        return None
    found = current_job_etas(cluster_id=cluster_id, job_ids=job_ids)
    if found is None:
        request_eta_refresh(cluster_id)
    return found
