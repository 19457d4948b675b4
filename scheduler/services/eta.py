"""Computing and storing the ETAs of a cluster's pending jobs, and asking a worker for
fresh ones (`scheduler.selectors.eta` only reads them).

`cluster_etas(cluster=)` estimates every pending job of the cluster at once
(`scheduler.core.sim.eta.estimate`, see `scheduler.selectors.eta` for the method) and
stores the answer in the cache, whole and per job, with the calibration records of the
jobs that started since the last answer; the worker's task
(`scheduler.tasks.refresh_etas`) calls it.

Pages and the API call `eta_refresh_request(jobs=)` before they read the ETAs of pending
jobs: a cluster whose cached answer is stale or does not know one of the jobs gets one
refresh queued (at most one per cluster; an eager or fast worker fills the cache before
the read)."""

from __future__ import annotations

import datetime as dt
import logging
import math
import time
from collections import defaultdict
from collections.abc import Collection, Iterable, Mapping
from typing import Any

from django.core.cache import cache
from django.utils import timezone

from budgets.selectors import tree_index
from scheduler.core.engine import Workload
from scheduler.core.sim.eta import (
    CALIBRATION_KEEP,
    Estimate,
    RuntimeForecast,
    busiest_arrivals,
    estimate,
    expected_arrivals,
    moved_beyond_range,
    range_widening,
    spread_points,
    steady,
    widened,
)
from scheduler.cycle_requests import request_eta_refresh
from scheduler.models import Attempt, AttemptEnd, Cluster, Job, JobState
from scheduler.selectors.budget_changes import standing_change_notes
from scheduler.selectors.eta import (
    ARRIVAL_PERIODS,
    ARRIVAL_WINDOW_S,
    CACHE_S,
    METHOD,
    CachedJobEtas,
    answer_key,
    cached_etas,
    clock_since,
    current_job_etas,
    is_current,
    job_key,
    last_cycle_id,
    recent_submissions,
    runtime_history,
    stamp_key,
)
from scheduler.selectors.snapshot import ClusterSnapshot, after_stops, cluster_snapshot
from scheduler.selectors.translate import HOLD_PREFIX, MOVE_PREFIX
from scheduler.services.transitions import job_target

log = logging.getLogger(__name__)


def eta_refresh_request(
    *, jobs: Iterable[Job], last_cycles: Mapping[int, int] | None = None
) -> dict[int, CachedJobEtas]:
    """Queue an ETA refresh for each cluster of the pending `jobs` whose cached answer is
    stale or misses one of them; never raises (without Redis no ETA until it returns).
    Answers with the cached answers it found current (cluster id -> the answer for its
    pending `jobs`): the caller reads their ETAs there (`job_eta(current=)`) instead of
    reading the cache a second time. `last_cycles`: cluster id -> its last cycle id,
    where the caller read it in this request already (`StoredQueue.last_cycle_id`)."""
    by_cluster: dict[int, list[int]] = defaultdict(list)
    for job in jobs:
        if job.state == JobState.PENDING:
            by_cluster[job.cluster_id].append(job.pk)
    current: dict[int, CachedJobEtas] = {}
    for cluster_id, job_ids in by_cluster.items():
        found = cluster_eta_refresh_request(
            cluster_id=cluster_id,
            job_ids=job_ids,
            last_cycle=(last_cycles or {}).get(cluster_id),
        )
        if found is not None:
            current[cluster_id] = found
    return current


def cluster_eta_refresh_request(
    *, cluster_id: int, job_ids: list[int], last_cycle: int | None = None
) -> CachedJobEtas | None:
    """Queue an ETA refresh of the cluster when its cached answer is stale or misses one
    of its pending jobs `job_ids` (a page of the cluster's queue); never raises. The
    cached answer for `job_ids` when it is current (nothing queued), else None.
    `last_cycle`: the cluster's last cycle id if the caller read it already."""
    if not job_ids:
        return None
    found = current_job_etas(cluster_id=cluster_id, job_ids=job_ids, last_cycle=last_cycle)
    if found is None:
        request_eta_refresh(cluster_id)
    return found


def _iso(t: float | None) -> str | None:
    return None if t is None else dt.datetime.fromtimestamp(t, tz=dt.UTC).isoformat()


