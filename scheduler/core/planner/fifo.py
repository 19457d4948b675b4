"""The FIFO baseline of SPEC section 2.

Each real-time service reserves its peak demand for the whole window (GPUs at the
top of the cluster, one service after the other); batch jobs are placed in
arrival order, each at the earliest step where the lowest aligned block of the
remaining GPUs is free for its whole run. Reserved GPUs that a service does not
use at a step stay idle: that is the cost the report measures.
"""

from __future__ import annotations

import time

from scheduler.core.planner.model import Scenario
from scheduler.core.planner.packing import BitPacker
from scheduler.core.planner.plan import (
    Plan,
    Schedule,
    build_matrix,
    compute_metrics,
    lipschitz_below,
)

__all__ = ["plan_fifo", "schedule_fifo"]


def schedule_fifo(scenario: Scenario) -> Schedule:
    """Reserve peaks, then first-fit batch jobs in arrival order."""
    schedule = Schedule()
    top = scenario.gpus
    for svc in scenario.realtime:
        reserved = min(svc.peak, top)
        schedule.realtime_ranges[svc.id] = (top - reserved, top)
        schedule.realtime[svc.id] = lipschitz_below(
            [min(d, reserved) for d in svc.demand], svc.max_switch
        )
        top -= reserved
    steps = scenario.steps
    packer = BitPacker(steps, scenario.gpus, usable=top)
    order = sorted(range(len(scenario.batch)), key=lambda i: (scenario.batch[i].arrival, i))
    for i in order:
        job = scenario.batch[i]
        if job.gpus > top:
            continue
        for t0 in range(job.arrival, steps):
            t1 = min(steps, t0 + job.duration)
            free = packer.free_blocks(job.gpus, t0, t1)
            if free:
                g0 = (free & -free).bit_length() - 1
                packer.occupy(t0, t1, g0, job.gpus)
                schedule.starts[job.id] = (t0, g0)
                break
    return schedule


def plan_fifo(scenario: Scenario) -> Plan:
    """The FIFO baseline plan with its metrics."""
    began = time.perf_counter()
    matrix = build_matrix(scenario, schedule_fifo(scenario))
    runtime_ms = (time.perf_counter() - began) * 1000
    return Plan("fifo", matrix, compute_metrics(scenario, matrix, runtime_ms))
