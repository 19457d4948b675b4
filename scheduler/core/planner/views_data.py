"""Data for the planner page's Plotly heatmaps (pure: no Django, no Plotly import).

`heatmap_data(scenario, plan)` returns everything one `go.Heatmap` needs:

- `z`: GPU rows x step columns, each cell the job's legend index (0..n-1) or None
  when empty (`z[g][t]`);
- `x` (step labels), `y` (GPU labels);
- `legend`: one entry per job in legend-index order, `{"id", "kind", "realtime",
  "color"}`; `realtime_ids` lists the real-time services (the page marks them);
- `colorscale`: a discrete Plotly colorscale mapping each index to its colour
  (use it with `zmin=-0.5`, `zmax=n-0.5`);
- `hover`: GPU rows x step columns of hover strings;
- `metrics` and `mode` of the plan.

`list_scenarios()` lists the shipped scenarios.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from scheduler.core.planner.generate import SCENARIO_DIR
from scheduler.core.planner.model import Scenario
from scheduler.core.planner.plan import Plan

if TYPE_CHECKING:
    import numpy as np

__all__ = ["heatmap_data", "list_scenarios"]

# batch jobs: a qualitative palette; real-time services: reds, so they stand out
_BATCH_COLORS = (
    "#1f77b4", "#2ca02c", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22",
    "#17becf", "#aec7e8", "#98df8a", "#c5b0d5", "#c49c94", "#f7b6d2", "#dbdb8d",
    "#9edae5", "#393b79", "#637939", "#8c6d31", "#7b4173", "#3182bd",
)  # fmt: skip
_REALTIME_COLORS = ("#d62728", "#ff7f0e", "#e6550d", "#a50f15", "#fd8d3c")


def _matrix(
    scenario: Scenario, plan: Plan | dict[str, Any]
) -> tuple[np.ndarray, str, dict[str, Any]]:
    if isinstance(plan, Plan):
        return plan.matrix, plan.mode, dict(plan.metrics)
    import numpy as np  # at the first plan read, not at start (scheduler/core/planner/plan.py)

    index = {job_id: i for i, job_id in enumerate(scenario.job_ids())}
    grid = plan["grid"]
    m = np.array([[index.get(c, -1) if c is not None else -1 for c in row] for row in grid])
    return (
        m.reshape(scenario.steps, scenario.gpus),
        str(plan.get("mode", "")),
        dict(plan.get("metrics", {})),
    )


def heatmap_data(scenario: Scenario, plan: Plan | dict[str, Any]) -> dict[str, Any]:
    """Heatmap inputs for one plan (a `Plan` or a decoded PLAN.json); see the module doc."""
    matrix, mode, metrics = _matrix(scenario, plan)
    nb = len(scenario.batch)
    legend: list[dict[str, Any]] = []
    for i, job in enumerate(scenario.batch):
        color = _BATCH_COLORS[i % len(_BATCH_COLORS)]
        legend.append({"id": job.id, "kind": job.kind, "realtime": False, "color": color})
    for s, svc in enumerate(scenario.realtime):
        color = _REALTIME_COLORS[s % len(_REALTIME_COLORS)]
        legend.append({"id": svc.id, "kind": "realtime", "realtime": True, "color": color})
    n = max(1, len(legend))
    colorscale: list[list[Any]] = []
    for i, entry in enumerate(legend):
        colorscale.append([i / n, entry["color"]])
        colorscale.append([(i + 1) / n, entry["color"]])
    if not colorscale:
        colorscale = [[0.0, "#ffffff"], [1.0, "#ffffff"]]
    transposed = matrix.T.tolist()  # GPU rows, step columns
    z = [[c if c >= 0 else None for c in row] for row in transposed]
    jobs = scenario.batch
    hover = []
    for g, row in enumerate(transposed):
        line = []
        for t, c in enumerate(row):
            where = f"GPU {g}, step {t}"
            if c < 0:
                line.append(f"{where}: idle")
            elif c < nb:
                j = jobs[c]
                line.append(
                    f"{where}: {j.id} ({j.kind}, {j.gpus} GPUs, priority {j.priority:g}, "
                    f"arrives {j.arrival})"
                )
            else:
                svc = scenario.realtime[c - nb]
                line.append(f"{where}: {svc.id} (real-time, demand {svc.demand[t]})")
        hover.append(line)
    return {
        "mode": mode,
        "z": z,
        "x": list(range(scenario.steps)),
        "step_title": f"Time step ({step_text(scenario.step_s)} each)",
        "y": [f"GPU {g}" for g in range(scenario.gpus)],
        "legend": legend,
        "realtime_ids": [s.id for s in scenario.realtime],
        "colorscale": colorscale,
        "zmin": -0.5,
        "zmax": n - 0.5,
        "hover": hover,
        "metrics": metrics,
    }


def step_text(step_s: int) -> str:
    """A time step's length for axis titles: 3600 -> '1 h', 900 -> '15 min'."""
    if step_s % 3600 == 0:
        return f"{step_s // 3600} h"
    if step_s % 60 == 0:
        return f"{step_s // 60} min"
    return f"{step_s} s"


def list_scenarios(directory: Path = SCENARIO_DIR) -> list[dict[str, Any]]:
    """The shipped scenarios: name, gpus, steps, path (sorted by name)."""
    out = []
    for path in sorted(directory.glob("*.json")):
        raw = json.loads(path.read_text(encoding="utf-8"))
        out.append(
            {
                "name": raw.get("name", path.stem),
                "gpus": raw.get("gpus"),
                "steps": raw.get("steps"),
                "step_s": raw.get("step_s", 3600),
                "path": str(path),
                "description": raw.get("description", ""),
            }
        )
    return out
