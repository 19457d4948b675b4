"""Plotly figures (built server-side, drawn by static/js/dashboards.js) and CSV rows of
the dashboards' data. One function per figure; each returns the figure as plain JSON
data for `json_script` (Plotly's figure schema, {"data": [traces], "layout": {...}},
written as dicts: plotly.py's graph objects cost most of a chart request's CPU), and
`*_csv` the same numbers as rows."""

from __future__ import annotations

import datetime as dt
from collections import defaultdict
from typing import Any

from allot_common.figures import path_tail
from config.clock import span_text
from dashboards.selectors import BUCKET_LABELS
from ledger.selectors import STEPS, step_starts
from scheduler.core.engine import rule_label

BUCKET_COLOURS = {
    "within_entitlement_gpu_h": "#2457c5",
    "borrowed_gpu_h": "#7aa2f7",
    "unallocated_gpu_h": "#12a594",
    "idle_demand_gpu_h": "#e5484d",
    "idle_gpu_h": "#c9ced6",
    "draining_gpu_h": "#f5a524",
    "down_gpu_h": "#5c6677",
}
_AXIS_LOOK = {
    "automargin": True,
    "gridcolor": "white",
    "linecolor": "white",
    "ticks": "",
    "title": {"standoff": 15},
    "zerolinecolor": "white",
    "zerolinewidth": 2,
}
# plotly.py's default template ("plotly": grey plot area, white grid, its colorway and font
# colour), the parts that bars and lines on x/y axes use; plotly.js applies it from
# layout.template, so the charts look as they did when plotly.py built them, at a seventh
# of the bytes. tests/dashboards/test_charts.py checks it against plotly.io.templates.
TEMPLATE: dict[str, Any] = {
    "data": {
        "bar": [
            {
                "error_x": {"color": "#2a3f5f"},
                "error_y": {"color": "#2a3f5f"},
                "marker": {
                    "line": {"color": "#E5ECF6", "width": 0.5},
                    "pattern": {"fillmode": "overlay", "size": 10, "solidity": 0.2},
                },
                "type": "bar",
            }
        ],
        "scatter": [
            {"fillpattern": {"fillmode": "overlay", "size": 10, "solidity": 0.2}, "type": "scatter"}
        ],
    },
    "layout": {
        "annotationdefaults": {"arrowcolor": "#2a3f5f", "arrowhead": 0, "arrowwidth": 1},
        "autotypenumbers": "strict",
        "colorway": [
            "#636efa",
            "#EF553B",
            "#00cc96",
            "#ab63fa",
            "#FFA15A",
            "#19d3f3",
            "#FF6692",
            "#B6E880",
            "#FF97FF",
            "#FECB52",
        ],
        "font": {"color": "#2a3f5f"},
        "hoverlabel": {"align": "left"},
        "hovermode": "closest",
        "paper_bgcolor": "white",
        "plot_bgcolor": "#E5ECF6",
        "shapedefaults": {"line": {"color": "#2a3f5f"}},
        "title": {"x": 0.05},
        "xaxis": _AXIS_LOOK,
        "yaxis": _AXIS_LOOK,
    },
}
# Every chart: legend above the plot (it pushes the margin instead of covering labels),
# axes that grow their margins to fit their tick labels, titled axes.
LAYOUT = {
    "margin": {"l": 10, "r": 10, "t": 10, "b": 10},
    "height": 360,
    "legend": {"orientation": "h", "x": 0, "y": 1.02, "yanchor": "bottom"},
    "hovermode": "x unified",
    "font": {"size": 12},
}
MAX_DELIVERY_BARS = 40
LABEL_CHARS = 28  # longer project paths are shortened on axes (the tables have them whole)
NARROW_LABEL_CHARS = 16  # on a phone, only a project's own name, at most this long
KIND_COLOURS = ["#2457c5", "#e5484d", "#12a594", "#f5a524", "#8e4ec6", "#5c6677"]
MIN_WAIT_MIN = 1 / 60  # a wait under a second is drawn at one second on the log axis
PARTIAL_FILL = "rgba(246, 247, 249, 0.7)"


