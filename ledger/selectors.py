"""Reads of the usage ledger.

`window_usage` is what a scheduling cycle hands the engine as `Snapshot.usage`: each
project's charged (allocated) GPU-seconds in the sliding look-back window, or the
exponentially decayed equivalent when the cluster has a half-life.

The rest serves the ledger's REST endpoints and the dashboards (which import it):
periods (`resolve_span`, `resolve_period`: what a request asks for, refused with a 400
naming the field), occupancy buckets and usage per project summed per step from the
hourly rollups in PostgreSQL, and fair share now (`sshare -l`) from the window usage.
"""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from django.db.models import F, Q, QuerySet, Sum
from django.db.models.functions import Least, TruncDay
from django.utils import timezone

from allot_common.figures import usage_window_text
from budgets import permissions
from budgets.selectors import TreeIndex, tree_index
from config.cache import kept
from config.errors import ApplicationError, NotFound, PermissionDenied, ValidationFailed
from ledger import pyramid as pyramid_figures
from ledger.accounting import delivery_ratio
from ledger.models import ClusterHour, ProjectHour
from ledger.periods import DAYS_CHOICES as DAYS_CHOICES
from ledger.periods import DEFAULT_DAYS as DEFAULT_DAYS
from ledger.periods import MAX_PERIOD as MAX_PERIOD
from ledger.periods import STEPS as STEPS
from ledger.periods import Period, Span, resolve_span, step_starts
from ledger.periods import floor_hour as floor_hour
from ledger.periods import parse_time as parse_time
from ledger.periods import report_end as report_end
from ledger.periods import step_key as step_key
from ledger.utilization import effective_gpu_h, utilization
from scheduler.core.engine.fairshare import fair_tree
from scheduler.models import Attempt, Cluster
from scheduler.selectors.clusters import resolve_cluster
from scheduler.selectors.queue import last_cycle
from scheduler.selectors.translate import engine_node_key, engine_tree

# Decayed usage ignores runs older than this many half-lives (their weight < 0.1%).
_HALF_LIVES_KEPT = 10


def window_usage(
    *, cluster_id: int, now: dt.datetime, lookback_s: float, half_life_s: float | None = None
) -> dict[int, float]:
    """Charged GPU-seconds per project node id on a cluster, as of `now`.

    Sliding window: the overlap of every allocated attempt's run with
    [now - lookback_s, now]. Half-life: each GPU-second weighted by
    2 ** (-age / half_life_s). Attempts still running count up to `now`."""
    horizon_s = half_life_s * _HALF_LIVES_KEPT if half_life_s else lookback_s
    window_start = now - dt.timedelta(seconds=horizon_s)
    runs = (
        Attempt.objects.filter(cluster_id=cluster_id, allocated=True, started_at__isnull=False)
        .filter(Q(ended_at__isnull=True) | Q(ended_at__gt=window_start))
        .filter(started_at__lt=now)
        .values_list("project_id", "gpus", "started_at", "ended_at")
    )
    usage: dict[int, float] = {}
    for project_id, gpus, started_at, ended_at in runs:
        start = max(started_at, window_start)
        end = min(ended_at or now, now)
        if end <= start:
            continue
        if half_life_s:
            age_end = (now - end).total_seconds()
            age_start = (now - start).total_seconds()
            rate = math.log(2) / half_life_s
            gpu_s = gpus * (math.exp(-rate * age_end) - math.exp(-rate * age_start)) / rate
        else:
            gpu_s = gpus * (end - start).total_seconds()
        usage[project_id] = usage.get(project_id, 0.0) + gpu_s
    return usage


# --- who may read ---------------------------------------------------------------------


def ensure_reader(viewer) -> None:
    """The ledger's figures (occupancy, usage per project, fair share) are aggregates
    without job names or specs: every participant reads them (`budgets.permissions`)."""
    if not permissions.is_participant(viewer):
        raise PermissionDenied(permissions.NO_ROLE_MESSAGE)


