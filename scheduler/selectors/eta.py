"""Estimated start times of a cluster's pending jobs, for the job page and the API.

Reads only: `job_eta(job=)` answers for one job from what
`scheduler.services.eta.cluster_etas(cluster=)` stored, which estimates every
pending job of the cluster at once (`scheduler.core.sim.eta.estimate`: three forward runs of
the current snapshot through the engine, runtimes forecast from the cluster's recent
attempts, the submissions of the last week expected to come again at their average
daily rate, the busiest day's for the latest start) and keeps the answer in
the cache until the cluster's next cycle (and at least a minute): one computation per
cluster per cycle at most, however many pages ask. On 1,024 GPUs with 1,000 pending jobs
it costs ~4 s of CPU (`bench/eta.py --full-queue 1000`), too long for a request: a
request first asks a worker for a fresh answer when the cached one is stale or does not
know the job yet (`scheduler.services.eta.eta_refresh_request`, at most one queued per
cluster), then reads the cache and answers with what it has (`method: estimating` until
the first answer). Reading never enqueues. The answer is stored twice: whole (what the
next computation compares with) and per job with a stamp (what a request reads: one
small value, not every pending job's, `cached_job_etas`).
"""

from __future__ import annotations

import datetime as dt
import logging
import time
from collections.abc import Iterable
from typing import Any

from django.core.cache import cache
from django.db import connection

from budgets.selectors import TreeIndex, tree_index
from scheduler.core.engine import Workload
from scheduler.models import Attempt, AttemptEnd, Cluster, CycleRecord, Job, JobState
from scheduler.selectors.snapshot import Epoch, fetch_rows
from scheduler.selectors.translate import workload

# The windows below count in the cluster's clock (`Cluster.clock_speed`): on the demo's
# simulated cluster, which runs 60x faster, a day of it passes in 24 wall minutes.
HISTORY_DAYS = 30  # runtimes of attempts that finished in this many days feed the forecast
ARRIVAL_WINDOW_S = 86400.0  # expected arrivals: the submissions of a past window again ...
ARRIVAL_PERIODS = 7  # ... averaged over this many past windows (the busiest for `latest`)
CACHE_S = 600  # an answer lives at most this long (the next cycle replaces it sooner)
MIN_AGE_S = 60.0  # ... but not before it is this old (cycles may come every few seconds)
# a pending job's estimate this far in the past has been overtaken: the pages say it is
# overdue rather than "3 min ago" until the next answer (docs/concepts.md#eta)
OVERDUE_AFTER_S = 60.0
METHOD = "forward-simulation"
ESTIMATING = "estimating"  # no answer that knows the job yet: a worker is computing one
log = logging.getLogger(__name__)


