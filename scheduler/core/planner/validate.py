"""Check a PLAN.json document against its scenario and name every violated constraint.

Constraint names (the `constraint` of each `Violation`):

- `format`          the document is not {"mode", "grid", "metrics"}
- `grid-shape`      not one row per step with one cell per GPU
- `one-job-per-gpu` a cell holds more than one job (or something that is not an id)
- `unknown-id`      a cell names no job or service of the scenario
- `power-of-two`    a batch job holds a GPU count that is not a power of two
- `block-size`      a batch job holds a power of two other than the size it asked for
- `contiguous`      a batch job's GPUs are not one contiguous range
- `alignment`       a batch block does not start at a multiple of its size
- `host`            a batch block crosses a host boundary without spanning whole hosts
- `no-move`         a batch job holds different GPUs at different steps
- `no-interruption` a batch job stops and starts again
- `arrival`         a batch job starts before it arrives
- `duration`        a batch job runs fewer steps than its duration (before the window
                    ends) or more
- `realtime-demand` a service holds more GPUs than its demand at a step
- `max-switch`      a service's count changes by more than max_switch between steps
- `metrics`         the metrics disagree with the grid
"""

from __future__ import annotations

import functools
import math
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from scheduler.core.planner.model import BatchJob, Scenario, is_power_of_two
from scheduler.core.planner.plan import MODES, compute_metrics

if TYPE_CHECKING:
    import numpy as np

__all__ = ["CONSTRAINTS", "Violation", "validate_plan"]

CONSTRAINTS = (
    "format",
    "grid-shape",
    "one-job-per-gpu",
    "unknown-id",
    "power-of-two",
    "block-size",
    "contiguous",
    "alignment",
    "host",
    "no-move",
    "no-interruption",
    "arrival",
    "duration",
    "realtime-demand",
    "max-switch",
    "metrics",
)


@dataclass(frozen=True, slots=True)
class Violation:
    """One broken constraint, with a message that says where."""

    constraint: str
    message: str

    def __str__(self) -> str:
        return f"{self.constraint}: {self.message}"


def _once(out: list[Violation], reported: set[str], name: str, message: str) -> None:
    """Report each constraint once per job (its first occurrence says where)."""
    if name not in reported:
        reported.add(name)
        out.append(Violation(name, message))


def _check_timing(
    scenario: Scenario,
    job: BatchJob,
    steps: list[int],
    by_step: dict[int, list[int]],
    out: list[Violation],
) -> None:
    """When a batch job runs (`steps`, sorted): `no-interruption`, `arrival`, `duration`."""
    first, last = steps[0], steps[-1]
    if last - first + 1 != len(steps):
        gap = next(t for t in range(first, last + 1) if t not in by_step)
        out.append(
            Violation(
                "no-interruption",
                f"{job.id} runs from step {first}, stops at step {gap} and resumes later",
            )
        )
    if first < job.arrival:
        out.append(
            Violation("arrival", f"{job.id} starts at step {first}, arrives at step {job.arrival}")
        )
    expected = min(job.duration, scenario.steps - first)
    if len(steps) < expected:
        out.append(
            Violation(
                "duration",
                f"{job.id} runs {len(steps)} steps from step {first}, needs {expected}",
            )
        )
    elif len(steps) > expected:
        out.append(
            Violation(
                "duration",
                f"{job.id} runs {len(steps)} steps, longer than its duration {job.duration}",
            )
        )


def _check_size(job: BatchJob, t: int, n: int, report: Callable[[str, str], None]) -> None:
    """The GPU count `n` a batch job holds at step t: `power-of-two`, `block-size`."""
    if not is_power_of_two(n):
        report("power-of-two", f"{job.id} holds {n} GPUs at step {t}, not a power of two")
    elif n != job.gpus:
        report("block-size", f"{job.id} holds {n} GPUs at step {t}, asked for {job.gpus}")


def _check_hosts(
    job: BatchJob, t: int, gpus: list[int], per_host: int, report: Callable[[str, str], None]
) -> None:
    """Where a contiguous block lies against the hosts at step t: `host`."""
    n, g0 = len(gpus), gpus[0]
    if n <= per_host:
        if g0 // per_host != gpus[-1] // per_host:
            report(
                "host", f"{job.id} block GPUs {g0}-{gpus[-1]} crosses a host boundary at step {t}"
            )
    elif g0 % per_host or n % per_host:
        report("host", f"{job.id} block GPUs {g0}-{gpus[-1]} does not span whole hosts at step {t}")


def _check_block(
    job: BatchJob,
    t: int,
    gpus: list[int],
    reference: list[int],
    per_host: int,
    report: Callable[[str, str], None],
) -> None:
    """The GPUs (sorted) a batch job holds at step t: size, `contiguous`, `alignment`,
    host and `no-move` (the last three only for a contiguous block)."""
    n, g0 = len(gpus), gpus[0]
    _check_size(job, t, n, report)
    if gpus[-1] - g0 + 1 != n:
        report("contiguous", f"{job.id} holds non-contiguous GPUs {gpus} at step {t}")
        return
    if g0 % n:
        report("alignment", f"{job.id} block starts at GPU {g0} at step {t}, not a multiple of {n}")
    _check_hosts(job, t, gpus, per_host, report)
    if gpus != reference:
        report("no-move", f"{job.id} moves from GPUs {reference} to {gpus} at step {t}")


