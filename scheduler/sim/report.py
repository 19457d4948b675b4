"""REPORT.json, INTERVALS.csv, JOBS.csv and the policy comparison table (pure Python).

`build_report(result, tree)` turns a `SimResult` into the dict of issue 3:

- ``occupancy``: busy GPU-time on healthy hosts / available healthy GPU-time (the
  ``capacity`` steps of the result). A run on a host that went unhealthy stops counting
  as busy from that moment (the host is no longer available capacity).
- ``demand_x_capacity`` (beyond the issue's keys): time-averaged GPUs of jobs queued or
  running / time-averaged available GPUs, the "demand 2-3x capacity" of SPEC 1.6.
- ``allocated_share`` / ``unallocated_share``: shares of all busy GPU-time.
- ``entitlement``: see `ledger.accounting` (entitled share x healthy capacity, capped
  hour by hour by the project's allocated demand; ``ratio_hourly`` is the stricter
  per-hour variant; projects entitled to nothing have ratio ``None``).
- ``wait_s``: one sample per start (submit or requeue -> start), percentiles by linear
  interpolation; ``by_kind`` per trace kind, and ``by_class`` with
  ``debug_le8gpu_le15min`` = allocated jobs of <= 8 GPUs with min runtime <= 15 min.
  Stats with no samples have ``count`` 0 and ``None`` elsewhere.
- ``preemptions`` (``total``, ``by_reason``), ``jobs`` (only jobs submitted by the end
  of the run: a ``--until-days`` cut-off leaves later trace rows out), ``drain`` (host
  unhealthy -> empty, over drains that finished), ``wall_s``.
- Jobs still pending at the end contribute no wait sample (their open waits are not
  in ``wait_s``; compare ``wait_s.all.count`` with ``jobs.pending_at_end``).
"""

from __future__ import annotations

import csv
import math
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from ledger.accounting import DemandSpan, entitlement_summary
from scheduler.engine.types import BudgetNode
from scheduler.sim.model import ClusterSpec, JobState, SimResult

__all__ = [
    "DEBUG_CLASS",
    "INTERVAL_COLUMNS",
    "JOB_COLUMNS",
    "build_report",
    "capacity_steps",
    "comparison_table",
    "entitled_shares",
    "percentile",
    "wait_stats",
    "write_intervals_csv",
    "write_jobs_csv",
]

DEBUG_CLASS = "debug_le8gpu_le15min"
DEBUG_MAX_GPUS = 8
DEBUG_MAX_MIN_RUNTIME_S = 15 * 60.0
INTERVAL_COLUMNS = (
    "job_id",
    "project",
    "kind",
    "gpus",
    "hosts",
    "start_s",
    "end_s",
    "allocated",
    "end_reason",
)
JOB_COLUMNS = (
    "job_id",
    "project",
    "kind",
    "gpus",
    "min_runtime_s",
    "submit_s",
    "state",
    "end_s",
    "starts",
    "wait_total_s",
    "waits_s",
    "preemptions",
)


def entitled_shares(tree: BudgetNode) -> dict[str, float]:
    """Each leaf's entitled share of the cluster: product of weight / sum(sibling weights).

    Siblings whose weights sum to 0 all get share 0.
    """
    out: dict[str, float] = {}
    stack: list[tuple[BudgetNode, float]] = [(tree, 1.0)]
    while stack:
        node, share = stack.pop()
        if not node.children:
            out[node.name] = share
            continue
        total = sum(c.weight for c in node.children)
        for c in node.children:
            stack.append((c, share * c.weight / total if total > 0 else 0.0))
    # depth-first, left to right, like the tree file
    order: list[str] = []
    walk = [tree]
    while walk:
        n = walk.pop()
        if n.children:
            walk.extend(reversed(n.children))
        else:
            order.append(n.name)
    return {name: out[name] for name in order}


