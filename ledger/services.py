"""Writes of the usage ledger: recompute the hourly rollups (ProjectHour, ClusterHour).

`rollups_refresh` rebuilds every row of a cluster for the hours in [since, until) from
the append-only record: attempts (runs), jobs (demand) and host events (health), with
the pure `ledger.accounting` arithmetic the simulator uses. It is idempotent (the rows
of those hours are replaced in one transaction), so it may run as often as wanted.

Entitled shares are those in force when each hour ended (for the current hour: at `now`),
from the audited budget history (`budgets.selectors.shares_as_of`): an hour rebuilt after
a weight change keeps the weights of its time.
Hours are recomputed up to `now`: the current hour is partial (its capacity too), and an
open attempt or a job still present counts up to `now`.
"""

from __future__ import annotations

import datetime as dt
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from budgets.selectors import TreeIndex, shares_as_of, tree_index, weight_changes_after
from ledger import accounting
from ledger.models import ClusterHour, ProjectHour
from ledger.utilization import utilization_hourly
from scheduler.models import Attempt, Host, HostEvent, HostHealth, Job, UtilizationSample

# per project and hour: allocated, unallocated, demand, entitled, measured, utilized GPU-h
_ProjectValues = tuple[float, float, float, float, float, float]

HOUR = dt.timedelta(hours=1)
LAST_INSTANT = dt.timedelta(microseconds=1)

Segment = tuple[float, float]  # [start_s, end_s)


def floor_hour(at: dt.datetime) -> dt.datetime:
    return at.astimezone(dt.UTC).replace(minute=0, second=0, microsecond=0)


def ceil_hour(at: dt.datetime) -> dt.datetime:
    floored = floor_hour(at)
    return floored if floored == at else floored + HOUR


@dataclass(slots=True)
class _HostHistory:
    gpus: int
    healthy: list[Segment]
    draining: list[Segment]
    down: list[Segment]


def _host_histories(cluster_id: int, start_s: float, end_s: float) -> dict[str, _HostHistory]:
    """Every host's health segments within [start_s, end_s), from its health events
    (health before its first event is that event's `from_health`; a host without events
    kept its current health)."""
    hosts = {h.pk: h for h in Host.objects.filter(cluster_id=cluster_id)}
    events: dict[int, list[tuple[float, str, str]]] = defaultdict(list)
    for host_id, at, from_h, to_h in (
        HostEvent.objects.filter(
            host__cluster_id=cluster_id, at__lt=dt.datetime.fromtimestamp(end_s, dt.UTC)
        )
        .order_by("at", "pk")
        .values_list("host_id", "at", "from_health", "to_health")
    ):
        events[host_id].append((at.timestamp(), from_h, to_h))
    out: dict[str, _HostHistory] = {}
    for host_id, host in hosts.items():
        history = _HostHistory(gpus=host.gpus, healthy=[], draining=[], down=[])
        host_events = events.get(host_id, [])
        before = [e for e in host_events if e[0] <= start_s]
        after = [e for e in host_events if e[0] > start_s]
        if before:
            state = before[-1][2]
        elif after:
            state = after[0][1]
        else:
            state = host.health
        t = start_s
        for at_s, _, to_h in after:
            _add_segment(history, state, t, at_s)
            state, t = to_h, at_s
        _add_segment(history, state, t, end_s)
        out[host.name] = history
    return out


def _add_segment(history: _HostHistory, state: str, start_s: float, end_s: float) -> None:
    if end_s <= start_s:
        return
    target = {
        HostHealth.HEALTHY: history.healthy,
        HostHealth.DRAINING: history.draining,
        HostHealth.DOWN: history.down,
    }.get(state, history.healthy)  # type: ignore[call-overload]
    target.append((start_s, end_s))


def _overlaps(start_s: float, end_s: float, segments: Sequence[Segment]) -> Iterable[Segment]:
    for s, e in segments:
        lo, hi = max(s, start_s), min(e, end_s)
        if hi > lo:
            yield lo, hi


@dataclass(slots=True)
class _Inputs:
    runs: list[accounting.RunInterval]
    demand: list[accounting.DemandSpan]
    hosts: dict[str, _HostHistory]


def _as_s(at: dt.datetime | None, default: float) -> float:
    return at.timestamp() if at is not None else default


def _load_inputs(cluster_id: int, since: dt.datetime, until: dt.datetime) -> _Inputs:
    start_s, end_s = since.timestamp(), until.timestamp()
    runs = [
        accounting.RunInterval(
            job_id=str(job_id),
            project=str(project_id),
            kind="",
            gpus=gpus,
            hosts=tuple(p.get("host", "") for p in (placements or [])),
            start_s=started.timestamp(),
            end_s=_as_s(ended, end_s),
            allocated=allocated,
            end_reason=accounting.EndReason.COMPLETED,
        )
        for job_id, project_id, gpus, placements, started, ended, allocated in Attempt.objects.filter(
            cluster_id=cluster_id, started_at__isnull=False, started_at__lt=until
        )
        .filter(Q(ended_at__isnull=True) | Q(ended_at__gt=since))
        .values_list(
            "job_id", "project_id", "gpus", "placements", "started_at", "ended_at", "allocated"
        )
    ]
    demand = [
        accounting.DemandSpan(
            project=str(project_id),
            gpus=gpus,
            start_s=submitted.timestamp(),
            end_s=_as_s(ended, end_s),
        )
        for project_id, gpus, submitted, ended in Job.objects.filter(
            cluster_id=cluster_id, min_runtime_s__gt=0, submitted_at__lt=until
        )
        .filter(Q(ended_at__isnull=True) | Q(ended_at__gt=since))
        .values_list("project_id", "gpus", "submitted_at", "ended_at")
    ]
    return _Inputs(runs=runs, demand=demand, hosts=_host_histories(cluster_id, start_s, end_s))