def _epoch(text: str | None) -> float | None:
    return None if text is None else dt.datetime.fromisoformat(text).timestamp()


def _from_dict(shown: dict[str, Any] | None) -> Estimate | None:
    """The estimate a cached answer showed (None for none, or one without a start)."""
    if not shown or shown.get("method") != METHOD:
        return None
    return Estimate(
        start=_epoch(shown["start"]),
        earliest=_epoch(shown["earliest"]),
        latest=_epoch(shown["latest"]),
        baseline_start=_epoch(shown["baseline_start"]),
    )


def _as_dict(est: Estimate) -> dict[str, Any]:
    return {
        "start": _iso(est.start),
        "earliest": _iso(est.earliest),
        "latest": _iso(est.latest),
        "method": est.method,
        "baseline_start": _iso(est.baseline_start),
        "moved": None,
    }


def cluster_etas(*, cluster: Cluster, fresh: bool = False) -> dict[str, dict[str, Any]]:
    """Job pk (as a string) -> its ETA (ISO times) for every pending job of `cluster`;
    cached per cluster and cycle (`fresh` recomputes). Computes in the caller: the
    worker's task (`scheduler.tasks.refresh_etas`) calls it, requests read the cache."""
    cycle_id = last_cycle_id(cluster.pk)
    now = time.time()
    if not fresh:
        cached = cached_etas(cluster.pk)
        if cached is not None and is_current(cached, cycle_id, now):
            return cached[2]
    # the refusals the live cycle keeps, with when each lapses (issue 25: a job refused
    # on every host was shown starting now while the cycle kept it off for hours)
    cs = cluster_snapshot(cluster=cluster, refusals=True)
    before = cached_etas(cluster.pk)
    shown_before = before[2] if before else {}
    out: dict[str, dict[str, Any]] = {}
    facts = _facts(cs)
    # each running job keeps its runtime quantile from one answer to the next
    kept = before[3].get("points", {}) if before else {}
    facts["points"] = spread_points((rw.workload.id for rw in cs.snapshot.running), kept)
    fresh_estimates = _estimates(cluster, cs, facts["points"])
    first_before = before[3].get("first", {}) if before else {}
    facts["first"] = _first_estimates(first_before, fresh_estimates, cs.now)
    widening = range_widening(_calibration(cluster.pk, first_before, facts["first"]))
    change_notes = _change_notes(cs, before[3] if before else None, facts)
    for wid, raw in fresh_estimates.items():
        est = widened(raw, cs.now, widening)
        previous = _from_dict(shown_before.get(wid))
        shown = steady(previous, est, cs.now)
        out[wid] = _as_dict(shown)
        if moved_beyond_range(previous, shown):
            assert previous is not None and previous.start is not None and before is not None
            out[wid]["moved"] = {
                "at": _iso(cs.now),
                "previous_start": _iso(previous.start),
                "because": _move_cause(
                    before[3],
                    facts,
                    wid,
                    shown,
                    fresh_estimates,
                    previous.start,
                    change_notes.get(wid),
                ),
            }
        elif wid in shown_before:  # the last explained move stays until the next one
            out[wid]["moved"] = shown_before[wid].get("moved")
    for wid in cs.waiting:  # its victims are stopping: it starts as soon as they exit
        at = _iso(cs.now)
        out[wid] = {
            "start": at,
            "earliest": at,
            "latest": at,
            "method": "victims-stopping",
            "baseline_start": at,
            "moved": None,
        }
    try:
        cache.set(answer_key(cluster.pk), (cycle_id, now, out, facts), CACHE_S)
        # what a request reads: each job's answer on its own, then the stamp that makes
        # them current (a job whose answer carries another stamp is not known)
        cache.set_many({job_key(cluster.pk, wid): (now, est) for wid, est in out.items()}, CACHE_S)
        cache.set(stamp_key(cluster.pk), (cycle_id, now), CACHE_S)
    except Exception as exc:
        log.warning("could not store the ETAs of cluster %s: %s", cluster.pk, exc)
    return out


