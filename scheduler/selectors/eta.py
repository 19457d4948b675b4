"""Estimated start times of a cluster's pending jobs, for the job page and the API.

`job_eta(job=)` answers for one job from `cluster_etas(cluster=)`, which estimates every
pending job of the cluster at once (`scheduler.core.sim.eta.estimate`: three forward runs of
the current snapshot through the engine, runtimes forecast from the cluster's recent
attempts, the submissions of the last week expected to come again at their average
daily rate, the busiest day's for the latest start) and keeps the answer in
the cache until the cluster's next cycle (and at least a minute): one computation per
cluster per cycle at most, however many pages ask. On 1,024 GPUs with 1,000 pending jobs
it costs ~4 s of CPU (`bench/eta.py --full-queue 1000`), too long for a request: a
request reads the cache and, when the answer is stale or does not know the job yet,
asks a worker for a fresh one (`scheduler.tasks.request_eta_refresh`, at most one queued
per cluster) and answers with what it has (`method: estimating` until the first answer).
"""

from __future__ import annotations

import datetime as dt
import logging
import time
from typing import Any

from django.core.cache import cache

from budgets.selectors import TreeIndex, tree_index
from scheduler.core.engine import Workload
from scheduler.core.sim.eta import (
    Estimate,
    RuntimeForecast,
    busiest_arrivals,
    estimate,
    repeat_arrivals,
)
from scheduler.models import Attempt, AttemptEnd, Cluster, CycleRecord, Job, JobState
from scheduler.selectors.snapshot import Epoch, cluster_snapshot, fetch_rows

# The windows below count in the cluster's clock (`Cluster.clock_speed`): on the demo's
# simulated cluster, which runs 60x faster, a day of it passes in 24 wall minutes.
HISTORY_DAYS = 30  # runtimes of attempts that finished in this many days feed the forecast
ARRIVAL_WINDOW_S = 86400.0  # expected arrivals: the submissions of a past window again ...
ARRIVAL_PERIODS = 7  # ... averaged over this many past windows (the busiest for `latest`)
CACHE_S = 600  # an answer lives at most this long (the next cycle replaces it sooner)
MIN_AGE_S = 60.0  # ... but not before it is this old (cycles may come every few seconds)
METHOD = "forward-simulation"
ESTIMATING = "estimating"  # no answer that knows the job yet: a worker is computing one
log = logging.getLogger(__name__)


def runtime_history(
    *, cluster_id: int, now: dt.datetime, index: TreeIndex | None = None, speed: float = 1.0
) -> list[tuple[str, str, str, int, float]]:
    """(project path, submitter, kind, GPUs, runtime s) of the cluster's attempts that
    finished successfully in the last `HISTORY_DAYS` days of its clock (`speed`)."""
    rows = fetch_rows(
        Attempt.objects.filter(
            cluster_id=cluster_id,
            end_reason=AttemptEnd.SUCCEEDED,
            ended_at__gte=now - dt.timedelta(days=HISTORY_DAYS / speed),
            started_at__isnull=False,
        ).values_list(
            "project_id",
            "job__submitter__username",
            "job__kind",
            "gpus",
            Epoch("ended_at"),
            Epoch("started_at"),
        )
    )
    if index is None:
        index = tree_index()
    paths: dict[int, str] = {}
    out = []
    for project_id, user, kind, gpus, ended, started in rows:
        path = paths.get(project_id)
        if path is None:
            path = paths[project_id] = index.path(project_id)
        out.append((path, user or "", kind, int(gpus), max(0.0, ended - started)))
    return out


def _iso(t: float | None) -> str | None:
    return None if t is None else dt.datetime.fromtimestamp(t, tz=dt.UTC).isoformat()


def _as_dict(est: Estimate) -> dict[str, Any]:
    return {
        "start": _iso(est.start),
        "earliest": _iso(est.earliest),
        "latest": _iso(est.latest),
        "method": est.method,
        "baseline_start": _iso(est.baseline_start),
    }


def _last_cycle_id(cluster_id: int) -> int:
    last = (
        CycleRecord.objects.filter(cluster_id=cluster_id)
        .order_by("-started_at", "-pk")
        .values_list("pk", flat=True)
        .first()
    )
    return last or 0


def _cache_key(cluster_id: int) -> str:
    return f"eta:{cluster_id}"


def cached_etas(cluster_id: int) -> tuple[int, float, dict[str, dict[str, Any]]] | None:
    """The cached answer (cycle id, computed at (epoch s), job pk -> ETA), or None; a
    cache outage reads as no answer."""
    try:
        return cache.get(_cache_key(cluster_id))
    except Exception as exc:  # Redis down: the page still renders, without an ETA
        log.warning("could not read the ETA cache of cluster %s: %s", cluster_id, exc)
        return None


def _is_current(cached: tuple[int, float, Any], cycle_id: int, now: float) -> bool:
    return cached[0] == cycle_id or now - cached[1] < MIN_AGE_S


