"""REPORT.json, INTERVALS.csv, JOBS.csv and the policy comparison table (pure Python).

`build_report(result, tree, warmup_s=0)` turns a `SimResult` into a dict. The figures
of one window ``[start_s, end_s]`` (the whole run at the top level):

- ``occupancy``: busy GPU-time on healthy hosts / available healthy GPU-time (the
  ``capacity`` steps of the result). A run on a host that went unhealthy stops counting
  as busy from that moment (the host is no longer available capacity).
- ``occupancy_bound``: the same figure for the ideal schedule of `scheduler.core.sim.ideal`
  (fluid processor sharing of the trace's work on the same healthy capacity: no
  placement limits, nothing lost to preemption); ``occupancy_of_bound`` = occupancy /
  bound (above 1 when the run re-did lost work or finished differently).
- ``trace_span``: occupancy, bound and their ratio from the window's start to the last
  submission (the run can go on for days after it, until the last job ends).
- ``demand_x_capacity``: time-averaged GPUs of jobs queued or running / time-averaged
  available GPUs, the "demand 2-3x capacity" of SPEC 1.6.
- ``allocated_share`` / ``unallocated_share``: shares of all busy GPU-time.
- ``entitlement``: see `ledger.accounting` (entitled share x healthy capacity, capped
  hour by hour by the project's allocated demand; ``ratio_hourly`` is the stricter
  per-hour variant; projects entitled to nothing have ratio ``None``).
- ``wait_per_start_s``: one sample per start whose wait began (submit or requeue) in the window,
  percentiles by linear interpolation; ``by_kind`` per trace kind, and ``by_class`` with
  ``debug_le8gpu_le15min`` = allocated jobs of <= 8 GPUs with min runtime <= 15 min.
  Stats with no samples have ``count`` 0 and ``None`` elsewhere.
- ``time_to_share``: see `scheduler.core.sim.time_to_share`; episodes that began in the
  window: ``count``, ``p50``, ``p90``, ``max`` (the worst) and its project, and how many
  were still open when the run ended.
- ``preemptions`` in the window (``total``, ``by_reason``).

Top level only: ``last_submit_s``, ``ideal_end_s`` (when the ideal schedule's last job
ends), ``jobs`` (only jobs submitted by the end of the run: a ``--until-days`` cut-off
leaves later trace rows out), ``drain`` (host unhealthy -> empty, over drains that
finished), ``wall_s``; with ``warmup_s`` > 0, ``after_warmup`` repeats every window
figure over ``[start + warmup_s, end]`` (a cluster that starts empty takes days to fill).
Jobs still pending at the end contribute no wait sample (their open waits are not in
``wait_per_start_s``; compare ``wait_per_start_s.all.count`` with ``jobs.pending_at_end``).
"""

from __future__ import annotations

import csv
import math
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from ledger.accounting import DemandSpan, entitlement_summary
from scheduler.core.engine.budget_tree import entitled_shares
from scheduler.core.engine.types import BudgetNode, stop_rule
from scheduler.core.sim.ideal import ideal_schedule
from scheduler.core.sim.model import ClusterSpec, JobOutcome, JobState, SimResult
from scheduler.core.sim.time_to_share import ShareEpisode, share_episodes