def _estimates(
    cluster: Cluster, cs: ClusterSnapshot, points: dict[str, int]
) -> dict[str, Estimate]:
    """The forward runs' estimate of every pending job of `cs`: runtimes forecast from
    the cluster's history, the expected arrivals from its recent submissions, the
    running jobs at their spread `points`, each refused job kept off the hosts that
    refused it until that lapses."""
    index = tree_index()
    speed = cluster.clock_speed
    history = runtime_history(
        cluster_id=cluster.pk, now=cs.at, index=index, speed=speed, ran_since=clock_since(cluster)
    )
    # a moving job held, and charged, once; a victim's stop taken as done (`after_stops`)
    snap = after_stops(cs, requeued=stop_requeues)
    ids = [int(w.id) for v in snap.pending.values() for w in v]
    ids += [int(r.workload.id) for r in snap.running if r.workload.id.isdigit()]
    ids += [int(wid) for wid in cs.waiting]
    users = {
        str(pk): name
        for pk, name in Job.objects.filter(pk__in=ids).values_list("pk", "submitter__username")
    }
    # GPUs held for a job (the ones a moving job starts again on, the free part of the
    # block a job waits for its victims on): the job's own, its submitter's runtimes
    for prefix in (MOVE_PREFIX, HOLD_PREFIX):
        users.update(
            {
                r.workload.id: users.get(r.workload.id.removeprefix(prefix), "")
                for r in snap.running
                if r.workload.id.startswith(prefix)
            }
        )
    window = ARRIVAL_WINDOW_S / speed
    recent, since = recent_submissions(cluster, cs.at, index, window)
    return estimate(
        snap,
        cs.policy,
        cs.now,
        RuntimeForecast(history),
        users=users,
        arrivals=expected_arrivals(recent, cs.now, window, ARRIVAL_PERIODS, since=since),
        busy_arrivals=busiest_arrivals(recent, cs.now, window, ARRIVAL_PERIODS),
        points=points,
        avoid_until=cs.avoid_until,
        # the jobs pending now: a victim requeued in the forward runs is still stopping
        targets={w.id for ws in cs.snapshot.pending.values() for w in ws},
    )


def stop_requeues(work: Workload, started: bool) -> bool:
    """Whether a job being preempted is back in the queue when its stop ends: the live
    cycle's one rule (`job_target`); `started`: whether the cluster reported its run
    started (one that never did goes back even if not resumable: it lost no work).
    `after_stops` asks it."""
    end = job_target(AttemptEnd.PREEMPTED, resumable=work.resumable, started=started)
    return end == JobState.PENDING


def _first_estimates(
    before: dict[str, tuple[float, float, float, float]],
    estimates: dict[str, Estimate],
    now: float,
) -> dict[str, tuple[float, float, float, float]]:
    """Each pending job's first complete estimate (stated at, start, earliest, latest),
    kept until it starts: what calibrates the range (`_calibration`)."""
    first = {}
    for wid, est in estimates.items():
        if wid in before:
            first[wid] = before[wid]
        elif est.start is not None and est.earliest is not None and est.latest is not None:
            first[wid] = (now, est.start, est.earliest, est.latest)
    return first


def _calibration_key(cluster_id: int) -> str:
    return f"eta-calibration:{cluster_id}"


def _calibration(
    cluster_id: int,
    before: dict[str, tuple[float, float, float, float]],
    still_pending: dict[str, tuple[float, float, float, float]],
) -> list[tuple[float, float, float, float, float]]:
    """The cluster's recent (stated at, start, earliest, latest, real start) records,
    with those of the jobs that started since the last answer added (kept in the cache,
    the most recent `CALIBRATION_KEEP`)."""
    key = _calibration_key(cluster_id)
    try:
        records = list(cache.get(key) or ())
    except Exception as exc:  # Redis down: no calibration this time
        log.warning("could not read the ETA calibration of cluster %s: %s", cluster_id, exc)
        return []
    gone = {int(wid) for wid in before if wid not in still_pending and wid.isdigit()}
    for job_id, started_at in _wait_ends(gone, before):
        records.append((*before[str(job_id)], started_at))
    records = records[-CALIBRATION_KEEP:]
    if gone:
        try:
            cache.set(key, records, None)
        except Exception as exc:
            log.warning("could not store the ETA calibration of cluster %s: %s", cluster_id, exc)
    return records


