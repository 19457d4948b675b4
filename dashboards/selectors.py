"""Reads behind the dashboards: occupancy buckets, entitlement delivery, fair share now,
waits, preemptions and drains, and a researcher's own jobs and projects.

Periods, occupancy and the fair-share figures are the ledger's (`ledger.selectors`, also
behind its REST endpoints); delivery sums the ledger's hourly ProjectHour rows per step
in PostgreSQL. Waits, preemptions and drains come from
the append-only records (attempts, job events, host events). Everything is plain data
(lists and dicts); `dashboards.charts` turns it into Plotly figures and CSV.
"""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Iterable
from typing import Any

from django.db import connection
from django.db.models import (
    Case,
    F,
    IntegerField,
    OuterRef,
    Q,
    Subquery,
    Sum,
    Value,
    When,
)
from django.utils import timezone

from allot_common.figures import fixed_text, level_fs_text
from budgets import permissions
from budgets.models import NodeKind
from budgets.selectors import TreeIndex, tree_index
from config.plainsql import fetch_all
from ledger import selectors as ledger_selectors
from ledger.accounting import delivery_ratio
from ledger.models import ProjectHour
from ledger.selectors import Period, Span, step_starts
from scheduler.models import (
    ACTIVE_STATES,
    Attempt,
    Cluster,
    Host,
    HostEvent,
    HostHealth,
    Job,
    JobEvent,
    JobState,
)
from scheduler.selectors.standing import start_order

GOOD_RATIO = 0.95  # a project "got what its budget promised" at >= 95% (SPEC 1.6)
BUCKET_LABELS = {
    "within_entitlement_gpu_h": "Allocated within entitlement",
    "borrowed_gpu_h": "Allocated above entitlement (borrowed)",
    "unallocated_gpu_h": "Unallocated (free) runs",
    "idle_demand_gpu_h": "Idle while work waited",
    "idle_gpu_h": "Idle, no work waiting",
    "draining_gpu_h": "Draining",
    "down_gpu_h": "Down",
}


def cluster_list() -> list[Cluster]:
    return list(Cluster.objects.order_by("name"))


# --- entitlement delivery ------------------------------------------------------------


def _ratio(delivered: float, entitled: float) -> float | None:
    return delivery_ratio(delivered, entitled)


def delivery(period: Period, *, user, index: TreeIndex | None = None) -> dict[str, Any]:
    """Per project: entitled, delivered, demand and their ratio over the period (the
    viewer's governed projects first), the count at >= 95%, and per step the total
    delivered and entitled with the cumulative credit (+) or debt (-)."""
    index = index or tree_index()
    by_project, by_step = _delivery_sums(period)
    mine = permissions.my_projects(user, index)
    projects = []
    for pid, (entitled_h, delivered_h, demand_h, unallocated_h) in by_project.items():
        projects.append(
            {
                "project_id": pid,
                "path": index.path(pid) if pid in index.nodes else str(pid),
                "entitled_gpu_h": entitled_h,
                "delivered_gpu_h": delivered_h,
                "demand_gpu_h": demand_h,
                "unallocated_gpu_h": unallocated_h,
                "ratio": _ratio(delivered_h, entitled_h),
                "mine": pid in mine,
            }
        )
    projects.sort(key=lambda p: (not p["mine"], p["path"]))
    rated = [p for p in projects if p["ratio"] is not None]
    steps = step_starts(period)
    delivered = [round(by_step.get(at, (0.0, 0.0))[1], 3) for at in steps]
    entitled = [round(by_step.get(at, (0.0, 0.0))[0], 3) for at in steps]
    cumulative, running = [], 0.0
    for d, e in zip(delivered, entitled, strict=True):
        running += d - e
        cumulative.append(round(running, 3))
    return {
        "projects": projects,
        "rated": len(rated),
        "good": sum(1 for p in rated if p["ratio"] >= GOOD_RATIO),
        "steps": steps,
        "delivered": delivered,
        "entitled": entitled,
        "cumulative": cumulative,
        "has_data": bool(projects),
    }


DeliverySums = tuple[dict[int, tuple[float, ...]], dict[dt.datetime, tuple[float, float]]]


def _delivery_sums(period: Period) -> DeliverySums:
    """Sums of the period's ProjectHour rows per project (entitled, delivered, demand,
    unallocated) and per step (entitled, delivered), in one scan (GROUPING SETS).

    Kept per cluster and period (`ledger.selectors.kept_for_period`): paging through
    the table or a second viewer does not scan the rows again (the rollups change at
    most hourly)."""
    return ledger_selectors.kept_for_period("delivery", period, lambda: _scan_delivery(period))


