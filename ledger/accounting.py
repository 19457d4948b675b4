"""Occupancy accounting, shared by the simulator and the live service (pure Python).

Run intervals -> hourly buckets, entitlement (capped hour by hour by demand) and
delivery per project. Every function takes plain sequences and returns plain data, so
the live ledger can feed it rows from the database and the simulator its `SimResult`.

Definitions (hour ``h`` is ``[start_s + h*3600, start_s + (h+1)*3600)``, the last one
may be shorter; all quantities are GPU-hours):

- capacity_h: healthy GPU-time available in hour h (integral of the capacity steps).
- delivered_h[p]: GPU-time of project p's *allocated* runs in hour h (unallocated runs
  are charged to no budget and never count).
- demand_h[p]: GPU-time of p's allocated jobs that are *present* (pending or running,
  from submit to their end) in hour h.
- entitled_h[p] = min(share[p] * capacity_h, demand_h[p]): a project that asked for
  nothing in an hour was entitled to nothing in that hour.
- ratio[p] = sum_h delivered_h / sum_h entitled_h: the delivery ratio of the glossary
  (docs/concepts.md), not capped, as the dashboards show it: above 1 the project also
  ran on GPUs no other project claimed; time above the share in one hour may make up
  for time below it in another.
- ratio_hourly[p] = sum_h min(delivered_h, entitled_h) / sum_h entitled_h: the stricter
  variant, where over-delivery in one hour cannot make up for under-delivery in another
  (an entitlement-weighted mean of the per-hour ratios capped at 1).
- overall = sum_p min(delivered[p], entitled[p]) / sum_p entitled[p]: the share of all
  entitled GPU-hours that were received (an over-served project does not hide an
  under-served one).
- Projects entitled to nothing over the whole run have ratio ``None`` and are left out
  of ``worst`` and ``projects_at_95``.

Cost: O(1) per interval plus O(hours) per project (difference arrays), so 61 days x 15
projects x 100k intervals take a fraction of a second.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum

from allot_common.figures import delivery_ratio

HOUR_S = 3600.0

__all__ = [
    "HOUR_S",
    "DemandSpan",
    "OccupancyHour",
    "EndReason",
    "EntitlementSummary",
    "ProjectEntitlement",
    "RunInterval",
    "bucket_spans",
    "capacity_hourly",
    "delivered_hourly",
    "delivery_ratio",
    "demand_hourly",
    "entitlement_hourly",
    "entitlement_summary",
    "hour_count",
    "occupancy_hour",
]


class EndReason(StrEnum):
    COMPLETED = "completed"
    PREEMPTED = "preempted"
    DRAINED = "drained"
    HOST_DOWN = "host_down"
    RUNNING_AT_END = "running_at_end"


@dataclass(frozen=True, slots=True)
class RunInterval:
    """One run of a job: from a start to its stop. One row of INTERVALS.csv."""

    job_id: str
    project: str
    kind: str
    gpus: int
    hosts: tuple[str, ...]
    start_s: float
    end_s: float
    allocated: bool
    end_reason: EndReason


@dataclass(frozen=True, slots=True)
class DemandSpan:
    """An allocated job present in the system (pending or running) from start_s to end_s."""

    project: str
    gpus: int
    start_s: float
    end_s: float


@dataclass(frozen=True, slots=True)
class ProjectEntitlement:
    project: str
    entitled_gpu_h: float
    delivered_gpu_h: float
    ratio: float | None
    ratio_hourly: float | None


@dataclass(frozen=True, slots=True)
class EntitlementSummary:
    overall: float | None
    worst: float | None
    worst_project: str | None
    projects_at_95: int
    projects: dict[str, ProjectEntitlement] = field(default_factory=dict)


def hour_count(start_s: float, end_s: float) -> int:
    """Number of hourly buckets covering [start_s, end_s) (the last may be partial)."""
    if end_s <= start_s:
        return 0
    return max(1, math.ceil((end_s - start_s) / HOUR_S - 1e-9))


def bucket_spans(
    spans: Iterable[tuple[str, float, float, float]], start_s: float, end_s: float
) -> dict[str, list[float]]:
    """Sum ``weight x overlap`` per key and hour, in weight-hours.

    ``spans`` are ``(key, weight, span_start_s, span_end_s)``; spans are clipped to
    ``[start_s, end_s)``. Each span costs O(1): partial first/last hours are added
    directly, the full hours in between through a difference array.
    """
    n = hour_count(start_s, end_s)
    direct: dict[str, list[float]] = {}
    diff: dict[str, list[float]] = {}
    for key, weight, s, e in spans:
        if s < start_s:
            s = start_s
        if e > end_s:
            e = end_s
        if e <= s or weight == 0:
            continue
        b = direct.get(key)
        if b is None:
            b = direct[key] = [0.0] * n
            diff[key] = [0.0] * (n + 1)
        hs = int((s - start_s) // HOUR_S)
        he = int((e - start_s) // HOUR_S)
        if he >= n:  # e == end_s on an hour boundary
            he = n - 1
        if hs == he:
            b[hs] += weight * (e - s)
            continue
        b[hs] += weight * (start_s + (hs + 1) * HOUR_S - s)
        b[he] += weight * (e - (start_s + he * HOUR_S))
        if he > hs + 1:
            d = diff[key]
            d[hs + 1] += weight * HOUR_S
            d[he] -= weight * HOUR_S
    out: dict[str, list[float]] = {}
    for key, b in direct.items():
        d = diff[key]
        run = 0.0
        res = [0.0] * n
        for h in range(n):
            run += d[h]
            res[h] = (b[h] + run) / HOUR_S
        out[key] = res
    return out


def delivered_hourly(
    intervals: Iterable[RunInterval], start_s: float, end_s: float, *, allocated_only: bool = True
) -> dict[str, list[float]]:
    """GPU-hours delivered per project and hour (allocated runs only by default)."""
    return bucket_spans(
        (
            (iv.project, iv.gpus, iv.start_s, iv.end_s)
            for iv in intervals
            if iv.allocated or not allocated_only
        ),
        start_s,
        end_s,
    )


def demand_hourly(
    spans: Iterable[DemandSpan], start_s: float, end_s: float
) -> dict[str, list[float]]:
    """Allocated GPU-hours demanded (jobs present, pending or running) per project and hour."""
    return bucket_spans(((d.project, d.gpus, d.start_s, d.end_s) for d in spans), start_s, end_s)


def capacity_hourly(
    capacity: Sequence[tuple[float, int | float]], start_s: float, end_s: float
) -> list[float]:
    """Healthy GPU-hours available per hour from ``(time, gpus from then on)`` steps.

    Steps must be sorted by time; capacity before the first step is 0.
    """
    spans = []
    for i, (t, gpus) in enumerate(capacity):
        t_next = capacity[i + 1][0] if i + 1 < len(capacity) else end_s
        spans.append(("", float(gpus), t, t_next))
    return bucket_spans(spans, start_s, end_s).get("", [0.0] * hour_count(start_s, end_s))


def entitlement_hourly(
    shares: Mapping[str, float],
    capacity_h: Sequence[float],
    demand_h: Mapping[str, Sequence[float]],
) -> dict[str, list[float]]:
    """Per project and hour: min(entitled share x capacity, the project's demand)."""
    out: dict[str, list[float]] = {}
    n = len(capacity_h)
    for project, share in shares.items():
        dem = demand_h.get(project)
        if dem is None or share <= 0:
            out[project] = [0.0] * n
            continue
        out[project] = [min(share * c, d) for c, d in zip(capacity_h, dem, strict=True)]
    return out


def entitlement_summary(
    shares: Mapping[str, float],
    intervals: Iterable[RunInterval],
    demand: Iterable[DemandSpan],
    capacity: Sequence[tuple[float, int | float]],
    start_s: float,
    end_s: float,
    *,
    threshold: float = 0.95,
) -> EntitlementSummary:
    """Entitled vs delivered GPU-hours per project over [start_s, end_s) (see module doc).

    ``shares`` lists every project with its entitled share of the cluster (0..1); projects
    that appear only in intervals or demand are reported with share 0.
    """
    cap_h = capacity_hourly(capacity, start_s, end_s)
    dem_h = demand_hourly(demand, start_s, end_s)
    del_h = delivered_hourly(intervals, start_s, end_s)
    ent_h = entitlement_hourly(shares, cap_h, dem_h)
    names = list(shares) + sorted((set(del_h) | set(dem_h)) - set(shares))
    projects: dict[str, ProjectEntitlement] = {}
    sum_capped = 0.0
    sum_ent = 0.0
    for p in names:
        ent = ent_h.get(p)
        dlv = del_h.get(p)
        e_total = math.fsum(ent) if ent else 0.0
        d_total = math.fsum(dlv) if dlv else 0.0
        ratio = delivery_ratio(d_total, e_total) if ent else None
        if ent and ratio is not None:
            pairs = zip(dlv or [0.0] * len(ent), ent, strict=True)
            hourly = math.fsum(min(d, e) for d, e in pairs)
            ratio_hourly: float | None = min(1.0, hourly / e_total)
            sum_capped += min(d_total, e_total)
            sum_ent += e_total
        else:
            ratio = ratio_hourly = None
        projects[p] = ProjectEntitlement(p, e_total, d_total, ratio, ratio_hourly)
    rated = [(pe.ratio, pe.project) for pe in projects.values() if pe.ratio is not None]
    worst = min(rated, key=lambda rp: rp[0]) if rated else None
    return EntitlementSummary(
        overall=(sum_capped / sum_ent) if sum_ent > 0 else None,
        worst=worst[0] if worst else None,
        worst_project=worst[1] if worst else None,
        projects_at_95=sum(1 for r, _ in rated if r >= threshold - 1e-12),
        projects=projects,
    )


@dataclass(frozen=True, slots=True)
class OccupancyHour:
    """One hour of a cluster split into buckets that sum to ``capacity`` (GPU-hours)."""

    capacity: float
    healthy: float
    within_entitlement: float
    borrowed: float
    unallocated: float
    idle_demand: float
    idle: float
    draining: float
    down: float


def occupancy_hour(
    *,
    capacity: float,
    healthy: float,
    down: float,
    draining_idle: float,
    allocated: Mapping[str, float],
    entitled: Mapping[str, float],
    unallocated: float,
    demand: float,
) -> OccupancyHour:
    """Split one hour of a cluster into the occupancy buckets (sum == ``capacity``).

    ``allocated``/``entitled`` are per project; allocated GPU-time up to the project's
    entitlement is *within*, the rest *borrowed*. GPU-time neither run nor down nor
    draining is idle: *idle_demand* up to the allocated demand that was not running
    (``demand - allocated``), plain *idle* for the rest. Runs recorded on hosts counted
    down or draining (a lost host, a slow stop) are taken out of those buckets first, so
    the buckets still sum to the capacity.
    """
    within = math.fsum(min(a, entitled.get(p, 0.0)) for p, a in allocated.items())
    allocated_total = math.fsum(allocated.values())
    borrowed = max(0.0, allocated_total - within)
    busy = allocated_total + unallocated
    free = capacity - down - draining_idle - busy
    if free < 0:
        take = min(-free, draining_idle)
        draining_idle -= take
        free += take
        take = min(-free, down)
        down -= take
        free += take
    free = max(0.0, free)
    idle_demand = min(free, max(0.0, demand - allocated_total))
    return OccupancyHour(
        capacity=capacity,
        healthy=healthy,
        within_entitlement=within,
        borrowed=borrowed,
        unallocated=unallocated,
        idle_demand=idle_demand,
        idle=free - idle_demand,
        draining=draining_idle,
        down=down,
    )
