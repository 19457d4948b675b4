"""The validator names every violated constraint; one failing grid per constraint."""

from __future__ import annotations

import copy

import pytest

from scheduler.core.planner.validate import CONSTRAINTS, validate_plan
from tests.core.planner.conftest import legal_grid, plan_doc


def _names(scenario, doc) -> set[str]:
    return {v.constraint for v in validate_plan(scenario, doc)}


def _mutated(edits: dict[tuple[int, int], object]) -> list[list[object]]:
    grid = copy.deepcopy(legal_grid())
    for (t, g), cell in edits.items():
        grid[t][g] = cell
    return grid


def test_legal_grid_passes(tiny):
    assert validate_plan(tiny, plan_doc(tiny, legal_grid())) == []


def test_one_job_per_gpu(tiny):
    grid = _mutated({(0, 5): ["a", "r"]})
    assert "one-job-per-gpu" in _names(tiny, plan_doc(tiny, grid))


def test_unknown_id(tiny):
    grid = _mutated({(0, 4): "ghost"})
    violations = validate_plan(tiny, plan_doc(tiny, grid))
    assert [v.constraint for v in violations] == ["unknown-id"]
    assert "'ghost' at cell [0][4]" in violations[0].message


def test_power_of_two(tiny):
    grid = _mutated({(t, 3): None for t in range(4)})  # b holds 3 GPUs
    assert _names(tiny, plan_doc(tiny, grid)) == {"power-of-two"}


def test_block_size(tiny):
    grid = _mutated({(t, g): None for t in range(4) for g in (2, 3)})  # b holds 2 of its 4
    assert _names(tiny, plan_doc(tiny, grid)) == {"block-size"}


def test_contiguous(tiny):
    # a on GPUs 4 and 6 (r moves to 5 and 7)
    grid = _mutated({(1, 5): "r", (2, 5): "r", (1, 6): "a", (2, 6): "a"})
    assert _names(tiny, plan_doc(tiny, grid)) == {"contiguous"}


def test_alignment(tiny):
    # a on GPUs 5-6: inside host 1 (4-7), but 5 is not a multiple of 2
    grid = _mutated(
        {(t, g): c for t in (1, 2) for g, c in ((4, "r"), (5, "a"), (6, "a"), (7, "r"))}
    )
    assert _names(tiny, plan_doc(tiny, grid)) == {"alignment"}


def test_host_boundary(tiny):
    # b on GPUs 2-5 crosses the boundary between host 0 (0-3) and host 1 (4-7)
    grid = [
        [None, None, "b", "b", "b", "b", None, "r"],
        ["a", "a", "b", "b", "b", "b", "r", "r"],
        ["a", "a", "b", "b", "b", "b", "r", "r"],
        [None, None, "b", "b", "b", "b", None, "r"],
    ]
    assert _names(tiny, plan_doc(tiny, grid)) == {"host", "alignment"}


def test_no_move(tiny):
    # a on GPUs 4-5 at step 1, then 6-7 at step 2
    grid = _mutated({(2, 4): "r", (2, 5): "r", (2, 6): "a", (2, 7): "a"})
    assert _names(tiny, plan_doc(tiny, grid)) == {"no-move"}


def test_no_interruption(tiny):
    # a runs at steps 1 and 3, not 2: two steps in all, but interrupted
    grid = _mutated({(2, 4): None, (2, 5): None, (3, 4): "a", (3, 5): "a"})
    assert _names(tiny, plan_doc(tiny, grid)) == {"no-interruption"}


def test_arrival(tiny):
    # a (arrives at step 1) runs at steps 0-1
    grid = _mutated({(0, 4): "a", (0, 5): "a", (2, 4): None, (2, 5): None})
    assert _names(tiny, plan_doc(tiny, grid)) == {"arrival"}


def test_duration_too_short(tiny):
    # a stops after one step although the window had room for its two
    grid = _mutated({(2, 4): None, (2, 5): None})
    violations = validate_plan(tiny, plan_doc(tiny, grid))
    assert [v.constraint for v in violations] == ["duration"]
    assert "needs 2" in violations[0].message


def test_duration_too_long(tiny):
    grid = _mutated({(3, 4): "a", (3, 5): "a"})
    assert _names(tiny, plan_doc(tiny, grid)) == {"duration"}


def test_duration_cut_by_window_end_is_legal(tiny):
    # a starts at the last step: one step is all the window allows
    grid = _mutated({(1, 4): None, (1, 5): None, (2, 4): None, (2, 5): None,
                     (3, 4): "a", (3, 5): "a"})  # fmt: skip
    assert validate_plan(tiny, plan_doc(tiny, grid)) == []


def test_max_switch(tiny):
    # r goes 0 -> 2 GPUs between steps 0 and 1 (max_switch 1)
    grid = _mutated({(0, 7): None})
    violations = validate_plan(tiny, plan_doc(tiny, grid))
    assert [v.constraint for v in violations] == ["max-switch"]
    assert "from 0 to 2 GPUs at step 1" in violations[0].message


def test_realtime_over_demand(tiny):
    # r holds 2 at step 0 where it asks for 1 (2 -> 2 -> 2 -> 1 keeps max_switch)
    grid = _mutated({(0, 6): "r"})
    violations = validate_plan(tiny, plan_doc(tiny, grid))
    assert [v.constraint for v in violations] == ["realtime-demand"]
    assert "demand is 1" in violations[0].message


@pytest.mark.parametrize(
    "grid",
    [
        legal_grid()[:3],  # a step missing
        [row if t != 2 else row[:7] for t, row in enumerate(legal_grid())],  # a GPU missing
    ],
)
def test_grid_shape(tiny, grid):
    doc = {"mode": "fast", "grid": grid, "metrics": {}}
    assert _names(tiny, doc) == {"grid-shape"}


def test_format_and_metrics(tiny):
    assert _names(tiny, {"mode": "fast"}) == {"format"}
    doc = plan_doc(tiny, legal_grid())
    doc["mode"] = "magic"
    assert _names(tiny, doc) == {"format"}
    doc = plan_doc(tiny, legal_grid())
    doc["metrics"]["objective"] += 1
    violations = validate_plan(tiny, doc)
    assert [v.constraint for v in violations] == ["metrics"]
    assert "objective" in violations[0].message


def test_every_violation_is_named_at_once(tiny):
    grid = _mutated({(0, 4): "ghost", (0, 6): "r"})
    grid[2][4] = grid[2][5] = None
    names = _names(tiny, plan_doc(tiny, grid))
    assert {"unknown-id", "realtime-demand", "duration"} <= names


def test_constraint_list_is_complete():
    tested = {
        "format", "grid-shape", "one-job-per-gpu", "unknown-id", "power-of-two", "block-size",
        "contiguous", "alignment", "host", "no-move", "no-interruption", "arrival", "duration",
        "realtime-demand", "max-switch", "metrics",
    }  # fmt: skip
    assert set(CONSTRAINTS) == tested