# --- periods (ledger.periods: one window end for every reporting figure) -------------


def resolve_period(
    *,
    cluster: str | int | Cluster | None,
    days: str | int | None = None,
    since: str | dt.datetime | None = None,
    until: str | dt.datetime | None = None,
    step: str | None = None,
    now: dt.datetime | None = None,
    missing: type[ApplicationError] = NotFound,
) -> Period:
    """The period a request asks for (see `resolve_span`). `cluster` is an id or a name
    (the first cluster by name when missing), or the cluster itself when the caller has
    read it; an unknown one raises `missing`."""
    if isinstance(cluster, Cluster):
        the_cluster = cluster
    elif cluster in (None, ""):
        first = Cluster.objects.order_by("name").first()
        if first is None:
            raise missing("There are no clusters yet.", field="cluster")
        the_cluster = first
    else:
        the_cluster = resolve_cluster(str(cluster), missing=missing)
    span = resolve_span(days=days, since=since, until=until, step=step, now=now)
    return Period(since=span.since, until=span.until, step=span.step, cluster=the_cluster)


def by_step(
    queryset: QuerySet,
    span: Span,
    group: Sequence[str],
    fields: Sequence[str],
    extra: dict[str, Any] | None = None,
):
    """Sums of the hourly rows' `fields` (and the `extra` aggregates) per step (UTC day
    for a day step) and `group` columns, ordered by step then `group`: dicts with
    `step`, the group and the sums."""
    if span.step == "day":
        queryset = queryset.annotate(step=TruncDay("hour", tzinfo=dt.UTC))
    else:
        queryset = queryset.annotate(step=F("hour"))
    return (
        queryset.filter(hour__gte=span.since, hour__lt=span.until)
        .values("step", *group)
        # extra first: they may sum a column that a sum below then names
        .annotate(**(extra or {}), **{f: Sum(f) for f in fields})
        .order_by("step", *group)
    )


# --- occupancy -------------------------------------------------------------------------

OCCUPANCY_FIELDS = ("capacity_gpu_h", "healthy_gpu_h", *ClusterHour.BUCKETS)


def occupancy_rows(period: Period, *, viewer) -> QuerySet:
    """Per step with ledger rows: the cluster's capacity, healthy GPU-hours and the seven
    occupancy buckets (which sum to the capacity), as dicts; steps without rows are
    left out (a cluster without history has none)."""
    ensure_reader(viewer)
    return by_step(ClusterHour.objects.filter(cluster=period.cluster), period, [], OCCUPANCY_FIELDS)


T = TypeVar("T")

# The rollups change at most hourly: the charts' sums per period are kept this long, so
# every load of the dashboards (and each of its viewers) does not sum the rows again.
LEDGER_SUMS_CACHE_S = 300


def kept_for_period(name: str, period: Period, compute: Callable[[], T]) -> T:
    """`compute()` for the cluster and period (`name`: which sums), kept
    LEDGER_SUMS_CACHE_S in the cache (`config.cache.kept`)."""
    key = (
        f"ledger:{name}:{period.cluster.pk}:{period.since.isoformat()}:"
        f"{period.until.isoformat()}:{period.step}"
    )
    return kept(key, compute, LEDGER_SUMS_CACHE_S)


def occupancy(period: Period, *, viewer) -> dict[str, Any]:
    """The cluster's GPU-hours per step (every step, 0 without rows) in the occupancy
    buckets, and the headline shares over the whole period (kept LEDGER_SUMS_CACHE_S)."""
    ensure_reader(viewer)
    return kept_for_period("occupancy", period, lambda: _occupancy(period, viewer=viewer))


