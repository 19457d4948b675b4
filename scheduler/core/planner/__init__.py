"""Window planner: plan a GPU x time-step grid for batch jobs and elastic real-time
inference (SPEC section 2), in three modes:

- `fifo`: the baseline (real-time services reserve their peak all window, batch
  jobs first-fit in arrival order);
- `fast`: a heuristic over the whole window that only builds legal grids;
- `full`: the formal model with OR-Tools CP-SAT, started from the fast grid and
  never worse than it.

Pure Python (numpy, ortools): no Django. CLI: `python -m scheduler.core.planner`.
"""

from __future__ import annotations

from scheduler.core.planner.fast import plan_fast
from scheduler.core.planner.fifo import plan_fifo
from scheduler.core.planner.full import plan_full
from scheduler.core.planner.model import (
    BatchJob,
    RealtimeService,
    Scenario,
    ScenarioError,
    load_scenario,
    parse_scenario,
)
from scheduler.core.planner.plan import MODES, Plan
from scheduler.core.planner.validate import Violation, validate_plan

__all__ = [
    "MODES",
    "BatchJob",
    "Plan",
    "RealtimeService",
    "Scenario",
    "ScenarioError",
    "Violation",
    "load_scenario",
    "parse_scenario",
    "run_mode",
    "validate_plan",
]


def run_mode(scenario: Scenario, mode: str, time_limit_s: float = 10.0) -> Plan:
    """Plan `scenario` with `mode` (fifo, fast or full; `time_limit_s` bounds full)."""
    if mode == "fifo":
        return plan_fifo(scenario)
    if mode == "fast":
        return plan_fast(scenario)
    if mode == "full":
        return plan_full(scenario, time_limit_s)
    raise ValueError(f"unknown mode {mode!r}, expected one of {', '.join(MODES)}")
