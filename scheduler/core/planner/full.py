"""Full mode: the formal model solved with OR-Tools CP-SAT, started from the fast grid.

Variables: one boolean per (batch job, start step, aligned block), at most one per
job; one integer per (service, step) for the GPUs it holds, within [0, demand]
and changing by at most `max_switch`. Constraints: each GPU-step is covered by
at most one batch placement, and batch GPUs + real-time GPUs <= gpus at every
step (real-time may take any GPUs, so the count is enough). Objective (scaled to
integers): batch priority x decay^t per GPU-step + penalty per served real-time
GPU-step (= minus the penalty on unmet demand, up to a constant).

The fast plan is given as a complete hint; whatever the solver returns is
rebuilt, re-scored exactly, and kept only if its objective beats the fast plan's.
"""

from __future__ import annotations

import os
import time
from typing import Any

from scheduler.core.planner.fast import schedule_fast
from scheduler.core.planner.model import Scenario
from scheduler.core.planner.plan import Plan, Schedule, build_matrix, compute_metrics

__all__ = ["DEFAULT_TIME_LIMIT_S", "plan_full"]

DEFAULT_TIME_LIMIT_S = 10.0
_SCALE = 1000


def _legal_blocks(scenario: Scenario, size: int) -> list[int]:
    per_host = scenario.gpus_per_host
    blocks = []
    for g0 in range(0, scenario.gpus - size + 1, size):
        if size <= per_host and g0 // per_host != (g0 + size - 1) // per_host:
            continue
        blocks.append(g0)
    return blocks


def _solve(
    scenario: Scenario, hint: Schedule, deadline: float
) -> tuple[Schedule | None, dict[str, Any]]:
    # Imported at the first solve, not with the module: OR-Tools loads pandas (0.6 of a
    # web process's 1.9 CPU-s start), and every web process imports this module through
    # the planner page's URL conf, most of them never solving in full mode.
    from ortools.sat.python import cp_model

    steps, gpus = scenario.steps, scenario.gpus
    model = cp_model.CpModel()
    cells: list[list[list[cp_model.IntVar]]] = [[[] for _ in range(gpus)] for _ in range(steps)]
    step_terms: list[list[tuple[int, cp_model.IntVar]]] = [[] for _ in range(steps)]
    objective: list[Any] = []
    placements: dict[str, list[tuple[int, int, cp_model.IntVar]]] = {}
    decay = [scenario.decay**t for t in range(steps)]
    for job in scenario.batch:
        choices = []
        for t0 in range(job.arrival, steps):
            t1 = min(steps, t0 + job.duration)
            weight = round(_SCALE * job.priority * job.gpus * sum(decay[t0:t1]))
            for g0 in _legal_blocks(scenario, job.gpus):
                x = model.new_bool_var(f"{job.id}@{t0},{g0}")
                choices.append((t0, g0, x))
                objective.append(weight * x)
                for t in range(t0, t1):
                    step_terms[t].append((job.gpus, x))
                    for g in range(g0, g0 + job.gpus):
                        cells[t][g].append(x)
        placements[job.id] = choices
        if choices:
            model.add_at_most_one(x for _, _, x in choices)
        start = hint.starts.get(job.id)
        for t0, g0, x in choices:
            model.add_hint(x, start == (t0, g0))
    served: dict[str, list[cp_model.IntVar]] = {}
    pen = round(_SCALE * scenario.penalty)
    for svc in scenario.realtime:
        xs = [model.new_int_var(0, d, f"{svc.id}#{t}") for t, d in enumerate(svc.demand)]
        for t in range(1, steps):
            model.add(xs[t] - xs[t - 1] <= svc.max_switch)
            model.add(xs[t - 1] - xs[t] <= svc.max_switch)
        for t, x in enumerate(xs):
            step_terms[t].append((1, x))
            model.add_hint(x, hint.realtime[svc.id][t])
        objective.extend(pen * x for x in xs)
        served[svc.id] = xs
    for t in range(steps):
        for g in range(gpus):
            if len(cells[t][g]) > 1:
                model.add_at_most_one(cells[t][g])
        if step_terms[t]:
            model.add(sum(c * v for c, v in step_terms[t]) <= gpus)
    model.maximize(sum(objective))
    solver = cp_model.CpSolver()
    solver.parameters.max_time_in_seconds = max(0.05, deadline - time.perf_counter())
    solver.parameters.num_workers = max(1, min(8, os.cpu_count() or 1))
    solver.parameters.random_seed = 0
    if sum(len(c) for c in placements.values()) > 5000:
        # symmetry detection on large grids can overrun the time limit many times over
        solver.parameters.symmetry_level = 0
    status = solver.solve(model)
    info = {"status": solver.status_name(status), "wall_s": round(solver.wall_time, 3)}
    if status not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        return None, info
    schedule = Schedule()
    for job_id, choices in placements.items():
        for t0, g0, x in choices:
            if solver.boolean_value(x):
                schedule.starts[job_id] = (t0, g0)
    for svc_id, xs in served.items():
        schedule.realtime[svc_id] = [int(solver.value(x)) for x in xs]
    return schedule, info


def plan_full(scenario: Scenario, time_limit_s: float = DEFAULT_TIME_LIMIT_S) -> Plan:
    """The solver plan, or the fast plan when the solver does not beat it."""
    began = time.perf_counter()
    fast_schedule = schedule_fast(scenario)
    fast_matrix = build_matrix(scenario, fast_schedule)
    fast_objective = compute_metrics(scenario, fast_matrix, 0.0)["objective"]
    schedule, info = _solve(scenario, fast_schedule, began + time_limit_s)
    matrix, source = fast_matrix, "fast"
    if schedule is not None:
        solved = build_matrix(scenario, schedule)
        if compute_metrics(scenario, solved, 0.0)["objective"] > fast_objective:
            matrix, source = solved, "solver"
    runtime_ms = (time.perf_counter() - began) * 1000
    info["source"] = source
    return Plan("full", matrix, compute_metrics(scenario, matrix, runtime_ms), info)
