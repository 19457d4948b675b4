"""Plans: the GPU x step grid a mode produces, its metrics and its PLAN.json form.

Inside the planner a grid is a numpy matrix `steps x gpus` of job indexes
(`Scenario.job_ids()` order: batch jobs first, then real-time services), -1 for
an empty cell. PLAN.json carries the same grid with job ids and `null`.

numpy is imported by the functions that compute with it, not with the module: the
planner page's URL conf imports the planner, and numpy's import (~0.2 CPU-s) would be
part of the start of every web worker, Celery worker and `manage.py` command, most of
which never plan (tests/ops/test_gunicorn_worker_init.py).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from scheduler.core.planner.model import Scenario

if TYPE_CHECKING:
    import numpy as np

__all__ = ["MODES", "Plan", "Schedule", "build_matrix", "compute_metrics", "lipschitz_below"]

MODES = ("fifo", "fast", "full")


@dataclass(slots=True)
class Schedule:
    """What a mode decided: where each batch job starts and how many GPUs each service holds.

    `starts[job_id] = (step, first_gpu)`; `realtime[service_id][t]` = GPUs held at step t.
    `realtime_ranges` optionally confines a service to GPUs [lo, hi) (the FIFO reservation).
    """

    starts: dict[str, tuple[int, int]] = field(default_factory=dict)
    realtime: dict[str, list[int]] = field(default_factory=dict)
    realtime_ranges: dict[str, tuple[int, int]] = field(default_factory=dict)


@dataclass(slots=True)
class Plan:
    """A planned window: mode, index matrix and metrics (see `compute_metrics`)."""

    mode: str
    matrix: np.ndarray
    metrics: dict[str, Any]
    info: dict[str, Any] = field(default_factory=dict)

    def grid(self, scenario: Scenario) -> list[list[str | None]]:
        """The grid with job ids: one row per step, one cell per GPU, `None` when empty."""
        names: list[str | None] = [*scenario.job_ids(), None]  # index -1 -> None
        return [[names[i] for i in row] for row in self.matrix.tolist()]

    def to_json(self, scenario: Scenario) -> dict[str, Any]:
        """The PLAN.json document: mode, grid and metrics."""
        return {"mode": self.mode, "grid": self.grid(scenario), "metrics": dict(self.metrics)}


def lipschitz_below(upper: list[int] | np.ndarray, max_switch: int) -> list[int]:
    """The largest sequence x <= upper (pointwise) with |x[t] - x[t-1]| <= max_switch.

    Two passes; the result is pointwise maximal, so it serves the most demand a
    service can get under these caps.
    """
    x = [max(0, int(u)) for u in upper]
    for t in range(1, len(x)):
        if x[t] > x[t - 1] + max_switch:
            x[t] = x[t - 1] + max_switch
    for t in range(len(x) - 2, -1, -1):
        if x[t] > x[t + 1] + max_switch:
            x[t] = x[t + 1] + max_switch
    return x


def build_matrix(scenario: Scenario, schedule: Schedule) -> np.ndarray:
    """Paint a schedule onto a `steps x gpus` index matrix.

    Batch blocks first; then each service takes free GPUs in its range (the whole
    cluster by default), highest index first. Raises `ValueError` if a service
    cannot get the count the schedule gives it (a bug in the mode).
    """
    import numpy as np  # at the first plan (the module doc)

    steps, gpus = scenario.steps, scenario.gpus
    m = np.full((steps, gpus), -1, dtype=np.int32)
    for idx, job in enumerate(scenario.batch):
        if job.id not in schedule.starts:
            continue
        t0, g0 = schedule.starts[job.id]
        t1 = min(steps, t0 + job.duration)
        m[t0:t1, g0 : g0 + job.gpus] = idx
    base = len(scenario.batch)
    for s_idx, svc in enumerate(scenario.realtime):
        counts = schedule.realtime.get(svc.id)
        if counts is None:
            continue
        lo, hi = schedule.realtime_ranges.get(svc.id, (0, gpus))
        want = np.asarray(counts, dtype=np.int64)[:, None]
        area = m[:, lo:hi]
        free = area == -1
        # free cells at or after each GPU, counted from the top: take the top `want`
        from_top = np.cumsum(free[:, ::-1], axis=1)[:, ::-1]
        short = np.flatnonzero(from_top[:, 0] < want[:, 0]) if hi > lo else np.flatnonzero(want)
        if len(short):
            t = int(short[0])
            raise ValueError(f"{svc.id} needs {counts[t]} GPUs at step {t}, fewer are free")
        area[free & (from_top <= want)] = base + s_idx
    return m


def job_step_counts(scenario: Scenario, matrix: np.ndarray) -> np.ndarray:
    """`counts[t, j]` = cells job j holds at step t (column -1 absent)."""
    import numpy as np  # at the first plan (the module doc)

    steps = matrix.shape[0]
    n = len(scenario.batch) + len(scenario.realtime)
    offsets = (np.arange(steps, dtype=np.int64) * (n + 1))[:, None]
    flat = (matrix.astype(np.int64) + 1 + offsets).ravel()
    counts = np.bincount(flat, minlength=steps * (n + 1)).reshape(steps, n + 1)
    return counts[:, 1:]


def compute_metrics(scenario: Scenario, matrix: np.ndarray, runtime_ms: float) -> dict[str, Any]:
    """utilization, value, objective, completed, unmet_realtime, runtime_ms of a grid.

    utilization = cells in use / (gpus x steps); value = sum of batch GPU-steps x
    priority; objective = sum of batch GPU-steps x priority x decay^t - penalty x
    unmet real-time GPU-steps; completed = batch jobs that ran their full duration.
    """
    import numpy as np  # at the first plan (the module doc)

    steps, gpus = scenario.steps, scenario.gpus
    nb = len(scenario.batch)
    counts = job_step_counts(scenario, matrix)
    batch_counts = counts[:, :nb].astype(np.float64)
    prio = np.array([j.priority for j in scenario.batch], dtype=np.float64)
    decay = scenario.decay ** np.arange(steps, dtype=np.float64)
    per_step_value = batch_counts @ prio if nb else np.zeros(steps)
    value = float(per_step_value.sum())
    discounted = float(per_step_value @ decay)
    unmet = 0
    if scenario.realtime:
        demand = np.array([s.demand for s in scenario.realtime], dtype=np.int64).T
        unmet = int(np.maximum(0, demand - counts[:, nb:]).sum())
    held_steps = (counts[:, :nb] > 0).sum(axis=0)
    completed = sum(1 for j, job in enumerate(scenario.batch) if held_steps[j] >= job.duration)
    used = int((matrix >= 0).sum())
    return {
        "utilization": round(used / (gpus * steps), 4),
        "value": round(value, 3),
        "objective": round(discounted - scenario.penalty * unmet, 3),
        "completed": completed,
        "unmet_realtime": unmet,
        "runtime_ms": round(runtime_ms, 3),
    }