def _scan_delivery(period: Period) -> DeliverySums:
    """`_delivery_sums` read from the rows."""
    step_sql = "date_trunc('day', hour AT TIME ZONE 'UTC')" if period.step == "day" else "hour"
    sql = f"""
        SELECT project_id, {step_sql} AS step, GROUPING(project_id) AS by_step,
               SUM(entitled_gpu_h), SUM(allocated_gpu_h), SUM(demand_gpu_h),
               SUM(unallocated_gpu_h)
        FROM {ProjectHour._meta.db_table}
        WHERE cluster_id = %s AND hour >= %s AND hour < %s
        GROUP BY GROUPING SETS ((project_id), ({step_sql}))
    """  # noqa: S608 (no user input in the text: table name and a fixed expression)
    by_project: dict[int, tuple[float, ...]] = {}
    by_step: dict[dt.datetime, tuple[float, float]] = {}
    with connection.cursor() as cursor:
        cursor.execute(sql, [period.cluster.pk, period.since, period.until])
        for project_id, step, grouped_by_step, entitled, delivered, demand, unallocated in cursor:
            if grouped_by_step:
                at = step if step.tzinfo else step.replace(tzinfo=dt.UTC)
                by_step[at] = (entitled or 0.0, delivered or 0.0)
            else:
                by_project[project_id] = (
                    entitled or 0.0,
                    delivered or 0.0,
                    demand or 0.0,
                    unallocated or 0.0,
                )
    return by_project, by_step


# --- fair share now -----------------------------------------------------------------


def fairshare_now(
    *, viewer, cluster: Cluster, now: dt.datetime | None = None, index: TreeIndex | None = None
) -> dict[str, Any]:
    """As of the cluster's last scheduling cycle (`as_of`, `from_cycle`: the ledger's
    `fairshare`), `rows`: each node of the budget tree below the root (depth first) with
    its entitled share, window usage (GPU-hours, as that cycle read it), level fair share
    (S / U) and fair-share factor (the ledger's `sshare -l` rows), and what that means
    for its jobs. `index`: the budget tree, when the caller has read it already."""
    rows = []
    answer = ledger_selectors.fairshare(viewer=viewer, cluster=cluster, now=now, index=index)
    nodes = answer["nodes"]
    ranked = sum(1 for n in nodes if n["rank"] is not None)
    for node in nodes:
        if node["depth"] == 0:
            continue
        infinite = node["level_fs_infinite"]
        level_fs = math.inf if infinite else node["level_fs"]
        entitled = node["entitled_share"] > 0.0
        rows.append(
            {
                **{k: node[k] for k in ("id", "path", "name", "kind", "depth", "entitled_share")},
                "usage_gpu_h": node["raw_usage"],
                "usage_share": node["effective_usage"],
                "level_fs": node["level_fs"] if entitled else None,
                "level_fs_infinite": infinite and entitled,
                "level_fs_text": level_fs_text(level_fs)
                if entitled and level_fs is not None
                else None,
                "factor": node["fairshare"],
                "rank": node["rank"],
                "ranked": ranked,
                "entitled": entitled,
                "sentence": fairshare_sentence(
                    is_project=node["kind"] == NodeKind.PROJECT,
                    level_fs=level_fs,
                    factor=node["fairshare"],
                    no_entitlement=not entitled,
                ),
            }
        )
    return {
        "as_of": answer["as_of"],
        "from_cycle": answer["from_cycle"],
        "usage_window": answer["usage_window"],
        "rows": rows,
    }


def fairshare_sentence(
    *, is_project: bool, level_fs: float | None, factor: float | None, no_entitlement: bool
) -> str:
    """One sentence saying what a node's figures mean for its jobs."""
    who = "Its jobs" if is_project else "Jobs below it"
    if no_entitlement:
        return (
            f"No entitlement (a weight of 0 on its path): {who.lower()} run only unallocated, "
            "on GPUs nobody else claims, and may be preempted at any time; not ranked."
        )
    if level_fs is None:
        return "No figures yet."
    if math.isinf(level_fs):
        return f"No usage in the window: {who.lower()} go before siblings that used GPUs."
    # the words follow the figure the page shows beside them (two decimals, `fixed_text`),
    # so 0.9988 reads "at its share (level FS 1.00)", never "more than its share (1.00)"
    shown = level_fs_text(level_fs)
    rank = f" (factor {fixed_text(factor, 2)})" if factor is not None else ""
    if shown == "1.00":
        return (
            f"Used about its share (level FS {shown}): {who.lower()} go before siblings "
            f"that used more and after those that used less{rank}."
        )
    if level_fs > 1.0:
        return (
            f"Used less than its share (level FS {shown}): "
            f"{who.lower()} go before siblings that used more{rank}."
        )
    return (
        f"Used more than its share (level FS {shown}): {who.lower()} wait behind "
        "siblings below their share, and its unprotected runs may be preempted for them."
    )


# --- waits, preemptions, drains -------------------------------------------------------


