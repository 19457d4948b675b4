"""Run fifo, fast and full on scenarios and compare them (the `report` sub-command)."""

from __future__ import annotations

import statistics
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from scheduler.core.planner import run_mode
from scheduler.core.planner.generate import SCENARIO_DIR
from scheduler.core.planner.model import Scenario, load_scenario
from scheduler.core.planner.plan import MODES
from scheduler.core.planner.validate import validate_plan

__all__ = ["ReportRow", "build_report", "format_report", "shipped_paths"]

_FAST_REPEATS = 5


def shipped_paths() -> list[Path]:
    """The shipped scenario files, in file-name order."""
    return sorted(SCENARIO_DIR.glob("*.json"))


@dataclass(slots=True)
class ReportRow:
    """Metrics per mode for one scenario, and the gains over fifo."""

    scenario: str
    gpus: int
    jobs: int
    contended: bool
    metrics: dict[str, dict[str, Any]] = field(default_factory=dict)
    violations: dict[str, int] = field(default_factory=dict)

    def gain(self, mode: str) -> tuple[float, float]:
        """(utilization points, value %) of `mode` over fifo."""
        base, other = self.metrics["fifo"], self.metrics[mode]
        points = 100 * (other["utilization"] - base["utilization"])
        pct = 100 * (other["value"] / base["value"] - 1) if base["value"] else 0.0
        return round(points, 1), round(pct, 1)


def _row(scenario: Scenario, time_limit_s: float) -> ReportRow:
    row = ReportRow(scenario.name, scenario.gpus, len(scenario.batch), scenario.contended)
    for mode in MODES:
        plan = run_mode(scenario, mode, time_limit_s)
        metrics = dict(plan.metrics)
        if mode != "full":  # cheap modes: median of a few runs, the figure is sub-millisecond
            runs = [metrics["runtime_ms"]]
            runs += [
                run_mode(scenario, mode).metrics["runtime_ms"] for _ in range(_FAST_REPEATS - 1)
            ]
            metrics["runtime_ms"] = round(statistics.median(runs), 3)
        row.metrics[mode] = metrics
        row.violations[mode] = len(validate_plan(scenario, plan.to_json(scenario)))
    return row


def build_report(paths: Iterable[Path] | None = None, time_limit_s: float = 10.0) -> dict[str, Any]:
    """Rows for every scenario plus mean gains of fast and full over fifo on the contended ones."""
    rows = [_row(load_scenario(p), time_limit_s) for p in (paths or shipped_paths())]
    contended = [r for r in rows if r.contended]
    means: dict[str, dict[str, float]] = {}
    for mode in ("fast", "full"):
        gains = [r.gain(mode) for r in contended]
        means[mode] = {
            "utilization_points": round(statistics.fmean(g[0] for g in gains), 1) if gains else 0.0,
            "value_pct": round(statistics.fmean(g[1] for g in gains), 1) if gains else 0.0,
        }
    return {"rows": rows, "contended_means": means, "time_limit_s": time_limit_s}


def format_report(report: dict[str, Any]) -> str:
    """The report as one plain-text table."""
    head = f"{'scenario':<19}{'GPUs':>5}{'jobs':>5}{'cont':>5}"
    for mode in MODES:
        head += f" | {mode + ' util':>9}{'value':>6}{'obj':>7}{'done':>5}{'ms':>9}"
    head += f" | {'fast vs fifo':>15} | {'full vs fifo':>15}"
    lines = [head, "-" * len(head)]
    for r in report["rows"]:
        line = f"{r.scenario:<19}{r.gpus:>5}{r.jobs:>5}{'yes' if r.contended else 'no':>5}"
        for mode in MODES:
            m = r.metrics[mode]
            line += (
                f" | {100 * m['utilization']:>8.1f}%{m['value']:>6.0f}{m['objective']:>7.1f}"
                f"{m['completed']:>5}{m['runtime_ms']:>9.2f}"
            )
        for mode in ("fast", "full"):
            points, pct = r.gain(mode)
            line += f" | {points:>+5.1f}pt {pct:>+6.1f}%"
        if any(r.violations.values()):
            line += f"  INVALID {r.violations}"
        lines.append(line)
    lines.append("-" * len(head))
    means = report["contended_means"]
    n = sum(1 for r in report["rows"] if r.contended)
    lines.append(
        f"mean over the {n} contended scenarios: "
        + "; ".join(
            f"{mode} {means[mode]['utilization_points']:+.1f} utilization points, "
            f"{means[mode]['value_pct']:+.1f}% value"
            for mode in ("fast", "full")
        )
        + f" (full time limit {report['time_limit_s']:g} s)"
    )
    return "\n".join(lines)