def _figure(data: list[dict[str, Any]], **layout: Any) -> dict[str, Any]:
    """A figure of these traces: the common LAYOUT, then `layout`, in plotly's template."""
    return {"data": data, "layout": {**LAYOUT, **layout, "template": TEMPLATE}}


def _axis(title: str, **settings: Any) -> dict[str, Any]:
    """A titled axis that grows its margin to fit its tick labels."""
    return {"automargin": True, "title": {"standoff": 8, "text": title}, **settings}


def _iso(steps) -> list[str]:
    return [s.isoformat() for s in steps]


def short_label(text: str, limit: int = LABEL_CHARS) -> str:
    """A long project path cut from the left at a "/" ('…/models/pretraining-large'):
    its end names it (`path_tail`, the rule of every chart and CLI column)."""
    return path_tail(text, limit)


def leaf_label(path: str, limit: int = NARROW_LABEL_CHARS) -> str:
    """A project's own name (the end of its path), for the narrow axis of a phone."""
    return path_tail(path.rsplit("/", 1)[-1], limit)


def narrow(figure: dict[str, Any], **paths: Any) -> dict[str, Any]:
    """What static/js/dashboards.js sets in the layout when the chart is drawn narrower
    than NARROW_PX (a phone): e.g. `yaxis__ticktext` for `layout.yaxis.ticktext`."""
    figure["layout"]["meta"] = {
        "narrow": {key.replace("__", "."): value for key, value in paths.items()}
    }
    return figure


def step_title(step: str) -> str:
    return "Hour (UTC)" if step == "hour" else "Day (UTC)"


def partial_steps(period, now: dt.datetime) -> list[tuple[dt.datetime, dt.datetime]]:
    """The steps of the period the ledger cannot have whole yet: the last one while it
    lasts (it ends after `now`), and a first one the period starts inside."""
    steps = step_starts(period)
    if not steps:
        return []
    size = STEPS[period.step]
    out = []
    if steps[0] < period.since:
        out.append((steps[0], steps[0] + size))
    if steps[-1] + size > now and (not out or out[0][0] != steps[-1]):
        out.append((steps[-1], steps[-1] + size))
    return out


def _mark_partial(
    layout: dict[str, Any], partial: list[tuple[dt.datetime, dt.datetime]], xref: str = "x"
) -> None:
    """Shade each partial step and say so above it (a drop at the edge is not a trend)."""
    for start, end in partial:
        layout.setdefault("shapes", []).append(
            {
                "type": "rect",
                "xref": xref,
                "yref": "paper",
                "x0": start.isoformat(),
                "x1": end.isoformat(),
                "y0": 0,
                "y1": 1,
                "fillcolor": PARTIAL_FILL,
                "line": {"width": 0},
                "layer": "above",
            }
        )
        layout.setdefault("annotations", []).append(
            {
                "xref": xref,
                "yref": "paper",
                "x": start.isoformat(),
                "y": 1,
                "xanchor": "left",
                "yanchor": "top",
                "text": "partial",
                "showarrow": False,
                "font": {"size": 10, "color": "#5c6677"},
            }
        )


def occupancy_figure(
    data: dict[str, Any], *, step: str = "hour", partial: list | None = None
) -> dict[str, Any]:
    """Stacked bars of the buckets, each bar spanning its step, partial steps shaded."""
    period_ms = int(STEPS[step].total_seconds() * 1000)
    x = _iso(data["steps"])
    figure = _figure(
        [
            {
                "type": "bar",
                "name": label,
                "marker": {"color": BUCKET_COLOURS[bucket]},
                "hovertemplate": "%{y:.1f} GPU-h",
                "xperiod": period_ms,
                "xperiodalignment": "middle",
                "x": x,
                "y": data["series"][bucket],
            }
            for bucket, label in BUCKET_LABELS.items()
        ],
        barmode="stack",
        bargap=0,
        xaxis=_axis(step_title(step)),
        yaxis=_axis(f"GPU-hours per {step}"),
    )
    _mark_partial(figure["layout"], partial or [])
    return figure