def _wait_ends(
    job_ids: Collection[int], first: dict[str, tuple[float, float, float, float]]
) -> list[tuple[int, float]]:
    """(job pk, real start) of the jobs among `job_ids` that started after their first
    estimate `first[pk]` was stated: the first attempt that started since then (a
    requeued job's wait ends with a later attempt than its first; counting the first
    attempt's start, before the estimate, read as a miss of many waits and widened every
    range: issue 25). A job that left the queue without starting has none."""
    rows = Attempt.objects.filter(job_id__in=job_ids, started_at__isnull=False).values_list(
        "job_id", "started_at"
    )
    ends: dict[int, float] = {}
    for job_id, started_at in rows:
        at = started_at.timestamp()
        if at >= first[str(job_id)][0] and at < ends.get(job_id, math.inf):
            ends[job_id] = at
    return sorted(ends.items())


def _facts(cs: ClusterSnapshot) -> dict[str, Any]:
    """What an ETA depends on besides the runtimes: kept with the answer so that the
    next one can say why a job's estimate moved."""
    hosts = cs.snapshot.hosts
    return {
        "hosts": len(hosts),
        "hosts_healthy": sum(1 for h in hosts if h.healthy),
        "tree_version": cs.tree_version,
        "at": cs.now,
        "pending": sorted(w.id for ws in cs.snapshot.pending.values() for w in ws),
    }


def _change_notes(
    cs: ClusterSnapshot, before: dict[str, Any] | None, now: dict[str, Any]
) -> dict[str, str]:
    """Pending job id -> the explained budget change (`standing_change_notes`, the queue
    reasons' words) that moved its project's entitled share since the answer that saw
    `before`; none when the tree did not change. A change that left a job's project's
    share as it was is no cause of its move."""
    if before is None or now["tree_version"] == before.get("tree_version", now["tree_version"]):
        return {}
    project_of = {
        w.id: node_id
        for project, ws in cs.snapshot.pending.items()
        if (node_id := cs.node_id(project)) is not None
        for w in ws
    }
    notes = standing_change_notes(
        project_ids=set(project_of.values()),
        since=dt.datetime.fromtimestamp(before["at"], tz=dt.UTC),
        until=timezone.now(),
    )
    return {wid: notes[pid] for wid, pid in project_of.items() if pid in notes}


def _move_cause(
    before: dict[str, Any],
    now: dict[str, Any],
    wid: str,
    shown: Estimate,
    estimates: dict[str, Estimate],
    previous_start: float,
    change_note: str | None = None,
) -> str:
    """Why job `wid`'s shown start moved beyond its range since the answer that saw
    `before` (at `previous_start`): a budget change that moved its project's entitled
    share (`change_note`, in the queue reasons' words) either way; later, a host down or
    jobs submitted since that start first; sooner, a host back; else running jobs that
    end later or sooner than forecast. A cause that can only delay a job never explains
    a start that came closer (a job page once said "moved from 13:02: 2 jobs submitted
    since start before it" of an estimate that moved to 12:04)."""
    if change_note and now["tree_version"] != before.get("tree_version", now["tree_version"]):
        return change_note
    assert shown.start is not None
    if shown.start < previous_start:
        if now["hosts_healthy"] > before.get("hosts_healthy", now["hosts_healthy"]):
            return f"a host came back ({now['hosts_healthy']} of {now['hosts']} hosts healthy)"
        return "jobs ahead of it left the queue or running jobs are ending sooner than forecast"
    if now["hosts_healthy"] < before.get("hosts_healthy", now["hosts_healthy"]):
        return (
            f"a host went down ({now['hosts_healthy']} of {now['hosts']} hosts healthy, "
            f"{before['hosts_healthy']} before)"
        )
    known = set(before.get("pending", ()))
    ahead = [
        other
        for other in now["pending"]
        if other not in known
        and other != wid
        and (e := estimates.get(other)) is not None
        and e.start is not None
        and e.start <= shown.start
    ]
    if ahead:
        return f"{len(ahead)} job{'s' if len(ahead) > 1 else ''} submitted since start before it"
    return "running jobs are ending later than forecast"