def _occupancy(period: Period, *, viewer) -> dict[str, Any]:
    found = {row["step"]: row for row in occupancy_rows(period, viewer=viewer)}
    steps = step_starts(period)
    series: dict[str, list[float]] = {f: [] for f in OCCUPANCY_FIELDS}
    for at in steps:
        row = found.get(at)
        for f in OCCUPANCY_FIELDS:
            series[f].append(round(row[f], 3) if row else 0.0)
    totals = {f: sum(series[f]) for f in OCCUPANCY_FIELDS}
    capacity = totals["capacity_gpu_h"]
    healthy = totals["healthy_gpu_h"]
    allocated = totals["within_entitlement_gpu_h"] + totals["borrowed_gpu_h"]
    runs = allocated + totals["unallocated_gpu_h"]

    def of(value: float, whole: float) -> float | None:
        return value / whole if whole > 0 else None

    # docs/concepts.md: occupancy is runs / healthy capacity (beside it availability,
    # healthy / all capacity), the unallocated share is of all runs, idle while work
    # waited is a share of the capacity, as the simulator reports them
    return {
        "steps": steps,
        "series": series,
        "totals": totals,
        "has_data": bool(found),
        "headline": {
            "occupancy": pyramid_figures.occupancy(runs, healthy),
            "availability": pyramid_figures.availability(healthy, capacity),
            "unallocated_share": of(totals["unallocated_gpu_h"], runs),
            "idle_with_demand_share": of(totals["idle_demand_gpu_h"], capacity),
        },
    }


# --- the efficiency pyramid and per-project efficiency ---------------------------------

PYRAMID = ("availability", "occupancy", "impact", "utilization")


def pyramid(period: Period, *, viewer) -> dict[str, Any]:
    """The cluster's efficiency pyramid per step and over the period: availability,
    occupancy, impact and utilization (docs/concepts.md#the-efficiency-pyramid), each
    None where undefined (no capacity, nothing entitled, nothing measured). Kept
    LEDGER_SUMS_CACHE_S."""
    ensure_reader(viewer)
    return kept_for_period("pyramid", period, lambda: _pyramid(period))


def _pyramid(period: Period) -> dict[str, Any]:
    cluster_rows = {
        r["step"]: r
        for r in by_step(
            ClusterHour.objects.filter(cluster=period.cluster),
            period,
            [],
            ("capacity_gpu_h", "healthy_gpu_h", "within_entitlement_gpu_h", "borrowed_gpu_h",
             "unallocated_gpu_h"),
        )
    }  # fmt: skip
    project_rows = {
        r["step"]: r
        for r in by_step(
            ProjectHour.objects.filter(cluster=period.cluster),
            period,
            [],
            ("entitled_gpu_h", "measured_gpu_h", "utilized_gpu_h"),
        )
    }
    steps = step_starts(period)
    zero: dict[str, float] = {}
    sums = [{**cluster_rows.get(at, zero), **project_rows.get(at, zero)} for at in steps]
    total = {k: sum(float(s.get(k) or 0.0) for s in sums) for k in _PYRAMID_INPUTS}
    return {
        "steps": steps,
        "series": {name: [_pyramid_figure(name, s) for s in sums] for name in PYRAMID},
        "headline": {name: _pyramid_figure(name, total) for name in PYRAMID},
        "has_data": bool(cluster_rows),
    }


_PYRAMID_INPUTS = (
    "capacity_gpu_h",
    "healthy_gpu_h",
    "within_entitlement_gpu_h",
    "borrowed_gpu_h",
    "unallocated_gpu_h",
    "entitled_gpu_h",
    "measured_gpu_h",
    "utilized_gpu_h",
)


def _pyramid_figure(name: str, sums: dict[str, Any]) -> float | None:
    def v(key: str) -> float:
        return float(sums.get(key) or 0.0)

    if name == "availability":
        return pyramid_figures.availability(v("healthy_gpu_h"), v("capacity_gpu_h"))
    if name == "occupancy":
        runs = v("within_entitlement_gpu_h") + v("borrowed_gpu_h") + v("unallocated_gpu_h")
        return pyramid_figures.occupancy(runs, v("healthy_gpu_h"))
    if name == "impact":
        return pyramid_figures.impact(v("within_entitlement_gpu_h"), v("entitled_gpu_h"))
    return utilization(v("utilized_gpu_h"), v("measured_gpu_h"))


