"""Plotly figures (built server-side, drawn by static/js/dashboards.js) and CSV rows of
the dashboards' data. One function per figure; each returns the figure as plain JSON
data for `json_script`, and `*_csv` the same numbers as rows."""

from __future__ import annotations

import json
from collections import defaultdict
from typing import Any

import plotly.graph_objects as go

from dashboards.selectors import BUCKET_LABELS

BUCKET_COLOURS = {
    "within_entitlement_gpu_h": "#2457c5",
    "borrowed_gpu_h": "#7aa2f7",
    "unallocated_gpu_h": "#12a594",
    "idle_demand_gpu_h": "#e5484d",
    "idle_gpu_h": "#c9ced6",
    "draining_gpu_h": "#f5a524",
    "down_gpu_h": "#5c6677",
}
LAYOUT = {
    "margin": {"l": 60, "r": 10, "t": 30, "b": 40},
    "height": 340,
    "legend": {"orientation": "h", "y": -0.2},
    "hovermode": "x unified",
}
MAX_DELIVERY_BARS = 40
KIND_COLOURS = ["#2457c5", "#e5484d", "#12a594", "#f5a524", "#8e4ec6", "#5c6677"]


def _plain(figure: go.Figure) -> dict[str, Any]:
    return json.loads(figure.to_json())


def _iso(steps) -> list[str]:
    return [s.isoformat() for s in steps]


def occupancy_figure(data: dict[str, Any]) -> dict[str, Any]:
    """Stacked bars of the buckets. The figure is built by plotly without its arrays,
    which are put in afterwards: plotly's validation of 90 days x 24 hours x 7 traces
    would cost more than reading them."""
    figure = go.Figure(
        [
            go.Bar(name=label, marker_color=BUCKET_COLOURS[bucket], hovertemplate="%{y:.1f} GPU-h")
            for bucket, label in BUCKET_LABELS.items()
        ]
    )
    figure.update_layout(barmode="stack", bargap=0, yaxis_title="GPU-hours per step", **LAYOUT)
    plain = _plain(figure)
    x = _iso(data["steps"])
    for trace, bucket in zip(plain["data"], BUCKET_LABELS, strict=True):
        trace["x"], trace["y"] = x, data["series"][bucket]
    return plain


def occupancy_csv(data: dict[str, Any]) -> list[list[Any]]:
    header = ["step_start", "capacity_gpu_h", "healthy_gpu_h", *BUCKET_LABELS]
    rows: list[list[Any]] = [header]
    for i, at in enumerate(data["steps"]):
        rows.append([at.isoformat(), *(data["series"][f][i] for f in header[1:])])
    return rows