def occupancy_csv(data: dict[str, Any]) -> list[list[Any]]:
    header = ["step_start", "capacity_gpu_h", "healthy_gpu_h", *BUCKET_LABELS]
    rows: list[list[Any]] = [header]
    for i, at in enumerate(data["steps"]):
        rows.append([at.isoformat(), *(data["series"][f][i] for f in header[1:])])
    return rows


def delivery_figures(
    data: dict[str, Any], *, step: str = "hour", partial: list | None = None
) -> dict[str, dict[str, Any]]:
    """Per project horizontal bars (delivered vs entitled, the first MAX_DELIVERY_BARS in
    the table's order, long paths shortened on the axis) and, for all projects together,
    delivered and entitled GPU-hours per step above the cumulative credit (+) or debt
    (-), each on its own axis."""
    shown = data["projects"][:MAX_DELIVERY_BARS]
    paths = [p["path"] for p in shown]
    bars = _figure(
        [
            {
                "type": "bar",
                "y": paths,
                "x": [p[key] for p in shown],
                "name": name,
                "orientation": "h",
                "marker": {"color": colour},
                "hovertemplate": "%{x:,.1f} GPU-h",
            }
            for name, key, colour in (
                ("Demand-capped entitlement", "entitled_gpu_h", "#c9ced6"),
                ("Delivered", "delivered_gpu_h", "#2457c5"),
            )
        ],
        barmode="group",
        hovermode="y unified",
        height=max(260, 90 + 34 * len(shown)),
        xaxis=_axis("GPU-hours in the period", rangemode="tozero"),
        yaxis=_axis(
            "Project",
            autorange="reversed",
            tickmode="array",
            tickvals=paths,
            ticktext=[short_label(p) for p in paths],
        ),
    )
    over_time = _delivery_over_time(data, step, partial or [])
    narrow(bars, yaxis__ticktext=[leaf_label(p) for p in paths], xaxis__title__text="GPU-hours")
    return {"bars": bars, "over_time": over_time}


def _delivery_over_time(
    data: dict[str, Any], step: str, partial: list[tuple[dt.datetime, dt.datetime]]
) -> dict[str, Any]:
    """All projects' delivered and entitled GPU-hours per step above their cumulative
    credit or debt."""
    x = _iso(data["steps"])
    # two plots on one shared x axis (what plotly's make_subplots(rows=2, shared_xaxes=True,
    # row_heights=[0.6, 0.4], vertical_spacing=0.08) lays out): ticks and title below only
    cumulative = {"zeroline": True, "zerolinecolor": "#5c6677", "tickformat": ",.0f"}
    over_time = _figure(
        [
            {
                "type": "scatter",
                "name": "Demand-capped entitlement",
                "line": {"color": "#8a94a6"},
                "x": x,
                "y": data["entitled"],
                "xaxis": "x",
                "yaxis": "y",
            },
            {
                "type": "scatter",
                "name": "Delivered",
                "line": {"color": "#2457c5"},
                "x": x,
                "y": data["delivered"],
                "xaxis": "x",
                "yaxis": "y",
            },
            {
                "type": "bar",
                "name": "Cumulative credit (+) / debt (−)",
                "marker": {"color": "#e5484d"},
                "x": x,
                "y": data["cumulative"],
                "xaxis": "x2",
                "yaxis": "y2",
            },
        ],
        bargap=0,
        height=420,
        xaxis={"anchor": "y", "domain": [0.0, 1.0], "matches": "x2", "showticklabels": False},
        xaxis2=_axis(step_title(step), anchor="y2", domain=[0.0, 1.0]),
        yaxis=_axis(f"GPU-hours per {step}", anchor="x", domain=[0.448, 1.0], **cumulative),
        yaxis2=_axis("Cumulative GPU-hours", anchor="x2", domain=[0.0, 0.368], **cumulative),
    )
    _mark_partial(over_time["layout"], partial, xref="x2")
    return over_time