def _draining_busy_spans(
    runs: Sequence[accounting.RunInterval], hosts: dict[str, _HostHistory]
) -> Iterable[tuple[str, float, float, float]]:
    """GPU-time of runs on hosts while they were draining (not idle draining GPUs)."""
    for run in runs:
        if not run.hosts:
            continue
        per_host = run.gpus / len(run.hosts)
        for name in run.hosts:
            history = hosts.get(name)
            if history is None:
                continue
            for lo, hi in _overlaps(run.start_s, run.end_s, history.draining):
                yield "busy", per_host, lo, hi


def _host_spans(
    hosts: dict[str, _HostHistory], attribute: str
) -> Iterable[tuple[str, float, float, float]]:
    for history in hosts.values():
        for lo, hi in getattr(history, attribute):
            yield attribute, float(history.gpus), lo, hi


def _hourly(
    spans: Iterable[tuple[str, float, float, float]], key: str, start_s: float, end_s: float
) -> list[float]:
    return accounting.bucket_spans(spans, start_s, end_s).get(
        key, [0.0] * accounting.hour_count(start_s, end_s)
    )


def _leaves(index: TreeIndex) -> list[int]:
    return [
        node_id
        for node_id in index.nodes
        if not index.children.get(node_id) and index.nodes[node_id].parent_id is not None
    ]


def hourly_leaf_shares(since: dt.datetime, n: int, now: dt.datetime) -> list[dict[str, float]]:
    """For each of the `n` hours from `since`: each project's entitled share (by node id
    as text) in force when the hour ended, or at `now` for an hour not over yet. Hours
    with the same shares share one dict."""
    index = tree_index()
    leaves = _leaves(index)
    changes = weight_changes_after(since)
    memo: dict[int, dict[str, float]] = {}
    out = []
    for i in range(n):
        # the hour's last instant: a change at its end is the next hour's
        at = min(since + (i + 1) * HOUR, now) - LAST_INSTANT
        later = sum(1 for when, _, _ in changes if when > at)  # changes not yet in force
        if later not in memo:
            shares = shares_as_of(at, index=index, changes=changes)
            memo[later] = {str(pk): shares[pk].entitled for pk in leaves}
        out.append(memo[later])
    return out


def _entitled_hourly(
    shares_h: Sequence[dict[str, float]],
    healthy_h: Sequence[float],
    demand: dict[str, list[float]],
) -> dict[str, list[float]]:
    """`accounting.entitlement_hourly` over each run of hours with the same shares."""
    entitled: dict[str, list[float]] = {p: [] for p in demand}
    i, n = 0, len(healthy_h)
    while i < n:
        j = i
        while j < n and shares_h[j] is shares_h[i]:
            j += 1
        part = accounting.entitlement_hourly(
            {p: shares_h[i].get(p, 0.0) for p in demand},
            healthy_h[i:j],
            {p: d[i:j] for p, d in demand.items()},
        )
        for p, values in part.items():
            entitled[p].extend(values)
        i = j
    return entitled


@transaction.atomic
def rollups_refresh(
    *,
    cluster_id: int,
    since: dt.datetime,
    until: dt.datetime,
    now: dt.datetime | None = None,
) -> int:
    """Recompute the ProjectHour and ClusterHour rows of a cluster for the hours in
    [since, until) (widened to whole hours, cut at `now`). Returns the hours written.

    Rows of those hours are deleted and written again in one transaction (idempotent)."""
    now = now or timezone.now()
    since = floor_hour(since)
    until = min(ceil_hour(until), now)
    if until <= since:
        return 0
    start_s, end_s = since.timestamp(), until.timestamp()
    inputs = _load_inputs(cluster_id, since, until)
    n = accounting.hour_count(start_s, end_s)
    capacity_h = _hourly(
        (("c", float(h.gpus), start_s, end_s) for h in inputs.hosts.values()), "c", start_s, end_s
    )
    healthy_h = _hourly(_host_spans(inputs.hosts, "healthy"), "healthy", start_s, end_s)
    down_h = _hourly(_host_spans(inputs.hosts, "down"), "down", start_s, end_s)
    draining_h = _hourly(_host_spans(inputs.hosts, "draining"), "draining", start_s, end_s)
    drain_busy_h = _hourly(_draining_busy_spans(inputs.runs, inputs.hosts), "busy", start_s, end_s)
    allocated = accounting.delivered_hourly(inputs.runs, start_s, end_s)
    unallocated = accounting.bucket_spans(
        ((r.project, r.gpus, r.start_s, r.end_s) for r in inputs.runs if not r.allocated),
        start_s,
        end_s,
    )
    demand = accounting.demand_hourly(inputs.demand, start_s, end_s)
    entitled = _entitled_hourly(hourly_leaf_shares(since, n, now), healthy_h, demand)
    measured = utilization_hourly(_utilization_windows(cluster_id, since, until), start_s, end_s)
    _write_rows(
        cluster_id,
        since,
        n,
        now,
        _project_rows(allocated, unallocated, demand, entitled, measured, n),
        capacity_h,
        healthy_h,
        down_h,
        [max(0.0, d - b) for d, b in zip(draining_h, drain_busy_h, strict=True)],
    )
    return n


