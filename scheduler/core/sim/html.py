"""REPORT.html: one self-contained page comparing the policies of a run (pure Python).

`chart_data(result, report)` derives what the page draws for one policy's run;
`write_html(path, charts)` writes the page with Plotly's JavaScript inlined from the
installed `plotly` package (no network at view time), one column per policy:

- occupancy over time: healthy GPU-hours per step split into allocated, unallocated,
  idle while work waited, idle with nothing waiting and down (unhealthy hosts); the
  parts sum to the cluster's GPUs x step;
- delivery per project: delivered vs entitled GPU-hours (the report's entitlement);
- waits by kind: p50 and p90 wait per job kind.
"""

from __future__ import annotations

import html
import importlib.util
import json
import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ledger.accounting import bucket_spans, capacity_hourly, hour_count
from scheduler.core.sim.model import SimResult

__all__ = ["chart_data", "plotly_js", "write_html"]

HOUR_S = 3600.0
MAX_STEPS = 240


def plotly_js() -> str:
    """The minified Plotly bundle shipped in the `plotly` wheel."""
    spec = importlib.util.find_spec("plotly")
    if spec is None or spec.origin is None:
        raise RuntimeError("the plotly package is not installed; it is needed for --html")
    return (Path(spec.origin).parent / "package_data" / "plotly.min.js").read_text("utf-8")


def _coarsen(values: list[float], k: int) -> list[float]:
    return [math.fsum(values[i : i + k]) for i in range(0, len(values), k)]


def _occupancy(result: SimResult) -> dict[str, Any]:
    t0, t1 = result.start_s, result.end_s
    n = hour_count(t0, t1)
    busy = bucket_spans(
        (
            ("allocated" if iv.allocated else "unallocated", iv.gpus, iv.start_s, iv.end_s)
            for iv in result.intervals
        ),
        t0,
        t1,
    )
    present = bucket_spans(
        (
            ("", j.gpus, j.submit_s, t1 if j.end_s is None else j.end_s)
            for j in result.jobs
            if not j.rejected and j.min_runtime_s > 0  # allocated demand, as the ledger
        ),
        t0,
        t1,
    ).get("", [0.0] * n)
    healthy = capacity_hourly(result.capacity, t0, t1) if result.capacity else [0.0] * n
    total = result.cluster.total_gpus
    alloc, unalloc = busy.get("allocated", [0.0] * n), busy.get("unallocated", [0.0] * n)
    parts: dict[str, list[float]] = {k: [] for k in ("allocated", "unallocated", "idle_blocked")}
    parts.update(idle_no_work=[], down=[])
    for h in range(n):
        width = min(HOUR_S, t1 - (t0 + h * HOUR_S)) / HOUR_S
        used = alloc[h] + unalloc[h]
        idle = max(0.0, healthy[h] - used)
        # idle while work waited (docs/concepts.md): up to the allocated demand that
        # was not running, as `ledger.accounting.occupancy_hour` counts it
        waiting = max(0.0, present[h] - alloc[h])
        parts["allocated"].append(alloc[h])
        parts["unallocated"].append(unalloc[h])
        parts["idle_blocked"].append(min(idle, waiting))
        parts["idle_no_work"].append(idle - min(idle, waiting))
        parts["down"].append(max(0.0, total * width - healthy[h]))
    k = max(1, math.ceil(n / MAX_STEPS))
    return {
        "step_h": k,
        "t_days": [(i * k) / 24 for i in range(math.ceil(n / k))],
        **{name: _coarsen(v, k) for name, v in parts.items()},
    }


def chart_data(result: SimResult, report: Mapping[str, Any]) -> dict[str, Any]:
    """What the page draws for one policy: occupancy steps, delivery, waits by kind."""
    projects = report["entitlement"]["projects"]
    kinds = report["wait_per_start_s"]["by_kind"]
    return {
        "occupancy": _occupancy(result),
        "delivery": {
            "projects": list(projects),
            "delivered": [p["delivered_gpu_h"] for p in projects.values()],
            "entitled": [p["capped_entitled_gpu_h"] for p in projects.values()],
        },
        "waits": {
            "kinds": list(kinds),
            "p50_min": [None if s["p50"] is None else s["p50"] / 60 for s in kinds.values()],
            "p90_min": [None if s["p90"] is None else s["p90"] / 60 for s in kinds.values()],
        },
        "headline": {
            "occupancy": report.get("occupancy"),
            "entitlement": report["entitlement"].get("overall"),
            "wait_p90_s": report["wait_per_start_s"]["all"].get("p90"),
        },
    }