def delivery_csv(data: dict[str, Any]) -> list[list[Any]]:
    rows: list[list[Any]] = [
        [
            "project",
            "capped_entitled_gpu_h",
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
        ["step_start", "capped_entitled_gpu_h", "delivered_gpu_h", "cumulative_gpu_h"]
    ]
    for i, at in enumerate(data["steps"]):
        rows.append(
            [at.isoformat(), data["entitled"][i], data["delivered"][i], data["cumulative"][i]]
        )
    return rows


def waits_figures(
    waits: list[dict], preemptions: list[dict], *, step: str = "hour", partial: list | None = None
) -> dict[str, dict[str, Any]]:
    """Median and 90th-percentile wait per job kind and step on a log axis (debug waits
    of seconds and sweep waits of days on one chart), and preemptions per step by rule,
    each rule named for people."""
    by_kind: dict[str, list[dict]] = defaultdict(list)
    for row in waits:
        by_kind[row["kind"]].append(row)
    traces = []
    for i, (kind, rows) in enumerate(sorted(by_kind.items())):
        x = [r["at"].isoformat() for r in rows]
        colour = KIND_COLOURS[i % len(KIND_COLOURS)]
        for name, key, line, mode in (
            ("median", "p50_wait_s", {"color": colour}, "lines+markers"),
            ("90th percentile", "p90_wait_s", {"dash": "dot", "color": colour}, "lines"),
        ):
            minutes = [r[key] / 60 for r in rows]
            traces.append(
                {
                    "type": "scatter",
                    "x": x,
                    "y": [max(m, MIN_WAIT_MIN) for m in minutes],
                    "customdata": [span_text(r[key]) for r in rows],
                    "hovertemplate": "%{customdata}",
                    "name": f"{kind.capitalize()}: {name}",
                    "mode": mode,
                    "line": line,
                }
            )
    wait_fig = _figure(
        traces,
        height=400,
        xaxis=_axis(step_title(step)),
        yaxis=_axis(
            "Wait (log scale; under 1 s drawn at 1 s)",
            type="log",
            # about a decade apart, so no two labels meet however tall the chart
            tickvals=[1 / 60, 1 / 6, 1, 10, 60, 600, 5760, 57600],
            ticktext=["1 s", "10 s", "1 min", "10 min", "1 h", "10 h", "4 d", "40 d"],
        ),
    )
    by_rule: dict[str, list[dict]] = defaultdict(list)
    for row in preemptions:
        by_rule[row["rule"]].append(row)
    period_ms = int(STEPS[step].total_seconds() * 1000)
    pre_fig = _figure(
        [
            {
                "type": "bar",
                "x": [r["at"].isoformat() for r in rows],
                "y": [r["count"] for r in rows],
                "name": rule_label(rule),
                "xperiod": period_ms,
                "xperiodalignment": "middle",
                "width": int(period_ms * 0.9),
            }
            for rule, rows in sorted(by_rule.items())
        ],
        barmode="stack",
        xaxis=_axis(step_title(step)),
        yaxis=_axis(f"Preemptions per {step}", rangemode="tozero"),
    )
    _mark_partial(wait_fig["layout"], partial or [])
    _mark_partial(pre_fig["layout"], partial or [])
    return {"waits": wait_fig, "preemptions": pre_fig}


def waits_csv(waits: list[dict]) -> list[list[Any]]:
    rows: list[list[Any]] = [["step_start", "kind", "jobs", "p50_wait_s", "p90_wait_s"]]
    rows += [
        [r["at"].isoformat(), r["kind"], r["jobs"], r["p50_wait_s"], r["p90_wait_s"]] for r in waits
    ]
    return rows


def preemptions_csv(preemptions: list[dict]) -> list[list[Any]]:
    return [["step_start", "rule", "rule_label", "count"]] + [
        [r["at"].isoformat(), r["rule"], rule_label(r["rule"]), r["count"]] for r in preemptions
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
        # a node that used nothing: "∞", as the page writes it (`level_fs_text`)
        level = r["level_fs_text"] if r["level_fs_infinite"] else r["level_fs"]
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
    """Delivered vs entitled GPU-hours of the user's projects (one horizontal bar pair
    per project and cluster, long paths shortened on the axis), or None when there is
    nothing to draw."""
    labels, short, leaf, entitled, delivered = [], [], [], [], []
    clusters = {c["cluster"] for p in projects for c in p["clusters"]}
    for p in projects:
        for c in p["clusters"]:
            where = f" @ {c['cluster']}" if len(clusters) > 1 else ""
            labels.append(f"{p['path']} @ {c['cluster']}")
            short.append(f"{short_label(p['path'])}{where}")
            leaf.append(f"{leaf_label(p['path'])}{where}")
            entitled.append(c["entitled_gpu_h"])
            delivered.append(c["delivered_gpu_h"])
    if not labels:
        return None
    bar = {"type": "bar", "y": labels, "orientation": "h", "hovertemplate": "%{x:,.1f} GPU-h"}
    figure = _figure(
        [
            {
                **bar,
                "x": entitled,
                "name": "Demand-capped entitlement",
                "marker": {"color": "#c9ced6"},
            },
            {**bar, "x": delivered, "name": "Delivered", "marker": {"color": "#2457c5"}},
        ],
        barmode="group",
        hovermode="y unified",
        height=max(240, 90 + 34 * len(labels)),
        xaxis=_axis("GPU-hours, last 7 days", rangemode="tozero"),
        yaxis=_axis(
            "Project @ cluster" if len(clusters) > 1 else f"Project ({clusters.pop()})",
            autorange="reversed",
            tickmode="array",
            tickvals=labels,
            ticktext=short,
        ),
    )
    return narrow(figure, yaxis__ticktext=leaf, xaxis__title__text="GPU-h, 7 days")


PYRAMID_LABELS = {
    "availability": "Availability",
    "occupancy": "Occupancy",
    "impact": "Impact",
    "utilization": "GPU utilization",
}
PYRAMID_COLOURS = {
    "availability": "#5c6677",
    "occupancy": "#2457c5",
    "impact": "#12a594",
    "utilization": "#f5a524",
}


def pyramid_figure(
    data: dict[str, Any], *, step: str = "hour", partial: list | None = None
) -> dict[str, Any]:
    """The four pyramid figures per step as lines (percent; a gap where undefined)."""
    x = _iso(data["steps"])
    figure = _figure(
        [
            {
                "type": "scatter",
                "name": label,
                "mode": "lines+markers",
                "line": {"color": PYRAMID_COLOURS[key]},
                "hovertemplate": "%{y:.1f}%",
                "x": x,
                "y": [None if v is None else round(v * 100, 2) for v in data["series"][key]],
            }
            for key, label in PYRAMID_LABELS.items()
        ],
        xaxis=_axis(step_title(step)),
        yaxis=_axis("% (of the level below)", range=[0, 105]),
    )
    _mark_partial(figure["layout"], partial or [])
    return figure


def efficiency_csv(projects: list[dict]) -> list[list[Any]]:
    rows: list[list[Any]] = [
        ["project", "held_gpu_h", "measured_gpu_h", "utilized_gpu_h", "utilization",
         "effective_gpu_h"]
    ]  # fmt: skip
    for p in projects:
        rows.append(
            [
                p["path"],
                round(p["held_gpu_h"], 3),
                round(p["measured_gpu_h"], 3),
                round(p["utilized_gpu_h"], 3),
                "" if p["utilization"] is None else round(p["utilization"], 4),
                "" if p["effective_gpu_h"] is None else round(p["effective_gpu_h"], 3),
            ]
        )
    return rows
