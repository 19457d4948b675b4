"""Behaviour of the three modes: FIFO's reservation, fast's gains, full >= fast."""

from __future__ import annotations

import numpy as np
import pytest

from scheduler.core.planner import run_mode
from scheduler.core.planner.model import parse_scenario
from scheduler.core.planner.plan import lipschitz_below
from scheduler.core.planner.report import build_report, shipped_paths
from scheduler.core.planner.validate import validate_plan


def _reservation_scenario():
    # chat needs 2 GPUs at 04:00 and 6 at 12:00; plenty of 1- and 2-GPU batch work
    demand = [2, 2, 2, 2, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 5, 5, 4, 4, 3, 3, 2, 2, 2, 2]
    batch = [
        {"id": f"j{i}", "kind": "training", "gpus": 1 + (i % 2), "duration": 6,
         "priority": 1 + i % 3, "arrival": i % 4}
        for i in range(20)
    ]  # fmt: skip
    return parse_scenario(
        {"name": "reserve", "gpus": 8, "steps": 24, "penalty": 8, "batch": batch,
         "realtime": [{"id": "chat", "demand": demand, "max_switch": 1}]}
    )  # fmt: skip


def test_fifo_reserves_the_peak_all_day():
    sc = _reservation_scenario()
    plan = run_mode(sc, "fifo")
    m = plan.matrix
    chat = len(sc.batch)
    # batch work never touches the 6 GPUs reserved for chat's noon peak, even at 04:00
    reserved = m[:, 2:]
    assert ((reserved >= 0) & (reserved < chat)).sum() == 0
    assert (m[:, :2] >= 0).all()
    # at 04:00 chat uses 2 of its 6 GPUs: the other 4 sit idle
    assert (m[4] == chat).sum() == 2
    assert (m[4] == -1).sum() == 4
    assert (m[12] == chat).sum() == 6
    assert plan.metrics["unmet_realtime"] == 0
    assert validate_plan(sc, plan.to_json(sc)) == []


def test_fast_lends_night_capacity_to_batch():
    sc = _reservation_scenario()
    fifo, fast = run_mode(sc, "fifo"), run_mode(sc, "fast")
    chat = len(sc.batch)
    night = fast.matrix[4]
    assert ((night >= 0) & (night < chat)).sum() >= 5  # batch uses what chat does not need at night
    assert fast.metrics["unmet_realtime"] == 0  # and chat still gets all it asks for
    assert fast.metrics["utilization"] > fifo.metrics["utilization"] + 0.15
    assert fast.metrics["value"] > fifo.metrics["value"]
    assert validate_plan(sc, fast.to_json(sc)) == []


def test_fast_gives_realtime_gpus_to_batch_only_when_worth_the_penalty():
    # one 8-GPU job worth 20 per GPU-step vs a 1-GPU service at penalty 1: the job wins
    raw = {
        "name": "trade", "gpus": 8, "steps": 4, "decay": 1.0, "penalty": 1,
        "batch": [{"id": "big", "kind": "training", "gpus": 8, "duration": 4, "priority": 20}],
        "realtime": [{"id": "rt", "demand": [1, 1, 1, 1], "max_switch": 1}],
    }  # fmt: skip
    plan = run_mode(parse_scenario(raw), "fast")
    assert plan.metrics["unmet_realtime"] == 4 and plan.metrics["completed"] == 1
    raw["penalty"], raw["batch"][0]["priority"] = 200, 1  # now the service wins
    plan = run_mode(parse_scenario(raw), "fast")
    assert plan.metrics["unmet_realtime"] == 0 and plan.metrics["completed"] == 0


def test_lipschitz_below_is_the_largest_switch_limited_curve():
    assert lipschitz_below([0, 6, 6, 0], 2) == [0, 2, 2, 0]
    assert lipschitz_below([5, 5, 1, 5], 1) == [3, 2, 1, 2]
    assert lipschitz_below([3, 3], 0) == [3, 3]


def test_full_beats_or_equals_fast_and_says_where_the_grid_came_from():
    sc = _reservation_scenario()
    fast = run_mode(sc, "fast")
    full = run_mode(sc, "full", 1.0)
    assert full.metrics["objective"] >= fast.metrics["objective"]
    assert full.info["source"] in {"fast", "solver"}
    assert validate_plan(sc, full.to_json(sc)) == []


@pytest.mark.parametrize("path", shipped_paths(), ids=lambda p: p.stem)
def test_shipped_scenarios_fast_and_fifo(path):
    from scheduler.core.planner.model import load_scenario

    sc = load_scenario(path)
    fifo, fast = run_mode(sc, "fifo"), run_mode(sc, "fast")
    for plan in (fifo, fast):
        assert validate_plan(sc, plan.to_json(sc)) == []
    assert fast.metrics["utilization"] >= fifo.metrics["utilization"]
    assert fast.metrics["objective"] >= fifo.metrics["objective"]
    if sc.contended:
        assert fast.metrics["value"] > fifo.metrics["value"]


def test_seven_scenarios_and_the_report():
    names = {p.stem for p in shipped_paths()}
    assert names == {
        "mixed-control", "training-heavy", "inference-heavy", "quantization-burst",
        "uniform-priority", "scale", "no-contention",
    }  # fmt: skip
    report = build_report(time_limit_s=0.3)
    by_name = {r.scenario: r for r in report["rows"]}
    assert not by_name["no-contention"].contended
    for row in report["rows"]:
        assert row.violations == {"fifo": 0, "fast": 0, "full": 0}
        assert row.metrics["full"]["objective"] >= row.metrics["fast"]["objective"]
    uniform = by_name["uniform-priority"]
    assert uniform.gain("fast")[0] > 0
    assert np.isfinite(report["contended_means"]["fast"]["value_pct"])


def test_fast_reaches_the_issue_figures_on_the_shipped_contended_scenarios():
    # issue 4: fast averages >= +20 utilization points and >= +52% value over fifo on
    # the contended scenarios, and loses on utilization in none of them (rounded as
    # the report rounds them; fifo and fast are deterministic, no timing involved)
    from scheduler.core.planner.model import load_scenario
    from scheduler.core.planner.report import ReportRow

    gains = []
    for path in shipped_paths():
        sc = load_scenario(path)
        if not sc.contended:
            continue
        row = ReportRow(sc.name, sc.gpus, len(sc.batch), sc.contended)
        row.metrics = {mode: run_mode(sc, mode).metrics for mode in ("fifo", "fast")}
        points, pct = row.gain("fast")
        assert points >= 0, sc.name
        assert pct > 0, sc.name
        gains.append((points, pct))
    assert len(gains) == 5
    assert sum(g[0] for g in gains) / len(gains) >= 20.0
    assert sum(g[1] for g in gains) / len(gains) >= 52.0