_DRAW = """
const charts = JSON.parse(document.getElementById("charts").textContent);
const colors = {allocated: "#2b6cb0", unallocated: "#63b3ed", idle_blocked: "#e53e3e",
                idle_no_work: "#cbd5e0", down: "#4a5568"};
const labels = {allocated: "allocated", unallocated: "unallocated",
                idle_blocked: "idle while work waited", idle_no_work: "idle, nothing waiting",
                down: "down"};
const cfg = {displaylogo: false, responsive: true};
for (const [policy, d] of Object.entries(charts)) {
  const o = d.occupancy;
  Plotly.newPlot("occ-" + policy, Object.keys(labels).map(k => ({
    type: "scatter", mode: "lines", stackgroup: "one", name: labels[k], x: o.t_days, y: o[k],
    line: {width: 0}, fillcolor: colors[k]})), {
    height: 300, margin: {l: 55, r: 10, t: 10, b: 40}, showlegend: true,
    legend: {orientation: "h", y: -0.3}, xaxis: {title: "day"},
    yaxis: {title: "GPU-h per " + o.step_h + " h"}}, cfg);
  Plotly.newPlot("del-" + policy, [
    {type: "bar", name: "delivered", x: d.delivery.projects, y: d.delivery.delivered,
     marker: {color: "#2b6cb0"}},
    {type: "bar", name: "entitled", x: d.delivery.projects, y: d.delivery.entitled,
     marker: {color: "#dd6b20"}}], {
    barmode: "group", height: 300, margin: {l: 55, r: 10, t: 10, b: 90},
    yaxis: {title: "GPU-hours"}, legend: {orientation: "h", y: 1.1}}, cfg);
  Plotly.newPlot("wait-" + policy, [
    {type: "bar", name: "p50", x: d.waits.kinds, y: d.waits.p50_min, marker: {color: "#90cdf4"}},
    {type: "bar", name: "p90", x: d.waits.kinds, y: d.waits.p90_min, marker: {color: "#2c5282"}}], {
    barmode: "group", height: 260, margin: {l: 55, r: 10, t: 10, b: 50},
    yaxis: {title: "wait (min)"}, legend: {orientation: "h", y: 1.15}}, cfg);
}
"""

_STYLE = """
body { font: 14px/1.4 system-ui, sans-serif; margin: 1em 1.5em; color: #1d2330; }
.grid { display: grid; gap: 1em; grid-template-columns: repeat(var(--n), minmax(380px, 1fr)); }
section { border: 1px solid #d9dee7; border-radius: 6px; padding: .5em .8em; }
h2 { margin: .2em 0; } h3 { margin: .6em 0 0; font-size: 1em; color: #5c6677; }
.headline { color: #5c6677; }
"""


def _pct(v: Any) -> str:
    return "-" if v is None else f"{100 * v:.1f}%"


def _section(policy: str, data: Mapping[str, Any]) -> str:
    h = data["headline"]
    wait = h["wait_p90_s"]
    p = html.escape(policy)
    return (
        f'<section class="policy" data-policy="{p}"><h2>{p}</h2>'
        f'<p class="headline">occupancy {_pct(h["occupancy"])} · entitlement delivered '
        f"{_pct(h['entitlement'])} · p90 wait "
        f"{'-' if wait is None else f'{wait / 60:.0f} min'}</p>"
        f'<h3>Occupancy over time</h3><div class="chart occupancy" id="occ-{p}"></div>'
        f'<h3>Delivery per project</h3><div class="chart delivery" id="del-{p}"></div>'
        f'<h3>Waits by kind</h3><div class="chart waits" id="wait-{p}"></div></section>'
    )


def write_html(path: str | Path, charts: Mapping[str, Mapping[str, Any]], *, title: str) -> None:
    """Write the self-contained comparison page for `charts` (policy -> `chart_data`)."""
    payload = json.dumps(charts, allow_nan=False).replace("</", "<\\/")
    sections = "".join(_section(p, d) for p, d in charts.items())
    page = (
        '<!doctype html><html lang="en"><head><meta charset="utf-8">'
        f"<title>{html.escape(title)}</title><style>{_STYLE}</style>"
        f"<script>{plotly_js()}</script></head><body>"
        f"<h1>{html.escape(title)}</h1>"
        f'<div class="grid" style="--n: {len(charts)}">{sections}</div>'
        f'<script type="application/json" id="charts">{payload}</script>'
        f"<script>{_DRAW}</script></body></html>\n"
    )
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(page, encoding="utf-8")