def delivery_figures(data: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Per project bars (delivered vs entitled, the first MAX_DELIVERY_BARS in the
    table's order) and the delivered/entitled totals per step with the cumulative
    credit (+) or debt (-) line on a second axis."""
    shown = data["projects"][:MAX_DELIVERY_BARS]
    names = [p["path"] for p in shown]
    bars = go.Figure(
        [
            go.Bar(
                x=names,
                y=[p["entitled_gpu_h"] for p in shown],
                name="Entitled",
                marker_color="#c9ced6",
            ),
            go.Bar(
                x=names,
                y=[p["delivered_gpu_h"] for p in shown],
                name="Delivered",
                marker_color="#2457c5",
            ),
        ]
    )
    bars.update_layout(barmode="group", yaxis_title="GPU-hours", **LAYOUT)
    bars.update_xaxes(tickangle=-30, automargin=True)
    x = _iso(data["steps"])
    over_time = go.Figure(
        [
            go.Scatter(name="Entitled", line_color="#8a94a6"),
            go.Scatter(name="Delivered", line_color="#2457c5"),
            go.Scatter(
                name="Cumulative credit (+) / debt (-)",
                line={"color": "#e5484d", "dash": "dot"},
                yaxis="y2",
            ),
        ]
    )
    over_time.update_layout(
        yaxis_title="GPU-hours per step",
        yaxis2={"title": "cumulative GPU-hours", "overlaying": "y", "side": "right"},
        **LAYOUT,
    )
    over_time_plain = _plain(over_time)  # arrays added after plotly (see occupancy_figure)
    for trace, key in zip(
        over_time_plain["data"], ("entitled", "delivered", "cumulative"), strict=True
    ):
        trace["x"], trace["y"] = x, data[key]
    return {"bars": _plain(bars), "over_time": over_time_plain}


def delivery_csv(data: dict[str, Any]) -> list[list[Any]]:
    rows: list[list[Any]] = [
        [
            "project",
            "entitled_gpu_h",
            "delivered_gpu_h",
            "ratio",
            "demand_gpu_h",
            "unallocated_gpu_h",
        ]
    ]
    for p in data["projects"]:
        rows.append(
            [
                p["path"],
                round(p["entitled_gpu_h"], 3),
                round(p["delivered_gpu_h"], 3),
                "" if p["ratio"] is None else round(p["ratio"], 4),
                round(p["demand_gpu_h"], 3),
                round(p["unallocated_gpu_h"], 3),
            ]
        )
    return rows


def delivery_over_time_csv(data: dict[str, Any]) -> list[list[Any]]:
    rows: list[list[Any]] = [
        ["step_start", "entitled_gpu_h", "delivered_gpu_h", "cumulative_gpu_h"]
    ]
    for i, at in enumerate(data["steps"]):
        rows.append(
            [at.isoformat(), data["entitled"][i], data["delivered"][i], data["cumulative"][i]]
        )
    return rows


def waits_figures(waits: list[dict], preemptions: list[dict]) -> dict[str, dict[str, Any]]:
    by_kind: dict[str, list[dict]] = defaultdict(list)
    for row in waits:
        by_kind[row["kind"]].append(row)
    traces = []
    for i, (kind, rows) in enumerate(sorted(by_kind.items())):
        x = [r["at"].isoformat() for r in rows]
        colour = KIND_COLOURS[i % len(KIND_COLOURS)]
        traces.append(
            go.Scatter(
                x=x,
                y=[r["p50_wait_s"] / 60 for r in rows],
                name=f"{kind} p50",
                mode="lines+markers",
                line={"color": colour},
            )
        )
        traces.append(
            go.Scatter(
                x=x,
                y=[r["p90_wait_s"] / 60 for r in rows],
                name=f"{kind} p90",
                mode="lines",
                line={"dash": "dot", "color": colour},
            )
        )
    wait_fig = go.Figure(traces)
    wait_fig.update_layout(yaxis_title="wait (minutes)", **LAYOUT)
    by_rule: dict[str, list[dict]] = defaultdict(list)
    for row in preemptions:
        by_rule[row["rule"]].append(row)
    pre_fig = go.Figure(
        [
            go.Bar(x=[r["at"].isoformat() for r in rows], y=[r["count"] for r in rows], name=rule)
            for rule, rows in sorted(by_rule.items())
        ]
    )
    pre_fig.update_layout(barmode="stack", yaxis_title="preemptions", **LAYOUT)
    return {"waits": _plain(wait_fig), "preemptions": _plain(pre_fig)}


def waits_csv(waits: list[dict]) -> list[list[Any]]:
    rows: list[list[Any]] = [["step_start", "kind", "jobs", "p50_wait_s", "p90_wait_s"]]
    rows += [
        [r["at"].isoformat(), r["kind"], r["jobs"], r["p50_wait_s"], r["p90_wait_s"]] for r in waits
    ]
    return rows


def preemptions_csv(preemptions: list[dict]) -> list[list[Any]]:
    return [["step_start", "rule", "count"]] + [
        [r["at"].isoformat(), r["rule"], r["count"]] for r in preemptions
    ]


def drains_csv(drains: list[dict]) -> list[list[Any]]:
    rows: list[list[Any]] = [["host", "started_at", "ended_at", "duration_h", "reason"]]
    rows += [
        [
            d["host"],
            d["started_at"].isoformat(),
            d["ended_at"].isoformat() if d["ended_at"] else "",
            round(d["duration_h"], 3),
            d["reason"],
        ]
        for d in drains
    ]
    return rows


def fairshare_csv(rows: list[dict]) -> list[list[Any]]:
    out: list[list[Any]] = [
        [
            "node",
            "entitled_share",
            "usage_gpu_h",
            "usage_share",
            "level_fs",
            "fairshare_factor",
            "rank",
            "meaning",
        ]
    ]
    for r in rows:
        level = r["level_fs_text"] and "inf" or r["level_fs"]
        out.append(
            [
                r["path"],
                r["entitled_share"],
                round(r["usage_gpu_h"], 3),
                r["usage_share"],
                level,
                r["factor"],
                r["rank"],
                r["sentence"],
            ]
        )
    return out


def my_projects_figure(projects: list[dict]) -> dict[str, Any] | None:
    """Delivered vs entitled GPU-hours of the user's projects (one bar pair per project
    and cluster), or None when there is nothing to draw."""
    labels, entitled, delivered = [], [], []
    for p in projects:
        for c in p["clusters"]:
            labels.append(f"{p['path']} @ {c['cluster']}")
            entitled.append(c["entitled_gpu_h"])
            delivered.append(c["delivered_gpu_h"])
    if not labels:
        return None
    figure = go.Figure(
        [
            go.Bar(x=labels, y=entitled, name="Entitled", marker_color="#c9ced6"),
            go.Bar(x=labels, y=delivered, name="Delivered", marker_color="#2457c5"),
        ]
    )
    figure.update_layout(barmode="group", yaxis_title="GPU-hours, last 7 days", **LAYOUT)
    return _plain(figure)
