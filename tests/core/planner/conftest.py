"""Small hand-built scenarios shared by the planner tests."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from scheduler.core.planner.model import Scenario, parse_scenario
from scheduler.core.planner.plan import compute_metrics


def small_raw() -> dict[str, Any]:
    """8 GPUs on two 4-GPU hosts, 4 steps, two batch jobs and one service."""
    return {
        "name": "tiny",
        "gpus": 8,
        "steps": 4,
        "decay": 0.9,
        "penalty": 5,
        "gpus_per_host": 4,
        "batch": [
            {"id": "a", "kind": "training", "gpus": 2, "duration": 2, "priority": 2, "arrival": 1},
            {"id": "b", "kind": "quantization", "gpus": 4, "duration": 4, "priority": 1},
        ],
        "realtime": [{"id": "r", "demand": [1, 3, 3, 1], "max_switch": 1}],
    }


@pytest.fixture
def tiny() -> Scenario:
    return parse_scenario(small_raw())


def legal_grid() -> list[list[str | None]]:
    """b on GPUs 0-3 all window, a on GPUs 4-5 at steps 1-2, r holding 1, 2, 2, 1."""
    return [
        ["b", "b", "b", "b", None, None, None, "r"],
        ["b", "b", "b", "b", "a", "a", "r", "r"],
        ["b", "b", "b", "b", "a", "a", "r", "r"],
        ["b", "b", "b", "b", None, None, None, "r"],
    ]


def plan_doc(scenario: Scenario, grid: list[list[Any]], mode: str = "fast") -> dict[str, Any]:
    """A PLAN.json document whose metrics agree with the grid (unknown cells ignored)."""
    index = {job_id: i for i, job_id in enumerate(scenario.job_ids())}
    rows = [
        [index.get(c, -1) if isinstance(c, str) else -1 for c in row]
        + [-1] * (scenario.gpus - len(row))
        for row in grid[: scenario.steps]
    ]
    rows += [[-1] * scenario.gpus] * (scenario.steps - len(rows))
    matrix = np.array([row[: scenario.gpus] for row in rows], dtype=np.int32)
    return {"mode": mode, "grid": grid, "metrics": compute_metrics(scenario, matrix, 0.1)}
