"""The chart builders of dashboards/charts.py, without a page: what their axes say."""

import datetime as dt
import json

from dashboards.charts import (
    PYRAMID_LABELS,
    TEMPLATE,
    delivery_figures,
    my_projects_figure,
    occupancy_figure,
    pyramid_figure,
    rule_label,
    waits_figures,
)
from dashboards.selectors import BUCKET_LABELS


def test_the_wait_axis_title_does_not_contradict_its_tick_units():
    """The waits chart's log axis is labelled in s, min, h and d at its ticks; its title
    once said "minutes", which the tick labels then contradicted."""
    at = dt.datetime(2026, 12, 1, tzinfo=dt.UTC)
    rows = [{"at": at, "kind": "debug", "p50_wait_s": 0.0, "p90_wait_s": 30.0}]
    axis = waits_figures(rows, [])["waits"]["layout"]["yaxis"]
    title = axis["title"]["text"]
    assert axis["type"] == "log" and {"1 s", "1 min", "1 h"} <= set(axis["ticktext"])
    assert "minutes" not in title and "log scale" in title
    assert "under 1 s drawn at 1 s" in title  # a wait of 0 s sits on the 1 s line


# --- every figure builder: plain JSON in plotly's look -------------------------------

T0 = dt.datetime(2026, 12, 1, tzinfo=dt.UTC)
STEPS = [T0 + dt.timedelta(hours=i) for i in range(4)]
PARTIAL = [(STEPS[-1], STEPS[-1] + dt.timedelta(hours=1))]


def _figures() -> dict[str, dict]:
    """Each builder's figure(s) for a few steps of made-up data."""
    series = {key: [1.0, 2.0, None, 4.0] for key in PYRAMID_LABELS}
    projects = [
        {"path": f"org/programme/project-with-a-long-name-{i}", "entitled_gpu_h": 10.0 * i,
         "delivered_gpu_h": 8.0 * i}
        for i in range(3)
    ]  # fmt: skip
    delivery = {"projects": projects, "steps": STEPS, "entitled": [1.0] * 4,
                "delivered": [2.0] * 4, "cumulative": [1.0, -1.0, 0.5, 2.0]}  # fmt: skip
    waits = [{"at": at, "kind": kind, "p50_wait_s": 30.0, "p90_wait_s": 7200.0}
             for at in STEPS for kind in ("debug", "sweep")]  # fmt: skip
    preemptions = [{"at": at, "rule": "fairshare", "count": 2} for at in STEPS]
    mine = [{"path": "org/a/b", "clusters": [
        {"cluster": c, "entitled_gpu_h": 5.0, "delivered_gpu_h": 4.0} for c in ("a100", "h100")
    ]}]  # fmt: skip
    occupancy = {"steps": STEPS, "series": {b: [1.0, 2.0, 3.0, 4.0] for b in BUCKET_LABELS}}
    return {
        "occupancy": occupancy_figure(occupancy, partial=PARTIAL),
        **delivery_figures(delivery, partial=PARTIAL),
        **waits_figures(waits, preemptions, partial=PARTIAL),
        "pyramid": pyramid_figure({"steps": STEPS, "series": series}, partial=PARTIAL),
        "mine": my_projects_figure(mine),
    }


EXPECTED = {  # figure: (trace names, axis titles)
    "occupancy": (list(BUCKET_LABELS.values()), {"xaxis": "Hour (UTC)",
                                                 "yaxis": "GPU-hours per hour"}),
    "bars": (["Demand-capped entitlement", "Delivered"],
             {"xaxis": "GPU-hours in the period", "yaxis": "Project"}),
    "over_time": (["Demand-capped entitlement", "Delivered", "Cumulative credit (+) / debt (−)"],
                  {"xaxis2": "Hour (UTC)", "yaxis": "GPU-hours per hour",
                   "yaxis2": "Cumulative GPU-hours"}),
    "waits": (["Debug: median", "Debug: 90th percentile", "Sweep: median",
               "Sweep: 90th percentile"],
              {"xaxis": "Hour (UTC)", "yaxis": "Wait (log scale; under 1 s drawn at 1 s)"}),
    "preemptions": ([rule_label("fairshare")], {"xaxis": "Hour (UTC)", "yaxis": "Preemptions per hour"}),
    "pyramid": (list(PYRAMID_LABELS.values()), {"xaxis": "Hour (UTC)",
                                                "yaxis": "% (of the level below)"}),
    "mine": (["Demand-capped entitlement", "Delivered"],
             {"xaxis": "GPU-hours, last 7 days", "yaxis": "Project @ cluster"}),
}  # fmt: skip