def cluster_etas(*, cluster: Cluster, fresh: bool = False) -> dict[str, dict[str, Any]]:
    """Job pk (as a string) -> its ETA (ISO times) for every pending job of `cluster`;
    cached per cluster and cycle (`fresh` recomputes). Computes in the caller: the
    worker's task (`scheduler.tasks.refresh_etas`) calls it, requests read the cache."""
    cycle_id = _last_cycle_id(cluster.pk)
    now = time.time()
    if not fresh:
        cached = cached_etas(cluster.pk)
        if cached is not None and _is_current(cached, cycle_id, now):
            return cached[2]
    cs = cluster_snapshot(cluster=cluster)
    index = tree_index()
    speed = cluster.clock_speed
    forecast = RuntimeForecast(
        runtime_history(cluster_id=cluster.pk, now=cs.at, index=index, speed=speed)
    )
    snap = cs.snapshot
    ids = [int(w.id) for v in snap.pending.values() for w in v]
    ids += [int(r.workload.id) for r in snap.running if r.workload.id.isdigit()]
    users = {
        str(pk): name
        for pk, name in Job.objects.filter(pk__in=ids).values_list("pk", "submitter__username")
    }
    out: dict[str, dict[str, Any]] = {}
    window = ARRIVAL_WINDOW_S / speed
    recent, since = _recent(cluster, cs.at, index, window)
    arrivals = repeat_arrivals(recent, cs.now, window, ARRIVAL_PERIODS, since=since)
    busy = busiest_arrivals(recent, cs.now, window, ARRIVAL_PERIODS)
    for wid, est in estimate(
        snap, cs.policy, cs.now, forecast, users=users, arrivals=arrivals, busy_arrivals=busy
    ).items():
        out[wid] = _as_dict(est)
    for wid in cs.waiting:  # its victims are stopping: it starts as soon as they exit
        now = _iso(cs.now)
        out[wid] = {
            "start": now,
            "earliest": now,
            "latest": now,
            "method": "victims-stopping",
            "baseline_start": now,
        }
    try:
        cache.set(_cache_key(cluster.pk), (cycle_id, now, out), CACHE_S)
    except Exception as exc:
        log.warning("could not store the ETAs of cluster %s: %s", cluster.pk, exc)
    return out


def _recent(
    cluster: Cluster, at: dt.datetime, index: TreeIndex, window_s: float = ARRIVAL_WINDOW_S
) -> tuple[list[Workload], float | None]:
    """The cluster's jobs submitted in the last `ARRIVAL_PERIODS` windows of `window_s`
    wall seconds, as engine workloads under their project paths (the expected arrivals
    are these again), and when the cluster's records begin (its first submission; None
    without any)."""
    jobs = Job.objects.filter(cluster=cluster)
    first = jobs.order_by("submitted_at").values_list("submitted_at", flat=True).first()
    rows = jobs.filter(
        submitted_at__gte=at - dt.timedelta(seconds=window_s * ARRIVAL_PERIODS)
    ).values_list(
        "pk", "project_id", "gpus", "submitted_at", "min_runtime_s", "resumable", "priority", "kind"
    )
    cap = float(cluster.max_min_runtime_s)
    recent = [
        Workload(
            id=str(pk),
            project=index.path(project_id),
            gpus=gpus,
            submit_s=submitted.timestamp(),
            min_runtime_s=min(float(minrt), cap),
            resumable=resumable,
            priority=priority,
            kind=kind,
        )
        for pk, project_id, gpus, submitted, minrt, resumable, priority, kind in rows
        if project_id in index.nodes
    ]
    return recent, (first.timestamp() if first is not None else None)


def _no_estimate(method: str) -> dict[str, Any]:
    return {
        "start": None,
        "earliest": None,
        "latest": None,
        "method": method,
        "baseline_start": None,
    }


def job_eta(*, job: Job) -> dict[str, Any] | None:
    """The ETA of a pending job ({start, earliest, latest, method, baseline_start}, ISO
    times; a time is null when the forward run's horizon passed first); None for a job
    that is not pending. Never computes in the request: a stale answer is served while a
    worker refreshes it, and a job no answer knows yet gets `method: estimating`."""
    from scheduler.tasks import request_eta_refresh  # tasks import the services

    if job.state != JobState.PENDING:
        return None
    cached = cached_etas(job.cluster_id)
    found = cached[2].get(str(job.pk)) if cached else None
    if found is None or not _is_current(cached, _last_cycle_id(job.cluster_id), time.time()):
        request_eta_refresh(job.cluster_id)
        cached = cached_etas(job.cluster_id)  # an eager (test) or very fast worker filled it
        found = cached[2].get(str(job.pk)) if cached else found
    if found is not None:
        return found
    if cached is not None and cached[1] > job.submitted_at.timestamp():
        # a fresh answer without it: not in the engine's view (its project left the tree)
        return _no_estimate(METHOD)
    return _no_estimate(ESTIMATING)