def efficiency(
    period: Period, *, viewer, mine: set[int] | None = None, index: TreeIndex | None = None
) -> list[dict[str, Any]]:
    """Per project of the cluster with runs in the period: GPU-hours held (allocated
    and unallocated runs), measured and utilized GPU-hours, its utilization and
    effective GPU-hours (None: unknown), lowest utilization first (unknown last).
    `index`: the budget tree, when the caller has read it already. The sums are kept
    LEDGER_SUMS_CACHE_S (`kept_for_period`)."""
    ensure_reader(viewer)
    index = index or tree_index()
    out = []
    for pid, allocated, unallocated, measured, utilized in kept_for_period(
        "efficiency", period, lambda: _efficiency_sums(period)
    ):
        held = allocated + unallocated
        if held <= 0.0 and not measured:
            continue
        share = utilization(utilized, measured)
        out.append(
            {
                "id": pid,
                "path": index.path(pid) if pid in index.nodes else str(pid),
                "held_gpu_h": held,
                "measured_gpu_h": measured,
                "utilized_gpu_h": utilized,
                "utilization": share,
                "effective_gpu_h": effective_gpu_h(held, share),
                "mine": mine is not None and pid in mine,
            }
        )
    out.sort(key=lambda p: (p["utilization"] is None, p["utilization"] or 0.0, p["path"]))
    return out


def _efficiency_sums(period: Period) -> list[tuple[int, float, float, float, float]]:
    """Per project with rows in the period: (id, allocated, unallocated, measured,
    utilized GPU-hours), by id."""
    rows = (
        ProjectHour.objects.filter(
            cluster=period.cluster, hour__gte=period.since, hour__lt=period.until
        )
        .values("project_id")
        .annotate(
            allocated=Sum("allocated_gpu_h"),
            unallocated=Sum("unallocated_gpu_h"),
            measured=Sum("measured_gpu_h"),
            utilized=Sum("utilized_gpu_h"),
        )
        .order_by("project_id")
    )
    return [
        (
            r["project_id"],
            float(r["allocated"] or 0.0),
            float(r["unallocated"] or 0.0),
            float(r["measured"] or 0.0),
            float(r["utilized"] or 0.0),
        )
        for r in rows
    ]


# --- usage per project -----------------------------------------------------------------

USAGE_FIELDS = (
    "allocated_gpu_h",
    "unallocated_gpu_h",
    "demand_gpu_h",
    "entitled_gpu_h",
    "measured_gpu_h",
    "utilized_gpu_h",
)


def resolve_node(value: str | int, *, index: TreeIndex, field: str = "project") -> int:
    """A budget node (project, program or organisation) by id or slug path."""
    node_id = index.find(value)
    if node_id is None:
        raise ValidationFailed(
            f"There is no budget node {str(value).strip()[:100]!r} (give an id, a path like "
            "'org/program/project' or the slug of one project alone).",
            field=field,
        )
    return node_id


def usage_rows(
    *, viewer, span: Span, cluster: Cluster | None = None, node_id: int | None = None
) -> QuerySet:
    """Per step, cluster and project with ledger rows: allocated, unallocated, demand,
    entitled and delivered GPU-hours (delivered is what the ledger charged: the
    allocated GPU-time, `ProjectHour.delivered_gpu_h`) and the part of it within the
    entitlement (the sum over the step's hours of min(allocated, entitled)).
    `cluster` None: every cluster; `node_id`: only the projects at or below that node.
    Dicts ordered by step, cluster and project id."""
    ensure_reader(viewer)
    rows = ProjectHour.objects.all()
    if cluster is not None:
        rows = rows.filter(cluster=cluster)
    if node_id is not None:
        index = tree_index()
        rows = rows.filter(project_id__in=[node_id, *index.descendants(node_id)])
    extra = {
        "delivered_gpu_h": Sum("allocated_gpu_h"),
        "within_entitlement_gpu_h": Sum(Least("allocated_gpu_h", "entitled_gpu_h")),
    }
    return by_step(rows, span, ["cluster_id", "cluster__name", "project_id"], USAGE_FIELDS, extra)