def percentile(sorted_values: Sequence[float], q: float) -> float:
    """Percentile ``q`` (0..100) of sorted values, linear interpolation between ranks."""
    n = len(sorted_values)
    if n == 0:
        raise ValueError("no values")
    pos = (n - 1) * q / 100.0
    lo = math.floor(pos)
    hi = min(lo + 1, n - 1)
    frac = pos - lo
    return sorted_values[lo] + (sorted_values[hi] - sorted_values[lo]) * frac


def wait_stats(values: Iterable[float]) -> dict[str, Any]:
    """``{count, mean, p50, p90, p99, max}`` of wait samples (None when there are none)."""
    vals = sorted(values)
    if not vals:
        return {"count": 0, "mean": None, "p50": None, "p90": None, "p99": None, "max": None}
    return {
        "count": len(vals),
        "mean": math.fsum(vals) / len(vals),
        "p50": percentile(vals, 50),
        "p90": percentile(vals, 90),
        "p99": percentile(vals, 99),
        "max": vals[-1],
    }


def capacity_steps(cluster: ClusterSpec, start_s: float) -> list[tuple[float, int]]:
    """Healthy GPUs over time from the cluster's health events: ``[(t, gpus from t on)]``."""
    gpus = {h.name: h.gpus for h in cluster.hosts}
    healthy = dict.fromkeys(gpus, True)
    total = sum(gpus.values())
    steps: list[tuple[float, int]] = [(start_s, total)]
    for ev in sorted(cluster.events, key=lambda e: e.at_s):
        if ev.host not in healthy or healthy[ev.host] == ev.healthy:
            continue
        healthy[ev.host] = ev.healthy
        total += gpus[ev.host] if ev.healthy else -gpus[ev.host]
        t = max(ev.at_s, start_s)
        if steps[-1][0] == t:
            steps[-1] = (t, total)
        else:
            steps.append((t, total))
    return steps


def _unhealthy_windows(cluster: ClusterSpec, end_s: float) -> dict[str, list[tuple[float, float]]]:
    """Per host, the [from, to) windows during which it was unhealthy."""
    since: dict[str, float] = {}
    out: dict[str, list[tuple[float, float]]] = defaultdict(list)
    for ev in sorted(cluster.events, key=lambda e: e.at_s):
        if not ev.healthy:
            since.setdefault(ev.host, ev.at_s)
        elif ev.host in since:
            out[ev.host].append((since.pop(ev.host), ev.at_s))
    for host, t in since.items():
        out[host].append((t, end_s))
    return dict(out)


def _overlap(a0: float, a1: float, b0: float, b1: float) -> float:
    return max(0.0, min(a1, b1) - max(a0, b0))


def _integrate_steps(steps: Sequence[tuple[float, float]], start_s: float, end_s: float) -> float:
    total = 0.0
    for i, (t, v) in enumerate(steps):
        t_next = steps[i + 1][0] if i + 1 < len(steps) else end_s
        total += v * _overlap(t, t_next, start_s, end_s)
    return total


def _ratio(num: float, den: float) -> float | None:
    return num / den if den > 0 else None


def average_demand_gpus(result: SimResult) -> float:
    """Time-averaged GPUs asked for (jobs queued or running) over the run."""
    t0, t1 = result.start_s, result.end_s
    total = 0.0
    for j in result.jobs:
        if j.rejected:
            continue
        end = t1 if j.end_s is None else min(j.end_s, t1)
        total += j.gpus * max(0.0, end - max(j.submit_s, t0))
    return total / max(t1 - t0, 1e-9)


