"""Heatmap inputs for the plan page."""

from __future__ import annotations

from scheduler.core.planner import run_mode
from scheduler.core.planner.views_data import heatmap_data, list_scenarios
from tests.core.planner.conftest import legal_grid, plan_doc


def test_heatmap_from_a_plan_document(tiny):
    data = heatmap_data(tiny, plan_doc(tiny, legal_grid(), mode="fifo"))
    assert data["mode"] == "fifo"
    assert [e["id"] for e in data["legend"]] == ["a", "b", "r"]
    assert data["realtime_ids"] == ["r"]
    assert [e["realtime"] for e in data["legend"]] == [False, False, True]
    # GPU rows x step columns
    assert len(data["z"]) == 8 and all(len(row) == 4 for row in data["z"])
    assert data["z"][0] == [1, 1, 1, 1]  # GPU 0 holds b all window
    assert data["z"][4] == [None, 0, 0, None]  # GPU 4 holds a at steps 1-2
    assert data["z"][7] == [2, 2, 2, 2]  # GPU 7 serves r
    assert data["hover"][4][1].startswith("GPU 4, step 1: a (training, 2 GPUs")
    assert data["hover"][4][0] == "GPU 4, step 0: idle"
    assert "real-time, demand 3" in data["hover"][6][1]
    assert data["zmin"] == -0.5 and data["zmax"] == 2.5
    assert len(data["colorscale"]) == 6 and data["colorscale"][-1][0] == 1.0
    assert data["metrics"]["utilization"] == 26 / 32


def test_heatmap_from_a_plan_object(tiny):
    plan = run_mode(tiny, "fast")
    data = heatmap_data(tiny, plan)
    assert data["mode"] == "fast"
    assert data["metrics"] == plan.metrics
    cells = sum(c is not None for row in data["z"] for c in row)
    assert cells / (8 * 4) == plan.metrics["utilization"]


def test_list_scenarios():
    items = list_scenarios()
    assert len(items) == 7
    scale = next(i for i in items if i["name"] == "scale")
    assert scale["gpus"] == 64 and scale["steps"] == 24
    assert scale["path"].endswith("scenarios/scale.json")