def _step_sql(period: Period, column: str) -> str:
    """The SQL of the start of the step (UTC, without a time zone) that `column` is in."""
    unit = {"hour": "hour", "day": "day"}[period.step]  # the text is never the request's
    return f"date_trunc('{unit}', {column} AT TIME ZONE 'UTC')"


def _utc(at: dt.datetime) -> dt.datetime:
    return at if at.tzinfo else at.replace(tzinfo=dt.UTC)


def wait_rows(period: Period) -> list[dict[str, Any]]:
    """p50/p90 wait (seconds) per step and job kind, of the jobs whose first attempt
    started in the period: wait = first start - submission; the percentiles with linear
    interpolation between ranks (PostgreSQL's `percentile_cont`: one row per step and
    kind comes back, however many jobs started)."""
    # A job's first start is before the period's end exactly when one of its attempts
    # started before it (and then it is the earliest of those): the scan stops there.
    sql = f"""
        SELECT {_step_sql(period, "f.first")} AS at, j.kind, COUNT(*),
               percentile_cont(0.5) WITHIN GROUP (ORDER BY w.wait_s),
               percentile_cont(0.9) WITHIN GROUP (ORDER BY w.wait_s)
        FROM (
            SELECT job_id, MIN(started_at) AS first FROM {Attempt._meta.db_table}
            WHERE cluster_id = %s AND started_at < %s
            GROUP BY job_id HAVING MIN(started_at) >= %s
        ) f
        JOIN {Job._meta.db_table} j ON j.id = f.job_id
        CROSS JOIN LATERAL (
            SELECT GREATEST(EXTRACT(EPOCH FROM f.first - j.submitted_at)::float8, 0.0) AS wait_s
        ) w
        GROUP BY 1, 2
    """  # noqa: S608 (no user input in the text: table names and the period's step)
    rows = fetch_all(sql, [period.cluster.pk, period.until, period.since])
    return [
        {"at": _utc(at), "kind": kind, "jobs": jobs, "p50_wait_s": p50, "p90_wait_s": p90}
        for at, kind, jobs, p50, p90 in sorted(rows, key=lambda r: (_utc(r[0]), r[1]))
    ]


def preemption_rows(period: Period) -> list[dict[str, Any]]:
    """Preemptions per step and rule (job events that name the rule that allowed them),
    counted by PostgreSQL."""
    sql = f"""
        SELECT {_step_sql(period, "e.at")} AS at, e.rule, COUNT(*)
        FROM {JobEvent._meta.db_table} e JOIN {Job._meta.db_table} j ON j.id = e.job_id
        WHERE j.cluster_id = %s AND e.at >= %s AND e.at < %s AND e.rule <> ''
        GROUP BY 1, 2
    """  # noqa: S608 (no user input in the text: table names and the period's step)
    rows = fetch_all(sql, [period.cluster.pk, period.since, period.until])
    return [
        {"at": _utc(at), "rule": rule, "count": n}
        for at, rule, n in sorted(rows, key=lambda r: (_utc(r[0]), r[1]))
    ]


def drain_rows(period: Period, *, now: dt.datetime | None = None) -> list[dict[str, Any]]:
    """Each drain that overlaps the period: host, start, end (None while it lasts),
    duration in hours and the reason."""
    at_now = now or timezone.now()
    sql = f"""
        SELECT e.host_id, h.name, e.at, e.to_health, e.reason, e.actor_name
        FROM {HostEvent._meta.db_table} e JOIN {Host._meta.db_table} h ON h.id = e.host_id
        WHERE h.cluster_id = %s AND e.at < %s
        ORDER BY e.host_id, e.at, e.id
    """  # noqa: S608 (no user input in the text: table names)
    open_drains: dict[int, HostChange] = {}
    drains = []
    for event in fetch_all(sql, [period.cluster.pk, period.until]):
        host_id, at, to_health = event[0], event[2], event[3]
        started = open_drains.get(host_id)
        if started is not None and to_health != HostHealth.DRAINING:
            drains.append(_drain(started, at))
            del open_drains[host_id]
        if to_health == HostHealth.DRAINING and started is None:
            open_drains[host_id] = event
    drains.extend(_drain(e, None) for e in open_drains.values())
    kept = [d for d in drains if (d["ended_at"] or at_now) >= period.since]
    for d in kept:
        d["duration_h"] = ((d["ended_at"] or at_now) - d["started_at"]).total_seconds() / 3600
    kept.sort(key=lambda d: d["started_at"], reverse=True)
    return kept


# A host's health change as drain_rows reads it: host id, host name, at, to health,
# reason, actor name.
HostChange = tuple[int, str, dt.datetime, str, str, str]