def build_report(result: SimResult, tree: BudgetNode) -> dict[str, Any]:
    """The REPORT.json figures of one simulated run (see the module docstring)."""
    t0, t1 = result.start_s, result.end_s
    capacity = result.capacity or capacity_steps(result.cluster, t0)
    available = _integrate_steps(capacity, t0, t1)
    bad = _unhealthy_windows(result.cluster, t1)

    busy = busy_alloc = busy_healthy = 0.0
    for iv in result.intervals:
        span = _overlap(iv.start_s, iv.end_s, t0, t1)
        if span <= 0:
            continue
        gpu_s = iv.gpus * span
        busy += gpu_s
        if iv.allocated:
            busy_alloc += gpu_s
        lost = 0.0
        if bad and iv.hosts:
            per_host = iv.gpus / len(iv.hosts)
            for h in iv.hosts:
                for w0, w1 in bad.get(h, ()):
                    lost += per_host * _overlap(iv.start_s, iv.end_s, max(w0, t0), min(w1, t1))
        busy_healthy += gpu_s - lost

    # jobs submitted after a cut-off (--until-days) were never part of the run
    jobs = [j for j in result.jobs if j.submit_s <= t1]
    shares = entitled_shares(tree)
    demand = [
        DemandSpan(j.project, j.gpus, j.submit_s, j.end_s if j.end_s is not None else t1)
        for j in jobs
        if j.min_runtime_s > 0
    ]
    ent = entitlement_summary(shares, result.intervals, demand, capacity, t0, t1)

    waits_all: list[float] = []
    by_kind: dict[str, list[float]] = defaultdict(list)
    debug: list[float] = []
    for j in jobs:
        if not j.waits_s:
            continue
        waits_all.extend(j.waits_s)
        by_kind[j.kind].extend(j.waits_s)
        if 0 < j.min_runtime_s <= DEBUG_MAX_MIN_RUNTIME_S and j.gpus <= DEBUG_MAX_GPUS:
            debug.extend(j.waits_s)

    states = Counter(j.state for j in jobs)
    drain_times = sorted(d.ready_s - d.start_s for d in result.drains if d.ready_s is not None)

    return {
        "occupancy": _ratio(busy_healthy, available),
        "demand_x_capacity": _ratio(average_demand_gpus(result) * (t1 - t0), available),
        "allocated_share": _ratio(busy_alloc, busy),
        "unallocated_share": _ratio(busy - busy_alloc, busy),
        "entitlement": {
            "overall": ent.overall,
            "worst": ent.worst,
            "worst_project": ent.worst_project,
            "projects_at_95": ent.projects_at_95,
            "projects": {
                name: {
                    "entitled_share": shares.get(name, 0.0),
                    "entitled_gpu_h": pe.entitled_gpu_h,
                    "delivered_gpu_h": pe.delivered_gpu_h,
                    "ratio": pe.ratio,
                    "ratio_hourly": pe.ratio_hourly,
                }
                for name, pe in ent.projects.items()
            },
        },
        "wait_s": {
            "all": wait_stats(waits_all),
            "by_kind": {k: wait_stats(v) for k, v in sorted(by_kind.items())},
            "by_class": {DEBUG_CLASS: wait_stats(debug)},
        },
        "preemptions": {
            "total": len(result.preemptions),
            "by_reason": dict(sorted(Counter(p.reason_code for p in result.preemptions).items())),
        },
        "jobs": {
            "submitted": len(jobs),
            "completed": states.get(JobState.COMPLETED, 0),
            "terminated": states.get(JobState.TERMINATED, 0),
            "pending_at_end": states.get(JobState.PENDING, 0),
            "running_at_end": states.get(JobState.RUNNING, 0),
        },
        "drain": {
            "drains": len(result.drains),
            "median_s": percentile(drain_times, 50) if drain_times else None,
            "max_s": drain_times[-1] if drain_times else None,
        },
        "wall_s": result.wall_s,
    }


def _num(v: float) -> str:
    return repr(float(v)) if not float(v).is_integer() else str(int(v))


def write_intervals_csv(result: SimResult, path: str | Path) -> None:
    """One row per run interval, so anyone can recompute the report's figures."""
    with open(path, "w", newline="", encoding="utf-8") as fh:
        w = csv.writer(fh)
        w.writerow(INTERVAL_COLUMNS)
        for iv in sorted(result.intervals, key=lambda i: (i.start_s, i.job_id)):
            w.writerow(
                [
                    iv.job_id,
                    iv.project,
                    iv.kind,
                    iv.gpus,
                    ";".join(iv.hosts),
                    _num(iv.start_s),
                    _num(iv.end_s),
                    1 if iv.allocated else 0,
                    str(iv.end_reason),
                ]
            )


