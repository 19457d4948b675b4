"""Fast mode: a constraint-respecting heuristic over the whole window.

1. Real-time services first get the most they can serve: the largest count
   sequence under their demand (and the cluster) that respects `max_switch`.
2. Batch jobs are inserted one by one into the window. Each takes the start step
   and aligned block worth the most objective: the earliest start where a block
   is free and real-time keeps its GPUs, or an earlier start that takes GPUs from
   real-time when the job's decayed value beats `penalty` x the real-time
   GPU-steps lost (computed exactly, `max_switch` ripples included).
3. Within a step the block is chosen buddy-style (`BitPacker.best_fit`), so free
   space stays in aligned shapes the remaining jobs can use.
4. Real-time services are topped up into whatever batch work left free.

Insertion order: priority x decay^arrival first (bigger, longer jobs first on
ties). A second plan is built by a time-forward sweep (at each step start the
arrived jobs that fit, highest priority first), which leaves no early holes
behind late high-priority jobs; the better objective of the two is kept.
(`ORDERS` also has an arrival-order insertion; it never won on the shipped or
generated scenarios, so it is off by default to save a third of the time.) Every step
keeps the grid legal, so the result needs no repair.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from scheduler.planner.model import BatchJob, Scenario
from scheduler.planner.packing import BitPacker
from scheduler.planner.plan import Plan, Schedule, build_matrix, compute_metrics, lipschitz_below

__all__ = ["ORDERS", "plan_fast", "schedule_fast"]

_SOFT_TRIES = 3


class _Realtime:
    """Per-service caps `upper` and counts `held` = lipschitz_below(upper)."""

    def __init__(self, scenario: Scenario) -> None:
        steps = scenario.steps
        self.switch = [s.max_switch for s in scenario.realtime]
        self.demand = [list(s.demand) for s in scenario.realtime]
        self.upper: list[list[int]] = []
        self.held: list[list[int]] = []
        remaining = [scenario.gpus] * steps
        for s, demand in enumerate(self.demand):
            upper = [min(d, r) for d, r in zip(demand, remaining, strict=True)]
            held = lipschitz_below(upper, self.switch[s])
            self.upper.append(upper)
            self.held.append(held)
            remaining = [r - h for r, h in zip(remaining, held, strict=True)]
        self.total = [scenario.gpus - r for r in remaining]

    def copy(self) -> _Realtime:
        other = object.__new__(_Realtime)
        other.switch, other.demand = self.switch, self.demand
        other.upper = [list(u) for u in self.upper]
        other.held = [list(h) for h in self.held]
        other.total = list(self.total)
        return other

    def reduced(self, t0: int, t1: int, deficit: list[int]) -> tuple[dict[int, tuple], int]:
        """New (upper, held) rows of the services that free `deficit[t - t0]` GPUs at
        each step of [t0, t1), and the real-time GPU-steps that costs in all."""
        rows: dict[int, tuple[list[int], list[int]]] = {}
        n = len(self.switch)
        for t in range(t0, t1):
            need = deficit[t - t0]
            if need <= 0:
                continue
            for s in sorted(range(n), key=lambda s: (-self.switch[s], -self.held[s][t])):
                held_now = self.held[s][t]
                take = min(need, held_now)
                if take:
                    upper = rows[s][0] if s in rows else list(self.upper[s])
                    upper[t] = min(upper[t], held_now - take)
                    rows[s] = (upper, self.held[s])
                    need -= take
                if need == 0:
                    break
        cost = 0
        for s, (upper, old) in list(rows.items()):
            new = lipschitz_below(upper, self.switch[s])
            cost += sum(old) - sum(new)
            rows[s] = (upper, new)
        return rows, cost

    def commit(self, rows: dict[int, tuple]) -> None:
        for s, (upper, held) in rows.items():
            old = self.held[s]
            self.total = [x - o + h for x, o, h in zip(self.total, old, held, strict=True)]
            self.upper[s], self.held[s] = upper, held

    def top_up(self, batch_used: list[int], gpus: int) -> None:
        """Give each service whatever GPUs batch work and the other services left."""
        for s, demand in enumerate(self.demand):
            held = self.held[s]
            upper = [
                min(d, gpus - b - (tot - h))
                for d, b, tot, h in zip(demand, batch_used, self.total, held, strict=True)
            ]
            new = lipschitz_below(upper, self.switch[s])
            self.total = [x - h + n for x, h, n in zip(self.total, held, new, strict=True)]
            self.upper[s], self.held[s] = upper, new

    def unmet(self) -> int:
        return sum(sum(d) - sum(h) for d, h in zip(self.demand, self.held, strict=True))


def _by_priority(scenario: Scenario) -> Callable[[int], tuple]:
    jobs, decay = scenario.batch, scenario.decay
    return lambda i: (
        -jobs[i].priority * decay ** jobs[i].arrival,
        -jobs[i].gpus,
        -jobs[i].duration,
        jobs[i].arrival,
        i,
    )


def _by_arrival(scenario: Scenario) -> Callable[[int], tuple]:
    jobs = scenario.batch
    return lambda i: (jobs[i].arrival, -jobs[i].priority, -jobs[i].gpus, -jobs[i].duration, i)


ORDERS: dict[str, Callable[[Scenario], Callable[[int], tuple]]] = {
    "priority": _by_priority,
    "arrival": _by_arrival,
}


def _insert(
    scenario: Scenario, job: BatchJob, packer: BitPacker, rt: _Realtime, decay_cum: list[float]
) -> tuple[int, int, dict[int, tuple] | None, float] | None:
    """Best (start, first GPU, real-time change, net value) for one job, or None.

    Scans start steps from the arrival; the first start where a block is free and
    real-time keeps its GPUs ends the scan (later starts are worth less). Before
    it, up to `_SOFT_TRIES` starts that would take GPUs from real-time are priced.
    """
    steps, gpus, penalty = scenario.steps, scenario.gpus, scenario.penalty
    size, dur = job.gpus, job.duration
    weight = job.priority * size
    used = packer.used
    lost_cum = [0]
    for a, b in zip(rt.total, used, strict=True):
        short = size - gpus + a + b
        lost_cum.append(lost_cum[-1] + (short if short > 0 else 0))
    best: tuple[int, int, dict[int, tuple] | None, float] | None = None
    best_net = 0.0
    tries = _SOFT_TRIES if rt.switch else 0
    for t0 in range(job.arrival, steps):
        if used[t0] + size > gpus:
            continue
        t1 = min(steps, t0 + dur)
        value = weight * (decay_cum[t1] - decay_cum[t0])
        if value <= best_net:
            break
        lost = lost_cum[t1] - lost_cum[t0]
        if lost == 0:
            free = packer.free_blocks(size, t0, t1)
            if free:
                return t0, packer.best_fit(size, t0, t1, free), None, value
            continue
        if not tries or value - penalty * lost <= best_net:
            continue
        free = packer.free_blocks(size, t0, t1)
        if not free:
            continue
        tries -= 1
        deficit = [lost_cum[t + 1] - lost_cum[t] for t in range(t0, t1)]
        rows, cost = rt.reduced(t0, t1, deficit)
        net = value - penalty * cost
        if net > best_net:
            best, best_net = (t0, packer.best_fit(size, t0, t1, free), rows, net), net
    return best


def _construct(scenario: Scenario, order: list[int], base: _Realtime) -> tuple[Schedule, float]:
    steps = scenario.steps
    rt = base.copy()
    packer = BitPacker(steps, scenario.gpus)
    decay_cum = [0.0]
    for t in range(steps):
        decay_cum.append(decay_cum[-1] + scenario.decay**t)
    schedule = Schedule()
    batch_value = 0.0
    for i in order:
        job = scenario.batch[i]
        found = _insert(scenario, job, packer, rt, decay_cum)
        if found is None:
            continue
        t0, g0, rows, _ = found
        t1 = min(steps, t0 + job.duration)
        packer.occupy(t0, t1, g0, job.gpus)
        if rows:
            rt.commit(rows)
        schedule.starts[job.id] = (t0, g0)
        batch_value += job.priority * job.gpus * (decay_cum[t1] - decay_cum[t0])
    rt.top_up(packer.used, scenario.gpus)
    for s, svc in enumerate(scenario.realtime):
        schedule.realtime[svc.id] = rt.held[s]
    return schedule, batch_value - scenario.penalty * rt.unmet()


def _sweep(scenario: Scenario, base: _Realtime) -> tuple[Schedule, float]:
    """Time-forward list scheduling: at each step, start the arrived jobs that fit now
    (real-time keeps its GPUs), highest priority first, bigger first on ties."""
    steps, gpus = scenario.steps, scenario.gpus
    rt = base.copy()
    packer = BitPacker(steps, gpus)
    jobs = scenario.batch
    waiting = sorted(
        range(len(jobs)), key=lambda i: (-jobs[i].priority, -jobs[i].gpus, jobs[i].arrival, i)
    )
    decay = [scenario.decay**t for t in range(steps)]
    schedule = Schedule()
    batch_value = 0.0
    used, total = packer.used, rt.total
    for t0 in range(steps):
        if not waiting:
            break
        cap = [gpus - a - b for a, b in zip(total, used, strict=True)]
        if cap[t0] <= 0:
            continue
        left = []
        for i in waiting:
            job = jobs[i]
            t1 = min(steps, t0 + job.duration)
            if job.arrival > t0 or min(cap[t0:t1]) < job.gpus:
                left.append(i)
                continue
            free = packer.free_blocks(job.gpus, t0, t1)
            if not free:
                left.append(i)
                continue
            g0 = packer.best_fit(job.gpus, t0, t1, free)
            packer.occupy(t0, t1, g0, job.gpus)
            for t in range(t0, t1):
                cap[t] -= job.gpus
            schedule.starts[job.id] = (t0, g0)
            batch_value += job.priority * job.gpus * sum(decay[t0:t1])
        waiting = left
    rt.top_up(packer.used, gpus)
    for s, svc in enumerate(scenario.realtime):
        schedule.realtime[svc.id] = rt.held[s]
    return schedule, batch_value - scenario.penalty * rt.unmet()


def schedule_fast(
    scenario: Scenario, orders: tuple[str, ...] = ("priority",), *, sweep: bool = True
) -> Schedule:
    """The fast heuristic's decisions: the best objective over the insertion orders
    `orders` and (with `sweep`) the time-forward sweep."""
    base = _Realtime(scenario)
    best: tuple[float, Schedule] | None = None
    seen: set[tuple[int, ...]] = set()
    for name in orders:
        order = tuple(sorted(range(len(scenario.batch)), key=ORDERS[name](scenario)))
        if order in seen:
            continue
        seen.add(order)
        schedule, objective = _construct(scenario, list(order), base)
        if best is None or objective > best[0] + 1e-9:
            best = (objective, schedule)
    if sweep:
        schedule, objective = _sweep(scenario, base)
        if best is None or objective > best[0] + 1e-9:
            best = (objective, schedule)
    assert best is not None
    return best[1]


def plan_fast(scenario: Scenario) -> Plan:
    """The fast-mode plan with its metrics."""
    began = time.perf_counter()
    matrix = build_matrix(scenario, schedule_fast(scenario))
    runtime_ms = (time.perf_counter() - began) * 1000
    return Plan("fast", matrix, compute_metrics(scenario, matrix, runtime_ms))
