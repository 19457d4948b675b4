"""Hypothesis: on random small scenarios every mode's grid is legal and full >= fast."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from scheduler.core.planner import run_mode
from scheduler.core.planner.model import parse_scenario
from scheduler.core.planner.validate import validate_plan


@st.composite
def scenarios(draw):
    gpus = draw(st.sampled_from([4, 8]))
    steps = draw(st.integers(2, 8))
    sizes = [s for s in (1, 2, 4, 8) if s <= gpus]
    batch = [
        {
            "id": f"j{i}",
            "kind": draw(st.sampled_from(["training", "batch_inference", "quantization"])),
            "gpus": draw(st.sampled_from(sizes)),
            "duration": draw(st.integers(1, 6)),
            "priority": draw(st.integers(1, 5)),
            "arrival": draw(st.integers(0, steps - 1)),
        }
        for i in range(draw(st.integers(0, 7)))
    ]
    realtime = [
        {
            "id": f"rt{i}",
            "demand": draw(st.lists(st.integers(0, gpus), min_size=steps, max_size=steps)),
            "max_switch": draw(st.integers(0, 3)),
        }
        for i in range(draw(st.integers(0, 2)))
    ]
    return parse_scenario(
        {
            "name": "random",
            "gpus": gpus,
            "steps": steps,
            "decay": draw(st.sampled_from([0.8, 0.97, 1.0])),
            "penalty": draw(st.sampled_from([0, 1, 3, 8])),
            "gpus_per_host": draw(st.sampled_from([2, 4, 8])),
            "batch": batch,
            "realtime": realtime,
        }
    )


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scenarios())
def test_every_mode_is_legal_and_full_is_never_worse(sc):
    plans = {mode: run_mode(sc, mode, 0.5) for mode in ("fifo", "fast", "full")}
    for mode, plan in plans.items():
        assert validate_plan(sc, plan.to_json(sc)) == [], mode
    assert plans["full"].metrics["objective"] >= plans["fast"].metrics["objective"]
    # a real-time service never gets more than its demand, batch work never exceeds the grid
    assert 0 <= plans["fast"].metrics["utilization"] <= 1