def _drain(event: HostChange, ended_at: dt.datetime | None) -> dict[str, Any]:
    _, host, at, _, reason, actor = event
    return {
        "host": host,
        "started_at": at,
        "ended_at": ended_at,
        "reason": reason,
        "actor": actor,
    }


# --- a researcher's own page ------------------------------------------------------------


class MyJobs:
    """A user's jobs as My jobs lists them: pending ones in the order they will start
    (`start_order`: their queue positions), then running ones (an open attempt) by when
    their run started, the earliest first, then the others newest first. A sequence a
    Paginator pages: the pending pks are read once and a page's jobs in one query,
    however many jobs the user has and whatever a page holds."""

    def __init__(self, user):
        jobs = Job.objects.filter(submitter=user)
        pending = jobs.filter(state=JobState.PENDING).values_list("pk", "cluster_id")
        self.pending = start_order(pending)
        self.others = _started_order(jobs.exclude(state=JobState.PENDING))
        self._others_count: int | None = None

    def count(self) -> int:
        if self._others_count is None:
            self._others_count = self.others.count()
        return len(self.pending) + self._others_count

    def __len__(self) -> int:
        return self.count()

    def __getitem__(self, window: slice) -> list[Job]:
        start, stop = window.start or 0, window.stop if window.stop is not None else self.count()
        pks = self.pending[start:stop]
        chosen = Q(pk__in=pks)
        more = stop - start - len(pks)
        if more > 0:
            skip = max(0, start - len(self.pending))
            chosen |= Q(pk__in=self.others.values("pk")[skip : skip + more])
        whens = (When(pk=pk, then=Value(i)) for i, pk in enumerate(pks))
        place = Case(*whens, default=None, output_field=IntegerField())
        page = _started_order(Job.objects.filter(chosen)).select_related("cluster", "project")
        page = page.annotate(place=place).order_by(
            F("place").asc(nulls_last=True), *self.others.query.order_by
        )
        return list(page) if pks or more > 0 else []


def _started_order(jobs):
    """`jobs` running first (an open attempt), by when their run started, the earliest
    first; then the others newest first."""
    run_start = (
        Attempt.objects.filter(job=OuterRef("pk"), ended_at__isnull=True)
        .order_by("-number")
        .values("started_at")[:1]
    )
    return jobs.annotate(
        running_first=Case(
            When(state__in=ACTIVE_STATES, then=Value(0)),
            default=Value(1),
            output_field=IntegerField(),
        ),
        run_started=Subquery(run_start),
    ).order_by("running_first", F("run_started").asc(nulls_last=True), "-id")


def my_jobs(*, user) -> MyJobs:
    """The user's jobs in My jobs' order (`MyJobs`)."""
    return MyJobs(user)


def my_projects(*, user, span: Span) -> list[dict[str, Any]]:
    """The projects the user is a member or manager of (directly or through a node
    they manage), with delivered vs entitled GPU-hours per cluster over `span` (the
    default reporting period: `ledger.periods.resolve_span()`)."""
    index = tree_index()
    project_ids = _projects_under(index, permissions.my_projects(user, index))
    sums = (
        ProjectHour.objects.filter(
            project_id__in=project_ids, hour__gte=span.since, hour__lt=span.until
        )
        .values("project_id", "cluster__name")
        .annotate(
            entitled=Sum("entitled_gpu_h"),
            delivered=Sum("allocated_gpu_h"),
            demand=Sum("demand_gpu_h"),
        )
    )
    found = {(r["project_id"]): [] for r in sums}
    for r in sums:
        found[r["project_id"]].append(
            {
                "cluster": r["cluster__name"],
                "entitled_gpu_h": r["entitled"] or 0.0,
                "delivered_gpu_h": r["delivered"] or 0.0,
                "demand_gpu_h": r["demand"] or 0.0,
                "ratio": _ratio(r["delivered"] or 0.0, r["entitled"] or 0.0),
            }
        )
    return [
        {
            "id": pid,
            "path": index.path(pid),
            "entitled_share": index.shares[pid].entitled if pid in index.shares else 0.0,
            "clusters": sorted(found.get(pid, []), key=lambda c: c["cluster"]),
        }
        for pid in sorted(project_ids, key=index.path)
    ]


def _projects_under(index: TreeIndex, node_ids: Iterable[int]) -> set[int]:
    projects: set[int] = set()
    for nid in node_ids:
        if nid not in index.nodes:
            continue
        for candidate in [nid, *index.descendants(nid)]:
            if not index.children.get(candidate):
                projects.add(candidate)
    return projects


def my_project_ids(user, index: TreeIndex | None = None) -> set[int]:
    """The projects the user is a member or manager of (directly or through a node
    they manage): the rows a table marks as theirs. `index`: the budget tree, when the
    caller has read it already."""
    index = index or tree_index()
    return _projects_under(index, permissions.my_projects(user, index))