# --- fair share -------------------------------------------------------------------------


WINDOW_USAGE_CACHE_S = 600


def _cycle_window_usage(cluster: Cluster, at: dt.datetime) -> dict[int, float]:
    """`window_usage` as of a cycle's time `at`, computed once per cycle (by the first
    read after it; the fair-share chart, API and CLI read it on every request, and it
    scans every run in the window). A new cycle, lookback or half-life is a new key."""
    key = (
        f"ledger:window-usage:{cluster.pk}:{at.isoformat()}:{cluster.lookback_s}:"
        f"{cluster.half_life_s}"
    )
    return kept(
        key,
        lambda: window_usage(
            cluster_id=cluster.pk,
            now=at,
            lookback_s=cluster.lookback_s,
            half_life_s=cluster.half_life_s,
        ),
        WINDOW_USAGE_CACHE_S,
    )


def fairshare(
    *, viewer, cluster: Cluster, now: dt.datetime | None = None, index: TreeIndex | None = None
) -> dict[str, Any]:
    """`sshare -l` for a cluster as of its last scheduling cycle: every node of the
    budget tree (depth first, the root first) with raw shares (its weight), norm shares
    (share among its siblings), entitled share (of the cluster), raw usage (GPU-hours in
    the cluster's window as that cycle read it), norm usage (of the whole cluster's),
    effective usage (of its siblings' together: what Fair Tree compares), level FS (norm
    shares / effective usage; None with `level_fs_infinite` when it used nothing), the
    fair-share factor (Slurm's Fair Tree, the engine's own code) and, for projects, their
    rank (1 goes first). `index`: the budget tree, when the caller has read it already.

    `as_of` is the cycle's time (the queue's `computed_at`, `scheduler.selectors.queue.
    last_cycle`), so the factor and rank are the queue's; before the first cycle (`cycle`
    None, `from_cycle` False) the figures are as of `now`.

    A node with no entitlement (its weight or an ancestor's is 0) has no factor and no
    rank: its jobs run only unallocated, on GPUs nobody else claims, so they are not
    ranked among funded projects; ranks count the projects with an entitlement."""
    ensure_reader(viewer)
    stamp = last_cycle(cluster_id=cluster.pk)
    at = stamp.at if stamp else (now or timezone.now())
    index = index or tree_index()
    answer: dict[str, Any] = {
        "cluster": cluster.pk,
        "cluster_name": cluster.name,
        "as_of": at,
        "from_cycle": stamp is not None,
        "cycle": stamp.cycle_id if stamp else None,
        "usage_window": usage_window_text(cluster.lookback_s, cluster.half_life_s),
    }
    tree = engine_tree(index)
    if tree is None:
        return {**answer, "nodes": []}
    usage_by_node = _cycle_window_usage(cluster, at) if stamp else None
    if usage_by_node is None:
        usage_by_node = window_usage(
            cluster_id=cluster.pk,
            now=at,
            lookback_s=cluster.lookback_s,
            half_life_s=cluster.half_life_s,
        )
    usage = {index.path(n): v for n, v in usage_by_node.items() if n in index.nodes}
    computed = fair_tree(tree, usage)
    figures = computed["nodes"]
    order = computed["order"]
    assert isinstance(figures, dict) and isinstance(order, list)
    entitled_paths = {index.path(pk) for pk, share in index.shares.items() if share.entitled > 0.0}
    ranks = {path: i + 1 for i, path in enumerate(p for p in order if p in entitled_paths)}
    total_s = sum(usage.values())
    nodes = []
    for node, depth in index.walk():
        share = index.shares.get(node.pk)
        fig = figures.get(engine_node_key(index, node.pk), {}) if depth else {}
        used_s = fig.get("usage", 0.0) if depth else total_s
        level_fs = fig.get("level_fs")
        leaf = not index.children.get(node.pk)
        entitled = share.entitled if share else (1.0 if not depth else 0.0)
        nodes.append(
            {
                "id": node.pk,
                "path": index.path(node.pk),
                "name": node.name,
                "kind": node.kind,
                "depth": depth,
                "raw_shares": float(node.weight) if depth else None,  # the root has none
                "norm_shares": fig.get("norm_shares") if depth else 1.0,
                "entitled_share": entitled,
                "raw_usage": used_s / 3600.0,
                "norm_usage": used_s / total_s if total_s > 0 else 0.0,
                "effective_usage": fig.get("effective_usage")
                if depth
                else (1.0 if total_s else 0.0),
                "level_fs": None if level_fs is None or math.isinf(level_fs) else level_fs,
                "level_fs_infinite": level_fs is not None and math.isinf(level_fs),
                "fairshare": fig.get("fairshare") if entitled > 0.0 else None,
                "rank": ranks.get(index.path(node.pk)) if leaf and depth else None,
            }
        )
    return {**answer, "nodes": nodes}