def runtime_history(
    *,
    cluster_id: int,
    now: dt.datetime,
    index: TreeIndex | None = None,
    speed: float = 1.0,
    ran_since: dt.datetime | None = None,
) -> list[tuple[str, str, str, int, float]]:
    """(project path, submitter, kind, GPUs, runtime s) of the cluster's attempts that
    finished successfully in the last `HISTORY_DAYS` days of its clock (`speed`), and
    started at `ran_since` or later when given; in the order they finished (the
    forecast counts a key's most recent runtimes: `RuntimeForecast`)."""
    attempts = Attempt.objects.filter(
        cluster_id=cluster_id,
        end_reason=AttemptEnd.SUCCEEDED,
        ended_at__gte=now - dt.timedelta(days=HISTORY_DAYS / speed),
        started_at__isnull=False,
    )
    if ran_since is not None:
        attempts = attempts.filter(started_at__gte=ran_since)
    rows = fetch_rows(
        attempts.values_list(
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
    for project_id, user, kind, gpus, ended, started in sorted(rows, key=lambda r: r[4]):
        path = paths.get(project_id)
        if path is None:
            path = paths[project_id] = index.path(project_id)
        out.append((path, user or "", kind, int(gpus), max(0.0, ended - started)))
    return out


def clock_since(cluster: Cluster) -> dt.datetime | None:
    """Since when the cluster's attempts ran at its clock: a faster simulated cluster's
    since it was added (history stored before, the demo's back-fill, was replayed at the
    wall clock's speed: its runtimes, `speed` times longer than the same jobs' live
    ones, made every forecast bimodal, a job's end and the starts behind it jumping
    between minutes and hours from one answer to the next; issue 25); None (all) for a
    cluster at the wall clock's speed."""
    return cluster.created_at if cluster.clock_speed != 1.0 else None


_LAST_CYCLE_SQL = (
    "SELECT id FROM {table} WHERE cluster_id = %s ORDER BY started_at DESC, id DESC LIMIT 1"
)


def last_cycle_id(cluster_id: int) -> int:
    """The id of the cluster's last cycle (0 before its first): every page of a pending
    job asks, so one plain statement."""
    with connection.cursor() as cursor:
        cursor.execute(_LAST_CYCLE_SQL.format(table=CycleRecord._meta.db_table), [cluster_id])
        row = cursor.fetchone()
    return row[0] if row else 0


def answer_key(cluster_id: int) -> str:
    return f"eta:{cluster_id}"


def cached_etas(
    cluster_id: int,
) -> tuple[int, float, dict[str, dict[str, Any]], dict[str, Any]] | None:
    """The cached answer (cycle id, computed at (epoch s), job pk -> ETA, the cluster
    facts it saw (`_facts`)), or None; a cache outage reads as no answer."""
    try:
        found = cache.get(answer_key(cluster_id))
        return found if found is not None and len(found) == 4 else None  # older: none
    except Exception as exc:  # Redis down: the page still renders, without an ETA
        log.warning("could not read the ETA cache of cluster %s: %s", cluster_id, exc)
        return None


def stamp_key(cluster_id: int) -> str:
    return f"eta:{cluster_id}:stamp"


def job_key(cluster_id: int, job_id: int | str) -> str:
    return f"eta:{cluster_id}:job:{job_id}"


def cached_job_etas(
    cluster_id: int, job_ids: Iterable[int]
) -> tuple[int, float, dict[int, dict[str, Any] | None]] | None:
    """The cached answer for some jobs only, in one cache read of small values: (cycle
    id, computed at (epoch s), job pk -> its ETA, None where the answer does not know
    it), or None without an answer (or with the cache down). A request reads this, never
    the whole cluster's answer (`cached_etas`: every pending job, megabytes)."""
    job_ids = list(job_ids)
    keys = {job_key(cluster_id, pk): pk for pk in job_ids}
    try:
        found = cache.get_many([stamp_key(cluster_id), *keys])
    except Exception as exc:  # Redis down: the page still renders, without an ETA
        log.warning("could not read the ETA cache of cluster %s: %s", cluster_id, exc)
        return None
    stamp = found.get(stamp_key(cluster_id))
    if stamp is None:
        return None
    cycle_id, computed_at = stamp
    etas: dict[int, dict[str, Any] | None] = dict.fromkeys(job_ids)
    for key, pk in keys.items():
        value = found.get(key)
        if value is not None and value[0] == computed_at:
            etas[pk] = value[1]
    return cycle_id, computed_at, etas


def is_current(cached: tuple[int, float, Any], cycle_id: int, now: float) -> bool:
    return cached[0] == cycle_id or now - cached[1] < MIN_AGE_S


def recent_submissions(
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
        workload(
            job_id=pk,
            project=index.path(project_id),
            gpus=gpus,
            submit_s=submitted.timestamp(),
            min_runtime_s=minrt,
            resumable=resumable,
            priority=priority,
            kind=kind,
            cap_s=cap,
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
        "moved": None,
        "overdue": False,
    }


CachedJobEtas = tuple[int, float, dict[int, dict[str, Any] | None]]


def current_job_etas(
    *, cluster_id: int, job_ids: Iterable[int], last_cycle: int | None = None
) -> CachedJobEtas | None:
    """The cached ETAs of `job_ids` (`cached_job_etas`, one cache read) when they are
    current: the answer exists, is not older than the cluster's last cycle and knows
    every one of them. None otherwise: then a worker should compute fresh ones
    (`scheduler.services.eta.eta_refresh_request` asks; a read never does).
    `last_cycle`: the cluster's last cycle id when the caller read it already in this
    request (`StoredQueue.last_cycle_id`), else read here (`last_cycle_id`)."""
    cached = cached_job_etas(cluster_id, job_ids)
    if cached is None:
        return None
    cycle_id = last_cycle if last_cycle is not None else last_cycle_id(cluster_id)
    if not is_current(cached, cycle_id, time.time()):
        return None
    return None if any(eta is None for eta in cached[2].values()) else cached


def job_eta(*, job: Job, current: dict[int, CachedJobEtas] | None = None) -> dict[str, Any] | None:
    """The ETA of a pending job ({start, earliest, latest, method, baseline_start, moved,
    overdue}, ISO times; a time is null when the forward run's horizon passed first); None for a job
    that is not pending. Never computes in the request and never asks for a refresh (the
    caller does, first: `scheduler.services.eta.eta_refresh_request`): a stale answer
    is served while a worker refreshes it, and a job no answer knows yet gets
    `method: estimating`. `current`: what `eta_refresh_request` answered (cluster id ->
    the current cached answer it read), used instead of reading the cache again when it
    knows the job."""
    if job.state != JobState.PENDING:
        return None
    cached = (current or {}).get(job.cluster_id)
    if cached is None or job.pk not in cached[2]:
        cached = cached_job_etas(job.cluster_id, [job.pk])
    return _cached_eta(cached, job.pk, job.queued_at)


def _cached_eta(
    cached: tuple[int, float, dict[int, dict[str, Any] | None]] | None,
    job_id: int,
    queued_at: dt.datetime,
) -> dict[str, Any]:
    """A pending job's ETA in a cached answer (`cached_job_etas`): `method: estimating`
    while no answer computed since the job (last) entered the queue knows it.

    A job that an answer computed before its `queued_at` does not know was not pending
    then (a preempted job requeued since, one whose start failed): the next answer
    estimates it. Only an answer computed after it queued and still without it means
    the engine does not see it (its project left the tree): no estimate. (Comparing with
    the submission instead showed a requeued job "over 30 days" until the next answer,
    then "now": issue 25.)"""
    found = cached[2].get(job_id) if cached else None
    if found is not None:
        overdue = found.get("method") == METHOD and is_overdue(found.get("start"))
        return {**found, "overdue": overdue}
    if cached is not None and cached[1] > queued_at.timestamp():
        return _no_estimate(METHOD)
    return _no_estimate(ESTIMATING)


def etas_for_page(
    *,
    cluster_id: int,
    queued: dict[int, dt.datetime],
    current: CachedJobEtas | None = None,
) -> dict[int, dict]:
    """Pending job pk -> its ETA as `job_eta_for_page` gives it, for the jobs of one
    cluster in `queued` (pk -> when it last entered the queue, `Job.queued_at`): one
    cache read for a page of rows, none when `current` (what
    `cluster_eta_refresh_request` answered) knows them all."""
    if not queued:
        return {}
    cached = current
    if cached is None or any(pk not in cached[2] for pk in queued):
        cached = cached_job_etas(cluster_id, queued)
    return {pk: _for_page(_cached_eta(cached, pk, at)) for pk, at in queued.items()}


def _as_datetimes(values: dict[str, Any]) -> dict[str, Any]:
    return {
        k: (dt.datetime.fromisoformat(v) if isinstance(v, str) and k not in _TEXT else v)
        for k, v in values.items()
    }


_TEXT = frozenset({"method", "because"})


def job_eta_for_page(
    *, job: Job, current: dict[int, CachedJobEtas] | None = None
) -> dict[str, Any] | None:
    """`job_eta` with datetimes instead of ISO text, for templates (also in `moved`)."""
    eta = job_eta(job=job, current=current)
    return None if eta is None else _for_page(eta)


def _for_page(eta: dict[str, Any]) -> dict[str, Any]:
    page = _as_datetimes(eta)
    if eta.get("moved"):
        page["moved"] = _as_datetimes(eta["moved"])
    return page


def is_overdue(start: str | None, now: dt.datetime | None = None) -> bool:
    """Whether a pending job's estimated start (ISO text) passed more than
    `OVERDUE_AFTER_S` ago without the job starting: the estimate was overtaken, and
    every surface says "due now" until the next answer (docs/concepts.md#eta)."""
    if not start:
        return False
    moment = dt.datetime.fromisoformat(start)
    return moment < (now or dt.datetime.now(dt.UTC)) - dt.timedelta(seconds=OVERDUE_AFTER_S)