def test_each_figure_is_plain_json_with_its_traces_and_axis_titles():
    figures = _figures()
    assert figures.keys() == EXPECTED.keys()
    for name, figure in figures.items():
        names, titles = EXPECTED[name]
        again = json.loads(json.dumps(figure, allow_nan=False))  # plain JSON, no NaN
        assert again == figure, name
        assert [trace["name"] for trace in figure["data"]] == names, name
        assert all(trace["type"] in ("bar", "scatter") for trace in figure["data"]), name
        layout = figure["layout"]
        assert {axis: layout[axis]["title"]["text"] for axis in titles} == titles, name
        assert layout["template"] is TEMPLATE, name
        assert layout["legend"]["orientation"] == "h" and layout["height"] >= 240, name
        if name in ("occupancy", "over_time", "waits", "preemptions", "pyramid"):
            assert [a["text"] for a in layout["annotations"]] == ["partial"], name
            assert len(figure["data"][0]["x"]) == len(STEPS), name


def test_the_shared_x_axis_of_delivery_over_time_is_written_out():
    """What plotly's make_subplots(rows=2, shared_xaxes=True) laid out: the upper plot's x
    axis follows the lower one, which alone shows ticks and title; the partial step is
    shaded on the lower one."""
    layout = _figures()["over_time"]["layout"]
    assert layout["xaxis"] == {"anchor": "y", "domain": [0.0, 1.0], "matches": "x2",
                               "showticklabels": False}  # fmt: skip
    assert layout["xaxis2"]["anchor"] == "y2" and layout["yaxis2"]["anchor"] == "x2"
    assert layout["yaxis"]["domain"][0] > layout["yaxis2"]["domain"][1]  # a gap between
    assert {s["xref"] for s in layout["shapes"]} == {"x2"}
    traces = _figures()["over_time"]["data"]
    assert [(t["xaxis"], t["yaxis"]) for t in traces] == [("x", "y"), ("x", "y"), ("x2", "y2")]


def test_the_phone_variants_shorten_labels_and_titles():
    figures = _figures()
    bars = figures["bars"]["layout"]["meta"]["narrow"]
    assert bars["yaxis.ticktext"] == [f"…h-a-long-name-{i}" for i in range(3)]
    assert bars["xaxis.title.text"] == "GPU-hours"
    mine = figures["mine"]["layout"]["meta"]["narrow"]
    assert mine["yaxis.ticktext"] == ["b @ a100", "b @ h100"]


def test_the_template_is_plotlys_default_look_for_bars_and_lines():
    """The figures carry the parts of plotly.py's default template that bars and lines
    on x/y axes use (what `figure.to_json()` embedded whole), so plotly.js draws them as
    before: the same values as plotly.io.templates["plotly"]."""
    import plotly.io as pio

    plotly = pio.templates["plotly"].to_plotly_json()
    for key, value in TEMPLATE["layout"].items():
        assert plotly["layout"][key] == value, key
    for trace_type, value in TEMPLATE["data"].items():
        assert plotly["data"][trace_type] == value, trace_type
    assert {"plot_bgcolor", "colorway", "xaxis", "yaxis", "font"} <= TEMPLATE["layout"].keys()


# the audit's project: cut from the left inside a name, it read "…nguage-models/post-training"
POST_TRAINING = "org/research-division/language-models/post-training"
LONG_LEAF = "org/research/a-project-whose-own-name-is-far-too-long"


def test_a_long_path_is_cut_at_a_slash_on_every_chart_never_inside_a_name():
    """/me/, the delivery dashboard and the what-if preview cut a long project path
    at a "/" (`short_label`, one rule): the project's own name stays whole, and only
    a name too long by itself is cut, from the left with an ellipsis."""
    from types import SimpleNamespace

    from scheduler.models import PreviewState
    from scheduler.views.whatif import _whatif_context

    paths = [POST_TRAINING, "org/research/models/post-training", LONG_LEAF]
    cells = [{"cluster": "a100", "entitled_gpu_h": 1.0, "delivered_gpu_h": 1.0}]
    mine = my_projects_figure([{"path": p, "clusters": cells} for p in paths])
    delivery = {"projects": [{"path": p, "entitled_gpu_h": 1.0, "delivered_gpu_h": 1.0}
                             for p in paths], "steps": STEPS, "entitled": [1.0] * 4,
                "delivered": [1.0] * 4, "cumulative": [0.0] * 4}  # fmt: skip
    preview = SimpleNamespace(
        pk=1, state=PreviewState.DONE, progress=1.0, window_days=7,
        cluster=SimpleNamespace(name="gpu"), result={"jobs": 1, "projects": [
            {"project": p, "delivered_gpu_h_before": 1.0, "delivered_gpu_h_after": 1.0}
            for p in paths]},
    )  # fmt: skip
    chart = _whatif_context(preview)["chart"]
    shown = ["…/post-training", "…/models/post-training", "…se-own-name-is-far-too-long"]
    assert mine["layout"]["yaxis"]["ticktext"] == shown
    assert delivery_figures(delivery)["bars"]["layout"]["yaxis"]["ticktext"] == shown
    assert chart["labels"] == shown
    narrow = ["post-training", "post-training", "…is-far-too-long"]
    assert mine["layout"]["meta"]["narrow"]["yaxis.ticktext"] == narrow
    assert chart["narrow_labels"] == narrow
    assert all(len(label) <= 28 for label in shown)
    assert "…nguage-models" not in json.dumps([mine, chart], ensure_ascii=False)