def _project_rows(
    allocated: dict[str, list[float]],
    unallocated: dict[str, list[float]],
    demand: dict[str, list[float]],
    entitled: dict[str, list[float]],
    measured: dict[str, list[tuple[float, float]]],
    n: int,
) -> dict[str, list[_ProjectValues]]:
    """Per project and hour: (allocated, unallocated, demand, entitled, measured,
    utilized) GPU-hours."""
    zeros = [0.0] * n
    pairs = [(0.0, 0.0)] * n
    projects = set(allocated) | set(unallocated) | set(demand) | set(measured)
    return {
        p: [
            (a, u, d, e, m[0], m[1])
            for a, u, d, e, m in zip(
                allocated.get(p, zeros),
                unallocated.get(p, zeros),
                demand.get(p, zeros),
                entitled.get(p, zeros),
                measured.get(p, pairs),
                strict=True,
            )
        ]
        for p in projects
    }


def _utilization_windows(
    cluster_id: int, since: dt.datetime, until: dt.datetime
) -> list[tuple[str, int, float, float, float, float]]:
    """The cluster's known utilization overlapping [since, until), for
    `utilization_hourly`: (project, GPUs, start, end, known seconds, mean %)."""
    rows = UtilizationSample.objects.filter(
        cluster_id=cluster_id, end__gte=since, start__lt=until
    ).values_list("attempt__project_id", "attempt__gpus", "start", "end", "known_s", "mean_pct")
    return [
        (str(project), gpus, start.timestamp(), end.timestamp(), known_s, pct)
        for project, gpus, start, end, known_s, pct in rows
    ]


def _write_rows(
    cluster_id: int,
    since: dt.datetime,
    n: int,
    now: dt.datetime,
    per_project: dict[str, list[_ProjectValues]],
    capacity_h: list[float],
    healthy_h: list[float],
    down_h: list[float],
    draining_idle_h: list[float],
) -> None:
    hours = [since + i * HOUR for i in range(n)]
    ProjectHour.objects.filter(
        cluster_id=cluster_id, hour__gte=hours[0], hour__lte=hours[-1]
    ).delete()
    ClusterHour.objects.filter(
        cluster_id=cluster_id, hour__gte=hours[0], hour__lte=hours[-1]
    ).delete()
    project_rows = []
    cluster_rows = []
    for i, hour in enumerate(hours):
        alloc_by_p: dict[str, float] = {}
        ent_by_p: dict[str, float] = {}
        unalloc = demand_total = 0.0
        for p, values in per_project.items():
            a, u, d, e, m, z = values[i]
            if a or u or d or e or m:
                project_rows.append(
                    ProjectHour(
                        cluster_id=cluster_id,
                        project_id=int(p),
                        hour=hour,
                        allocated_gpu_h=a,
                        unallocated_gpu_h=u,
                        demand_gpu_h=d,
                        entitled_gpu_h=e,
                        measured_gpu_h=m,
                        utilized_gpu_h=z,
                    )
                )
            alloc_by_p[p], ent_by_p[p] = a, e
            unalloc += u
            demand_total += d
        occ = accounting.occupancy_hour(
            capacity=capacity_h[i],
            healthy=healthy_h[i],
            down=down_h[i],
            draining_idle=draining_idle_h[i],
            allocated=alloc_by_p,
            entitled=ent_by_p,
            unallocated=unalloc,
            demand=demand_total,
        )
        cluster_rows.append(
            ClusterHour(
                cluster_id=cluster_id,
                hour=hour,
                computed_at=now,
                capacity_gpu_h=occ.capacity,
                healthy_gpu_h=occ.healthy,
                within_entitlement_gpu_h=occ.within_entitlement,
                borrowed_gpu_h=occ.borrowed,
                unallocated_gpu_h=occ.unallocated,
                idle_demand_gpu_h=occ.idle_demand,
                idle_gpu_h=occ.idle,
                draining_gpu_h=occ.draining,
                down_gpu_h=occ.down,
            )
        )
    ProjectHour.objects.bulk_create(project_rows, batch_size=2000)
    ClusterHour.objects.bulk_create(cluster_rows, batch_size=2000)