def _check_batch(
    scenario: Scenario, held: dict[str, dict[int, list[int]]], out: list[Violation]
) -> None:
    """Every batch job's run and blocks; a block constraint is reported once per job."""
    for job in scenario.batch:
        by_step = held.get(job.id)
        if not by_step:
            continue
        steps = sorted(by_step)
        _check_timing(scenario, job, steps, by_step, out)
        report = functools.partial(_once, out, set())
        reference = sorted(by_step[steps[0]])
        for t in steps:
            _check_block(job, t, sorted(by_step[t]), reference, scenario.gpus_per_host, report)


def _check_realtime(
    scenario: Scenario, held: dict[str, dict[int, list[int]]], out: list[Violation]
) -> None:
    for svc in scenario.realtime:
        by_step = held.get(svc.id, {})
        counts = [len(by_step.get(t, ())) for t in range(scenario.steps)]
        for t, (n, d) in enumerate(zip(counts, svc.demand, strict=True)):
            if n > d:
                out.append(
                    Violation(
                        "realtime-demand", f"{svc.id} holds {n} GPUs at step {t}, demand is {d}"
                    )
                )
        for t in range(1, scenario.steps):
            if abs(counts[t] - counts[t - 1]) > svc.max_switch:
                out.append(
                    Violation(
                        "max-switch",
                        f"{svc.id} goes from {counts[t - 1]} to {counts[t]} GPUs at step {t}, "
                        f"max_switch is {svc.max_switch}",
                    )
                )


def _check_metrics(
    scenario: Scenario, matrix: np.ndarray, reported: Any, out: list[Violation]
) -> None:
    if not isinstance(reported, dict):
        out.append(Violation("format", "metrics must be an object"))
        return
    actual = compute_metrics(scenario, matrix, 0.0)
    for key, want in actual.items():
        if key == "runtime_ms":
            if not isinstance(reported.get(key), int | float):
                out.append(Violation("metrics", "runtime_ms is missing"))
            continue
        got = reported.get(key)
        if isinstance(got, bool) or not isinstance(got, int | float):
            out.append(Violation("metrics", f"{key} is missing, the grid gives {want}"))
        elif not math.isclose(got, want, rel_tol=1e-6, abs_tol=2e-3):
            out.append(Violation("metrics", f"{key} is {got}, the grid gives {want}"))


def validate_plan(scenario: Scenario, doc: Any) -> list[Violation]:
    """Every violated constraint of a decoded PLAN.json against `scenario` (empty if legal)."""
    import numpy as np  # at the first check, not at start (scheduler/core/planner/plan.py)

    out: list[Violation] = []
    if not isinstance(doc, dict) or not isinstance(doc.get("grid"), list):
        return [Violation("format", "a plan is an object with a 'grid' list")]
    if doc.get("mode") not in MODES:
        out.append(
            Violation("format", f"mode must be one of {', '.join(MODES)}, got {doc.get('mode')!r}")
        )
    grid = doc["grid"]
    if len(grid) != scenario.steps or any(
        not isinstance(row, list) or len(row) != scenario.gpus for row in grid
    ):
        bad = next(
            (
                t
                for t, row in enumerate(grid)
                if not isinstance(row, list) or len(row) != scenario.gpus
            ),
            None,
        )
        detail = (
            f"row {bad} has {len(grid[bad]) if isinstance(grid[bad], list) else 'no'} cells"
            if bad is not None
            else f"{len(grid)} rows"
        )
        out.append(
            Violation(
                "grid-shape",
                f"expected {scenario.steps} rows of {scenario.gpus} cells, {detail}",
            )
        )
        return out
    index = {job_id: i for i, job_id in enumerate(scenario.job_ids())}
    matrix = np.full((scenario.steps, scenario.gpus), -1, dtype=np.int32)
    held: dict[str, dict[int, list[int]]] = defaultdict(lambda: defaultdict(list))
    unknown: dict[str, tuple[int, int]] = {}
    for t, row in enumerate(grid):
        for g, cell in enumerate(row):
            if cell is None:
                continue
            if not isinstance(cell, str):
                out.append(
                    Violation(
                        "one-job-per-gpu",
                        f"cell [{t}][{g}] holds {cell!r}, one job id or null expected",
                    )
                )
                continue
            if cell not in index:
                unknown.setdefault(cell, (t, g))
                continue
            matrix[t, g] = index[cell]
            held[cell][t].append(g)
    for job_id, (t, g) in unknown.items():
        out.append(
            Violation(
                "unknown-id",
                f"{job_id!r} at cell [{t}][{g}] is no job or service of {scenario.name}",
            )
        )
    _check_batch(scenario, held, out)
    _check_realtime(scenario, held, out)
    if "metrics" not in doc:
        out.append(Violation("format", "metrics are missing"))
    else:
        _check_metrics(scenario, matrix, doc["metrics"], out)
    return out