# --- operators' metrics ----------------------------------------------------------------


def last_hour_occupancy(*, now: dt.datetime | None = None) -> list[tuple[str, str, float]]:
    """(cluster name, bucket, GPU-hours) of each cluster's last complete hour, the bucket
    named without its `_gpu_h` suffix; clusters without a row for that hour are left out."""
    hour = report_end(now) - dt.timedelta(hours=1)
    rows = ClusterHour.objects.filter(hour=hour).select_related("cluster").order_by("cluster__name")
    return [
        (row.cluster.name, bucket.removesuffix("_gpu_h"), getattr(row, bucket))
        for row in rows
        for bucket in ClusterHour.BUCKETS
    ]


def recorded_delivery(
    *, cluster: Cluster, since: dt.datetime, until: dt.datetime
) -> dict[int, dict[str, float | None]]:
    """What the ledger recorded per project over the hours [since, until) of a cluster:
    delivered, demand-capped entitled and demand GPU-hours and the delivery ratio (the
    what-if preview's "recorded" column; no viewer check: the caller has one)."""
    sums = (
        ProjectHour.objects.filter(cluster=cluster, hour__gte=since, hour__lt=until)
        .values("project_id")
        .annotate(
            delivered=Sum("allocated_gpu_h"),
            entitled=Sum("entitled_gpu_h"),
            demand=Sum("demand_gpu_h"),
        )
        .order_by("project_id")
    )
    return {
        row["project_id"]: {
            "delivered_gpu_h": row["delivered"] or 0.0,
            "entitled_gpu_h": row["entitled"] or 0.0,
            "demand_gpu_h": row["demand"] or 0.0,
            "ratio": delivery_ratio(row["delivered"] or 0.0, row["entitled"] or 0.0),
        }
        for row in sums
    }


def entitlement_ratios(*, now: dt.datetime | None = None) -> list[tuple[str, str, float]]:
    """(cluster name, project path, delivered / entitled GPU-hours) over the default
    reporting period (DEFAULT_DAYS days of complete hours to `report_end`, as the
    delivery dashboard's), for the projects entitled to something (above 1: it also ran
    on GPUs others did not claim)."""
    span = resolve_span(now=now)
    sums = (
        ProjectHour.objects.filter(hour__gte=span.since, hour__lt=span.until)
        .values("cluster__name", "project_id")
        .annotate(delivered=Sum("allocated_gpu_h"), entitled=Sum("entitled_gpu_h"))
        .filter(entitled__gt=0)
        .order_by("cluster__name", "project_id")
    )
    index = tree_index()
    return [
        (row["cluster__name"], index.path(row["project_id"]), ratio)
        for row in sums
        if row["project_id"] in index.nodes
        and (ratio := delivery_ratio(row["delivered"] or 0.0, row["entitled"])) is not None
    ]
