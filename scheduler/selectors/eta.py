"""Estimated start times of a cluster's pending jobs, for the job page and the API.

`job_eta(job=)` answers for one job from `cluster_etas(cluster=)`, which estimates every
pending job of the cluster at once (`scheduler.sim.eta.estimate`: three forward runs of
the current snapshot through the engine, runtimes forecast from the cluster's recent
attempts, the last day's submissions expected to come again) and keeps the answer in
the cache until the cluster's next cycle (and at least a minute): one computation per
cluster per cycle at most, however many pages ask; on 1,024 GPUs with 1,000 pending jobs
it costs ~4 s of CPU (`bench/eta.py --full-queue 1000`). A job the cached answer does
not know (submitted after it) triggers a fresh one.
"""

from __future__ import annotations

import datetime as dt
import time
from typing import Any

from django.core.cache import cache

from budgets.selectors import tree_index
from scheduler.engine import Workload
from scheduler.models import Attempt, AttemptEnd, Cluster, CycleRecord, Job, JobState
from scheduler.selectors.snapshot import Epoch, cluster_snapshot, fetch_rows
from scheduler.sim.eta import Estimate, RuntimeForecast, estimate, repeat_arrivals

HISTORY_DAYS = 30  # runtimes of attempts that finished in this many days feed the forecast
ARRIVAL_WINDOW_S = 86400.0  # the submissions of this last window are expected again
CACHE_S = 600  # an answer lives at most this long (the next cycle replaces it sooner)
MIN_AGE_S = 60.0  # ... but not before it is this old (cycles may come every few seconds)
METHOD = "forward-simulation"


def runtime_history(*, cluster_id: int, now: dt.datetime) -> list[tuple[str, str, str, int, float]]:
    """(project path, submitter, kind, GPUs, runtime s) of the cluster's attempts that
    finished successfully in the last `HISTORY_DAYS` days."""
    rows = fetch_rows(
        Attempt.objects.filter(
            cluster_id=cluster_id,
            end_reason=AttemptEnd.SUCCEEDED,
            ended_at__gte=now - dt.timedelta(days=HISTORY_DAYS),
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


def cluster_etas(*, cluster: Cluster, fresh: bool = False) -> dict[str, dict[str, Any]]:
    """Job pk (as a string) -> its ETA (ISO times) for every pending job of `cluster`;
    cached per cluster and cycle (`fresh` recomputes)."""
    key = f"eta:{cluster.pk}"
    cycle_id = _last_cycle_id(cluster.pk)
    now = time.time()
    if not fresh:
        cached = cache.get(key)
        if cached is not None and (cached[0] == cycle_id or now - cached[1] < MIN_AGE_S):
            return cached[2]
    cs = cluster_snapshot(cluster=cluster)
    forecast = RuntimeForecast(runtime_history(cluster_id=cluster.pk, now=cs.at))
    snap = cs.snapshot
    ids = [int(w.id) for v in snap.pending.values() for w in v]
    ids += [int(r.workload.id) for r in snap.running if r.workload.id.isdigit()]
    users = {
        str(pk): name
        for pk, name in Job.objects.filter(pk__in=ids).values_list("pk", "submitter__username")
    }
    out: dict[str, dict[str, Any]] = {}
    arrivals = repeat_arrivals(_recent(cluster, cs.at), cs.now, ARRIVAL_WINDOW_S)
    for wid, est in estimate(
        snap, cs.policy, cs.now, forecast, users=users, arrivals=arrivals
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
    cache.set(key, (cycle_id, now, out), CACHE_S)
    return out


def _recent(cluster: Cluster, at: dt.datetime) -> list[Workload]:
    """The cluster's jobs submitted in the last arrival window, as engine workloads
    under their project paths (the expected arrivals are these again)."""
    index = tree_index()
    rows = Job.objects.filter(
        cluster=cluster, submitted_at__gte=at - dt.timedelta(seconds=ARRIVAL_WINDOW_S)
    ).values_list(
        "pk", "project_id", "gpus", "submitted_at", "min_runtime_s", "resumable", "priority", "kind"
    )
    cap = float(cluster.max_min_runtime_s)
    return [
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


def job_eta(*, job: Job) -> dict[str, Any] | None:
    """The ETA of a pending job ({start, earliest, latest, method, baseline_start}, ISO
    times; a time is null when the forward run's horizon passed first); None for a job
    that is not pending."""
    if job.state != JobState.PENDING:
        return None
    etas = cluster_etas(cluster=job.cluster)
    found = etas.get(str(job.pk))
    if found is None:  # submitted after the cached answer
        found = cluster_etas(cluster=job.cluster, fresh=True).get(str(job.pk))
    if found is None:  # not in the engine's view (e.g. its project left the tree)
        return {
            "start": None,
            "earliest": None,
            "latest": None,
            "method": METHOD,
            "baseline_start": None,
        }
    return found