__all__ = [
    "DEBUG_CLASS",
    "INTERVAL_COLUMNS",
    "JOB_COLUMNS",
    "build_report",
    "capacity_steps",
    "comparison_table",
    "entitled_shares",
    "percentile",
    "time_to_share_stats",
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


def average_demand_gpus(
    result: SimResult, start_s: float | None = None, end_s: float | None = None
) -> float:
    """Time-averaged GPUs asked for (jobs queued or running) over the run or a window of it."""
    t0 = result.start_s if start_s is None else start_s
    t1 = result.end_s if end_s is None else end_s
    total = 0.0
    for j in result.jobs:
        if j.rejected or j.submit_s > t1:
            continue
        end = t1 if j.end_s is None else min(j.end_s, t1)
        total += j.gpus * max(0.0, end - max(j.submit_s, t0))
    return total / max(t1 - t0, 1e-9)


class _Run:
    """What every window of a report is computed from, derived once per result."""

    def __init__(self, result: SimResult, tree: BudgetNode) -> None:
        self.result = result
        t0, t1 = result.start_s, result.end_s
        self.capacity = result.capacity or capacity_steps(result.cluster, t0)
        self.bad = _unhealthy_windows(result.cluster, t1)
        # jobs submitted after a cut-off (--until-days) were never part of the run
        self.jobs = [j for j in result.jobs if j.submit_s <= t1]
        self.shares = entitled_shares(tree)
        self.demand = [
            DemandSpan(j.project, j.gpus, j.submit_s, j.end_s if j.end_s is not None else t1)
            for j in self.jobs
            if j.min_runtime_s > 0
        ]
        self.last_submit_s = max((j.submit_s for j in self.jobs), default=t0)
        self.ideal = (
            None
            if any(j.duration_s is None for j in self.jobs)
            else ideal_schedule(
                ((j.submit_s, j.gpus, j.duration_s or 0.0) for j in self.jobs if not j.rejected),
                self.capacity,
            )
        )
        self.episodes = share_episodes(
            self.shares, self.capacity, self.demand, result.intervals, end_s=t1
        )
        self.waits = self._wait_samples()

    def _wait_samples(self) -> list[tuple[JobOutcome, float, float]]:
        """(job, wait, when the wait began) for every start; the begin comes from the
        job's run intervals (one per start, in order), or its submit time if they do not
        match its waits (hand-made results)."""
        starts: dict[str, list[float]] = defaultdict(list)
        for iv in self.result.intervals:
            starts[iv.job_id].append(iv.start_s)
        out: list[tuple[JobOutcome, float, float]] = []
        for j in self.jobs:
            run_starts = sorted(starts.get(j.job_id, ()))
            matched = len(run_starts) == len(j.waits_s)
            for i, wait in enumerate(j.waits_s):
                out.append((j, wait, run_starts[i] - wait if matched else j.submit_s))
        return out

    def available(self, start_s: float, end_s: float) -> float:
        return _integrate_steps(self.capacity, start_s, end_s)

    def busy(self, start_s: float, end_s: float) -> tuple[float, float, float]:
        """(busy GPU-time, of it allocated, of it on healthy hosts) within the window."""
        busy = busy_alloc = busy_healthy = 0.0
        for iv in self.result.intervals:
            span = _overlap(iv.start_s, iv.end_s, start_s, end_s)
            if span <= 0:
                continue
            gpu_s = iv.gpus * span
            busy += gpu_s
            if iv.allocated:
                busy_alloc += gpu_s
            lost = 0.0
            if self.bad and iv.hosts:
                per_host = iv.gpus / len(iv.hosts)
                for h in iv.hosts:
                    for w0, w1 in self.bad.get(h, ()):
                        lo, hi = max(w0, start_s), min(w1, end_s)
                        lost += per_host * _overlap(iv.start_s, iv.end_s, lo, hi)
            busy_healthy += gpu_s - lost
        return busy, busy_alloc, busy_healthy

    def occupancy(self, start_s: float, end_s: float) -> dict[str, Any]:
        """Occupancy, the ideal schedule's occupancy (the bound) and their ratio."""
        available = self.available(start_s, end_s)
        occ = _ratio(self.busy(start_s, end_s)[2], available)
        bound = (
            None
            if self.ideal is None
            else _ratio(_integrate_steps(self.ideal.busy, start_s, end_s), available)
        )
        return {
            "occupancy": occ,
            "occupancy_bound": bound,
            "occupancy_of_bound": None if occ is None or not bound else occ / bound,
        }


def _window_figures(run: _Run, start_s: float, end_s: float) -> dict[str, Any]:
    """The figures that depend on the window [start_s, end_s] of the run."""
    result = run.result
    busy, busy_alloc, _ = run.busy(start_s, end_s)
    occupancy = run.occupancy(start_s, end_s)
    span_end = min(run.last_submit_s, end_s)
    ent = entitlement_summary(
        run.shares, result.intervals, run.demand, run.capacity, start_s, end_s
    )

    waits_all: list[float] = []
    by_kind: dict[str, list[float]] = defaultdict(list)
    debug: list[float] = []
    for j, wait, began in run.waits:
        if not start_s <= began <= end_s:
            continue
        waits_all.append(wait)
        by_kind[j.kind].append(wait)
        if 0 < j.min_runtime_s <= DEBUG_MAX_MIN_RUNTIME_S and j.gpus <= DEBUG_MAX_GPUS:
            debug.append(wait)
    preemptions = [p for p in result.preemptions if start_s <= p.at_s <= end_s]

    return {
        "start_s": start_s,
        "end_s": end_s,
        **occupancy,
        "trace_span": {
            "start_s": start_s,
            "end_s": span_end,
            **(
                run.occupancy(start_s, span_end) if span_end > start_s else dict.fromkeys(occupancy)
            ),
        },
        "demand_x_capacity": _ratio(
            average_demand_gpus(result, start_s, end_s) * (end_s - start_s),
            run.available(start_s, end_s),
        ),
        "allocated_share": _ratio(busy_alloc, busy),
        "unallocated_share": _ratio(busy - busy_alloc, busy),
        "entitlement": {
            "overall": ent.overall,
            "worst": ent.worst,
            "worst_project": ent.worst_project,
            "projects_at_95": ent.projects_at_95,
            "projects": {
                name: {
                    "entitled_share": run.shares.get(name, 0.0),
                    "capped_entitled_gpu_h": pe.entitled_gpu_h,
                    "delivered_gpu_h": pe.delivered_gpu_h,
                    "ratio": pe.ratio,
                    "ratio_hourly": pe.ratio_hourly,
                }
                for name, pe in ent.projects.items()
            },
        },
        "wait_per_start_s": {
            "all": wait_stats(waits_all),
            "by_kind": {k: wait_stats(v) for k, v in sorted(by_kind.items())},
            "by_class": {DEBUG_CLASS: wait_stats(debug)},
        },
        "time_to_share": time_to_share_stats(
            [e for e in run.episodes if start_s <= e.start_s <= end_s]
        ),
        "preemptions": {
            "total": len(preemptions),
            "by_reason": dict(
                sorted(Counter(stop_rule(p.reason_code) for p in preemptions).items())
            ),
        },
    }


def time_to_share_stats(episodes: Sequence[ShareEpisode]) -> dict[str, Any]:
    """``{count, p50, p90, max, worst_project, open_at_end}`` of episode lengths (s);
    episodes still open at the end are only counted."""
    closed = sorted((e.length_s, e.project) for e in episodes if e.length_s is not None)
    lengths = [length for length, _ in closed]
    return {
        "count": len(lengths),
        "p50": percentile(lengths, 50) if lengths else None,
        "p90": percentile(lengths, 90) if lengths else None,
        "max": lengths[-1] if lengths else None,
        "worst_project": closed[-1][1] if closed else None,
        "open_at_end": sum(1 for e in episodes if e.end_s is None),
    }


def build_report(result: SimResult, tree: BudgetNode, *, warmup_s: float = 0.0) -> dict[str, Any]:
    """The REPORT.json figures of one simulated run (see the module docstring).

    With ``warmup_s`` > 0 the window figures are given a second time under
    ``after_warmup``, computed over the run without its first ``warmup_s`` seconds.
    """
    run = _Run(result, tree)
    t0, t1 = result.start_s, result.end_s
    jobs = run.jobs
    states = Counter(j.state for j in jobs)
    drain_times = sorted(d.ready_s - d.start_s for d in result.drains if d.ready_s is not None)

    report = _window_figures(run, t0, t1)
    report.update(
        {
            "last_submit_s": run.last_submit_s,
            "ideal_end_s": run.ideal.end_s if run.ideal is not None else None,
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
    )
    if warmup_s > 0:
        report["after_warmup"] = {
            "warmup_s": warmup_s,
            **_window_figures(run, min(t0 + warmup_s, t1), t1),
        }
    return report


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


def _rows(reports: Mapping[str, Mapping[str, Any]]) -> list[tuple[str, Any]]:
    def at95(r: Mapping[str, Any]) -> str:
        ent = r["entitlement"]
        rated = sum(1 for p in ent["projects"].values() if p["ratio"] is not None)
        return f"{ent['projects_at_95']}/{rated}"

    def worst(r: Mapping[str, Any]) -> str:
        ent = r["entitlement"]
        return (
            f"{_fmt_pct(ent['worst'])} ({ent['worst_project']})"
            if ent["worst"] is not None
            else "-"
        )

    def share(key: str) -> Any:
        return lambda r: _fmt_s(r["time_to_share"][key])

    return [
        ("occupancy", lambda r: _fmt_pct(r["occupancy"])),
        ("occupancy bound", lambda r: _fmt_pct(r["occupancy_bound"])),
        ("occupancy / bound", lambda r: _fmt_pct(r["occupancy_of_bound"])),
        ("occupancy, trace span", lambda r: _fmt_pct(r["trace_span"]["occupancy"])),
        ("trace span / bound", lambda r: _fmt_pct(r["trace_span"]["occupancy_of_bound"])),
        ("demand / capacity", lambda r: f"{r['demand_x_capacity'] or 0:.2f}x"),
        ("unallocated share", lambda r: _fmt_pct(r["unallocated_share"])),
        ("entitlement overall", lambda r: _fmt_pct(r["entitlement"]["overall"])),
        ("entitlement worst", worst),
        ("projects at >= 95%", at95),
        ("time to share p50", share("p50")),
        ("time to share p90", share("p90")),
        ("time to share worst", share("max")),
        ("wait p50 (all)", lambda r: _fmt_s(r["wait_per_start_s"]["all"]["p50"])),
        ("wait p90 (all)", lambda r: _fmt_s(r["wait_per_start_s"]["all"]["p90"])),
        ("debug wait p90", lambda r: _fmt_s(r["wait_per_start_s"]["by_class"][DEBUG_CLASS]["p90"])),
        ("debug wait p99", lambda r: _fmt_s(r["wait_per_start_s"]["by_class"][DEBUG_CLASS]["p99"])),
        ("preemptions", lambda r: str(r["preemptions"]["total"])),
    ]


def comparison_table(reports: Mapping[str, Mapping[str, Any]]) -> str:
    """A markdown table comparing policies' reports side by side (one column per policy).

    Reports with an ``after_warmup`` part get its figures as extra rows.
    """
    names = list(reports)

    def cells(fn: Any, part: str | None) -> list[str]:
        out = []
        for n in names:
            try:
                out.append(fn(reports[n][part] if part else reports[n]))
            except (KeyError, TypeError):
                out.append("-")
        return out

    rows = [[label, *cells(fn, None)] for label, fn in _rows(reports)]
    rows.append(["run / trace span / ideal end", *cells(_days, None)])
    rows.append(
        [
            "jobs completed",
            *cells(lambda r: f"{r['jobs']['completed']}/{r['jobs']['submitted']}", None),
        ]
    )
    rows.append(["wall", *cells(lambda r: f"{r['wall_s']:.1f}s", None)])
    warm = [r["after_warmup"]["warmup_s"] for r in reports.values() if "after_warmup" in r]
    if warm:
        tag = f"after {warm[0] / 86400:g} d: "
        rows += [[tag + label, *cells(fn, "after_warmup")] for label, fn in _rows(reports)]
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


def _days(r: Mapping[str, Any]) -> str:
    """Run length, trace span and the ideal schedule's end, in days from the run's start."""
    t0 = r["start_s"]
    ideal = r["ideal_end_s"]
    ideal_txt = "-" if ideal is None else f"{(ideal - t0) / 86400:.1f}"
    return f"{(r['end_s'] - t0) / 86400:.1f} / {(r['trace_span']['end_s'] - t0) / 86400:.1f} / {ideal_txt} d"