def write_jobs_csv(result: SimResult, path: str | Path) -> None:
    """One row per trace job: its final state, waits (``;``-separated) and preemptions."""
    with open(path, "w", newline="", encoding="utf-8") as fh:
        w = csv.writer(fh)
        w.writerow(JOB_COLUMNS)
        for j in result.jobs:
            w.writerow(
                [
                    j.job_id,
                    j.project,
                    j.kind,
                    j.gpus,
                    _num(j.min_runtime_s),
                    _num(j.submit_s),
                    j.state,
                    "" if j.end_s is None else _num(j.end_s),
                    len(j.waits_s),
                    _num(math.fsum(j.waits_s)),
                    ";".join(_num(x) for x in j.waits_s),
                    j.preemptions,
                ]
            )


def _fmt_pct(v: float | None) -> str:
    return "-" if v is None else f"{100 * v:.1f}%"


def _fmt_s(v: float | None) -> str:
    if v is None:
        return "-"
    if v < 120:
        return f"{v:.0f}s"
    if v < 7200:
        return f"{v / 60:.1f}m"
    return f"{v / 3600:.1f}h"


def comparison_table(reports: Mapping[str, Mapping[str, Any]]) -> str:
    """A markdown table comparing policies' reports side by side (one column per policy)."""
    names = list(reports)

    def row(label: str, fn: Any) -> list[str]:
        cells = []
        for n in names:
            try:
                cells.append(fn(reports[n]))
            except (KeyError, TypeError):
                cells.append("-")
        return [label, *cells]

    def at95(r: Mapping[str, Any]) -> str:
        ent = r["entitlement"]
        rated = sum(1 for p in ent["projects"].values() if p["ratio"] is not None)
        return f"{ent['projects_at_95']}/{rated}"

    rows = [
        row("occupancy", lambda r: _fmt_pct(r["occupancy"])),
        row("demand / capacity", lambda r: f"{r['demand_x_capacity'] or 0:.2f}x"),
        row("unallocated share", lambda r: _fmt_pct(r["unallocated_share"])),
        row("entitlement overall", lambda r: _fmt_pct(r["entitlement"]["overall"])),
        row(
            "entitlement worst",
            lambda r: (
                f"{_fmt_pct(r['entitlement']['worst'])} ({r['entitlement']['worst_project']})"
                if r["entitlement"]["worst"] is not None
                else "-"
            ),
        ),
        row("projects at >= 95%", at95),
        row("wait p50 (all)", lambda r: _fmt_s(r["wait_s"]["all"]["p50"])),
        row("wait p90 (all)", lambda r: _fmt_s(r["wait_s"]["all"]["p90"])),
        row("debug wait p90", lambda r: _fmt_s(r["wait_s"]["by_class"][DEBUG_CLASS]["p90"])),
        row("preemptions", lambda r: str(r["preemptions"]["total"])),
        row("jobs completed", lambda r: f"{r['jobs']['completed']}/{r['jobs']['submitted']}"),
        row("wall", lambda r: f"{r['wall_s']:.1f}s"),
    ]
    header = ["figure", *names]
    widths = [max(len(x[i]) for x in [header, *rows]) for i in range(len(header))]

    def line(cells: Sequence[str]) -> str:
        first = cells[0].ljust(widths[0])
        rest = [c.rjust(w) for c, w in zip(cells[1:], widths[1:], strict=True)]
        return "| " + " | ".join([first, *rest]) + " |"

    sep = (
        "|"
        + "|".join("-" * (w + 2) if i == 0 else "-" * (w + 1) + ":" for i, w in enumerate(widths))
        + "|"
    )
    return "\n".join([line(header), sep, *(line(r) for r in rows)])
