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

Two insertion orders are built: priority x decay^arrival first, smaller jobs
(GPU-steps) first on ties, so a tie does not hand a wide block to a big job while a
small one could share the step with others; and value (priority x GPU-steps x
decay^arrival) first, which places the jobs worth most before the grid fragments.
A third plan is built by a time-forward sweep (at each step start the arrived jobs
that fit, highest priority first), which leaves no early holes behind late
high-priority jobs.

5. Each candidate is then improved by a local search with real-time fixed, so
   its objective can only rise (`_improve`): unscheduled jobs fill any spot they
   fit (cut by the window end if need be), then "eject" moves take one placed job
   out, let the unscheduled jobs use its cells and put it back where it fits,
   kept only when batch value rises.

The best objective of the candidates is kept (more busy GPU-steps on ties).
`ORDERS` has further insertion orders (priority with big jobs first on ties,
arrival, size); each extra order costs about one more construction and local
search. Every step keeps the grid legal, so the result needs no repair.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from scheduler.core.planner.model import BatchJob, Scenario
from scheduler.core.planner.packing import BitPacker
from scheduler.core.planner.plan import (
    Plan,
    Schedule,
    build_matrix,
    compute_metrics,
    lipschitz_below,
)

__all__ = ["ORDERS", "plan_fast", "schedule_fast"]

_SOFT_TRIES = 3
_BUDGET = 4000  # placement attempts per candidate in `_improve`
_PASSES = 1


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

    def reduced(
        self, t0: int, t1: int, deficit: list[int]
    ) -> tuple[dict[int, tuple[Any, ...]], int]:
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

    def commit(self, rows: dict[int, tuple[Any, ...]]) -> None:
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


def _by_priority(scenario: Scenario) -> Callable[[int], tuple[Any, ...]]:
    jobs, decay = scenario.batch, scenario.decay
    return lambda i: (
        -jobs[i].priority * decay ** jobs[i].arrival,
        -jobs[i].gpus,
        -jobs[i].duration,
        jobs[i].arrival,
        i,
    )


def _by_arrival(scenario: Scenario) -> Callable[[int], tuple[Any, ...]]:
    jobs = scenario.batch
    return lambda i: (jobs[i].arrival, -jobs[i].priority, -jobs[i].gpus, -jobs[i].duration, i)


def _by_priority_small(scenario: Scenario) -> Callable[[int], tuple[Any, ...]]:
    jobs, decay, steps = scenario.batch, scenario.decay, scenario.steps
    return lambda i: (
        -jobs[i].priority * decay ** jobs[i].arrival,
        jobs[i].gpus * min(jobs[i].duration, steps - jobs[i].arrival),
        jobs[i].arrival,
        i,
    )


def _by_value(scenario: Scenario) -> Callable[[int], tuple[Any, ...]]:
    jobs, decay, steps = scenario.batch, scenario.decay, scenario.steps
    return lambda i: (
        -jobs[i].priority
        * jobs[i].gpus
        * min(jobs[i].duration, steps - jobs[i].arrival)
        * decay ** jobs[i].arrival,
        jobs[i].arrival,
        i,
    )


def _by_size(scenario: Scenario) -> Callable[[int], tuple[Any, ...]]:
    jobs, decay = scenario.batch, scenario.decay
    return lambda i: (
        -jobs[i].gpus,
        -jobs[i].priority * decay ** jobs[i].arrival,
        -jobs[i].duration,
        i,
    )


ORDERS: dict[str, Callable[[Scenario], Callable[[int], tuple[Any, ...]]]] = {
    "priority": _by_priority,
    "arrival": _by_arrival,
    "priority_small": _by_priority_small,
    "value": _by_value,
    "size": _by_size,
}


def _insert(
    scenario: Scenario,
    job: BatchJob,
    packer: BitPacker,
    rt: _Realtime,
    decay_cum: list[float],
    free: list[int],
) -> tuple[int, int, dict[int, tuple[Any, ...]] | None, float] | None:
    """Best (start, first GPU, real-time change, net value) for one job, or None.

    `free[t]` = GPUs that batch work and real-time leave at step t. The earliest
    start where a block is free and real-time keeps its GPUs (found by `_earliest`)
    is the best of those (later starts are worth less). Before it, up to
    `_SOFT_TRIES` starts that would take GPUs from real-time are priced; a start is
    only priced when its value less `penalty` x the GPUs it lacks (a lower bound of
    what real-time loses) still beats the best so far.
    """
    steps, gpus, penalty = scenario.steps, scenario.gpus, scenario.penalty
    size, dur, arrival = job.gpus, job.duration, job.arrival
    weight = job.priority * size
    hard = _earliest(job, packer, free, steps)
    best: tuple[int, int, dict[int, tuple[Any, ...]] | None, float] | None = None
    best_net = 0.0
    end = steps
    if hard is not None:
        end = hard[0]
        best_net = weight * (decay_cum[min(steps, end + dur)] - decay_cum[end])
        best = (end, hard[1], None, best_net)
    if not rt.switch or end <= arrival:
        return best
    # every start lacks at least one GPU-step; none beats `best_net` if the most
    # valuable start (at arrival) cannot pay that
    if weight * (decay_cum[min(steps, arrival + dur)] - decay_cum[arrival]) - penalty <= best_net:
        return best
    used = packer.used
    lost_cum = [0]  # GPUs lacking over [arrival, t)
    acc = 0
    for f in free[arrival : min(steps, end - 1 + dur)]:
        if f < size:
            acc += size - f
        lost_cum.append(acc)
    tries = _SOFT_TRIES
    for t0 in range(arrival, end):
        if used[t0] + size > gpus:
            continue
        t1 = t0 + dur
        if t1 > steps:
            t1 = steps
        value = weight * (decay_cum[t1] - decay_cum[t0])
        if value <= best_net:
            break  # later starts are worth no more
        lost = lost_cum[t1 - arrival] - lost_cum[t0 - arrival]
        if lost == 0 or value - penalty * lost <= best_net:
            continue  # lost == 0 before `hard`: no free block
        blocks = packer.free_blocks(size, t0, t1)
        if not blocks:
            continue
        deficit = [size - f if f < size else 0 for f in free[t0:t1]]
        rows, cost = rt.reduced(t0, t1, deficit)
        net = value - penalty * cost
        if net > best_net:
            best, best_net = (t0, packer.best_fit(size, t0, t1, blocks), rows, net), net
        tries -= 1
        if not tries:
            break
    return best


def _decay_cum(scenario: Scenario) -> list[float]:
    """decay_cum[t] = sum of decay^u for u < t (a run [t0, t1) is worth the difference)."""
    out = [0.0]
    for t in range(scenario.steps):
        out.append(out[-1] + scenario.decay**t)
    return out


def _construct(
    scenario: Scenario, order: list[int], base: _Realtime, decay_cum: list[float]
) -> tuple[dict[int, tuple[int, int]], BitPacker, _Realtime]:
    """Insert the jobs in `order`, each at its best start (see `_insert`)."""
    steps = scenario.steps
    gpus = scenario.gpus
    rt = base.copy()
    packer = BitPacker(steps, gpus)
    free = [gpus - x for x in rt.total]
    starts: dict[int, tuple[int, int]] = {}
    for i in order:
        job = scenario.batch[i]
        found = _insert(scenario, job, packer, rt, decay_cum, free)
        if found is None:
            continue
        t0, g0, rows, _ = found
        t1 = min(steps, t0 + job.duration)
        packer.occupy(t0, t1, g0, job.gpus)
        if rows:
            rt.commit(rows)
            free = [gpus - x - u for x, u in zip(rt.total, packer.used, strict=True)]
        else:
            for t in range(t0, t1):
                free[t] -= job.gpus
        starts[i] = (t0, g0)
    rt.top_up(packer.used, scenario.gpus)
    return starts, packer, rt


def _sweep(
    scenario: Scenario, base: _Realtime
) -> tuple[dict[int, tuple[int, int]], BitPacker, _Realtime]:
    """Time-forward list scheduling: at each step, start the arrived jobs that fit now
    (real-time keeps its GPUs), highest priority first, bigger first on ties."""
    steps, gpus = scenario.steps, scenario.gpus
    rt = base.copy()
    packer = BitPacker(steps, gpus)
    jobs = scenario.batch
    waiting = sorted(
        range(len(jobs)), key=lambda i: (-jobs[i].priority, -jobs[i].gpus, jobs[i].arrival, i)
    )
    starts: dict[int, tuple[int, int]] = {}
    cap = [gpus - x for x in rt.total]  # GPUs batch work may still take at each step
    for t0 in range(steps):
        if not waiting:
            break
        if cap[t0] <= 0:
            continue
        left = []
        for pos, i in enumerate(waiting):
            job = jobs[i]
            size = job.gpus
            if job.arrival > t0 or size > cap[t0]:
                left.append(i)
                continue
            t1 = t0 + job.duration
            if t1 > steps:
                t1 = steps
            if min(cap[t0:t1]) < size:
                left.append(i)
                continue
            free = packer.free_blocks(size, t0, t1)
            if not free:
                left.append(i)
                continue
            g0 = packer.best_fit(size, t0, t1, free)
            packer.occupy(t0, t1, g0, size)
            for t in range(t0, t1):
                cap[t] -= size
            starts[i] = (t0, g0)
            if not cap[t0]:
                left.extend(waiting[pos + 1 :])
                break
        waiting = left
    rt.top_up(packer.used, gpus)
    return starts, packer, rt


def _objective(
    scenario: Scenario, starts: dict[int, tuple[int, int]], rt: _Realtime, decay_cum: list[float]
) -> float:
    steps, jobs = scenario.steps, scenario.batch
    value = 0.0
    for i, (t0, _) in starts.items():
        job = jobs[i]
        value += (
            job.priority * job.gpus * (decay_cum[min(steps, t0 + job.duration)] - decay_cum[t0])
        )
    return value - scenario.penalty * rt.unmet()


def _earliest(
    job: BatchJob, packer: BitPacker, free: list[int], steps: int, lo: int = 0, hi: int = 0
) -> tuple[int, int] | None:
    """The earliest (start, first GPU) where `job` fits: a free aligned block for its run
    (cut by the window end if need be) and `free[t]` GPUs left at each step of it (what
    batch work and real-time leave). The earliest start is the job's most valuable one.
    Only starts in [lo, hi) are tried (`hi` 0: up to the window end)."""
    size, dur = job.gpus, job.duration
    t0 = t = job.arrival if job.arrival > lo else lo
    if hi <= 0 or hi > steps:
        hi = steps
    masks = packer.masks
    while t0 < hi:
        end = t0 + dur
        if end > steps:
            end = steps
        while t < end and free[t] >= size:
            t += 1
        if t < end:  # no room at step t: no run that covers it
            t0 = t = t + 1
            continue
        busy = 0
        for m in masks[t0:end]:
            busy |= m
        blocks = packer.align(size) & ~packer.fold(busy, size)
        if blocks:
            if blocks & (blocks - 1):
                return t0, packer.best_fit(size, t0, end, blocks)
            return t0, blocks.bit_length() - 1
        t0 += 1
    return None


class _Grid:
    """The batch grid the local search edits, real-time fixed: the starts, the packer
    and the GPUs free at each step, changed together."""

    __slots__ = ("decay_cum", "free", "jobs", "packer", "starts", "steps")

    def __init__(
        self,
        scenario: Scenario,
        starts: dict[int, tuple[int, int]],
        packer: BitPacker,
        rt: _Realtime,
        decay_cum: list[float],
    ) -> None:
        self.steps, self.jobs = scenario.steps, scenario.batch
        self.starts, self.packer, self.decay_cum = starts, packer, decay_cum
        self.free = [scenario.gpus - x - u for x, u in zip(rt.total, packer.used, strict=True)]

    def worth(self, i: int, t0: int) -> float:
        """The batch value of job i started at step t0."""
        job = self.jobs[i]
        cum = self.decay_cum
        return job.priority * job.gpus * (cum[min(self.steps, t0 + job.duration)] - cum[t0])

    def put(self, i: int, t0: int, g0: int) -> None:
        """Put job i on the grid from step t0 on its block at GPU g0."""
        job = self.jobs[i]
        t1 = min(self.steps, t0 + job.duration)
        self.packer.occupy(t0, t1, g0, job.gpus)
        for t in range(t0, t1):
            self.free[t] -= job.gpus
        self.starts[i] = (t0, g0)

    def take(self, k: int) -> float:
        """Take job k out of the grid; its value."""
        k0, kg = self.starts.pop(k)
        job = self.jobs[k]
        k1 = min(self.steps, k0 + job.duration)
        self.packer.release(k0, k1, kg, job.gpus)
        for t in range(k0, k1):
            self.free[t] += job.gpus
        return self.worth(k, k0)

    def place(self, order: list[int], lo: int = 0, hi: int = 0) -> float:
        """Place the jobs of `order` at their earliest spots (their starts in [lo, hi) if
        `hi`); the value they add.

        Placing only takes space, so once a job finds no spot, neither does a later
        one that is no smaller, no shorter and arrives no earlier (its run would hold
        the first one's, and with `hi` overlap [lo, hi) if the first one's did not,
        which cannot fit either: the caller only frees space in [lo, hi))."""
        jobs, packer, free, steps = self.jobs, self.packer, self.free, self.steps
        gain = 0.0
        failed: list[tuple[int, int, int]] = []
        for i in order:
            job = jobs[i]
            size, dur, arrival = job.gpus, job.duration, job.arrival
            if any(size >= g and dur >= d and arrival >= a for g, d, a in failed):
                continue
            spot = _earliest(job, packer, free, steps, lo - dur + 1, hi)
            if spot is None:
                failed.append((size, dur, arrival))
            else:  # as `put`, inlined: this is the search's inner loop
                t0, g0 = spot
                t1 = min(steps, t0 + dur)
                packer.occupy(t0, t1, g0, size)
                for t in range(t0, t1):
                    free[t] -= size
                self.starts[i] = spot
                gain += self.worth(i, t0)
        return gain

    def eject(self, j: int, near: list[int]) -> bool:
        """The eject move: the waiting jobs `near` take placed job j's cells first, then
        j goes where it fits. Kept (True) only when batch value rises, else undone: the
        jobs placed by the move leave and j returns to its spot."""
        t0, g0 = self.starts[j]
        t1 = min(self.steps, t0 + self.jobs[j].duration)
        gain = -self.take(j)
        gain += self.place(near, t0, t1)
        placed = [i for i in near if i in self.starts]
        gain += self.place([j])
        if gain > 1e-9:
            return True
        if j in self.starts:
            placed.append(j)
        for i in placed:
            self.take(i)
        self.put(j, t0, g0)
        return False


def _eject_pass(
    grid: _Grid, waiting: list[int], rank: list[int], work: int, budget: int
) -> tuple[bool, list[int], int]:
    """One pass of eject moves over the placed jobs in start order, while `work`
    (placement attempts) stays under `budget`: (whether a move was kept, the jobs still
    waiting in rank order, the work done)."""
    starts, jobs, free = grid.starts, grid.jobs, grid.free
    improved = False
    for j in sorted(starts, key=starts.__getitem__):
        if work >= budget:
            break
        if j not in starts:
            continue
        t0 = starts[j][0]
        t1 = min(grid.steps, t0 + jobs[j].duration)
        # after the fill a waiting job can only fit where it overlaps j's cells
        room = jobs[j].gpus + max(free[t0:t1])
        near = [i for i in waiting if jobs[i].arrival < t1 and jobs[i].gpus <= room]
        if not near:
            continue
        work += len(near) + 1
        if grid.eject(j, near):
            waiting = [i for i in waiting if i not in starts]
            if j not in starts:
                waiting = sorted([*waiting, j], key=rank.__getitem__)
            improved = True
    return improved, waiting, work


def _improve(
    scenario: Scenario,
    starts: dict[int, tuple[int, int]],
    packer: BitPacker,
    rt: _Realtime,
    rank: list[int],
    decay_cum: list[float],
    budget: int,
) -> None:
    """Local search on batch value with real-time fixed (so the objective can only rise).

    1. Fill: every unscheduled job that fits somewhere (free aligned block, GPUs
       real-time leaves, cut at the window end if need be) takes its earliest spot.
    2. Eject (`_Grid.eject`): take one placed job out, let the unscheduled jobs (then
       the ejected one) take their earliest spots (the ejected one may land earlier: a
       left shift); keep the change only if batch value rises. One pass over the placed
       jobs (`_PASSES`), at most `budget` placement attempts.
    """
    grid = _Grid(scenario, starts, packer, rt, decay_cum)
    waiting = sorted((i for i in range(len(grid.jobs)) if i not in starts), key=rank.__getitem__)
    grid.place(waiting)
    waiting = [i for i in waiting if i not in starts]
    work = len(waiting)
    improved = True
    passes = 0
    while improved and waiting and work < budget and passes < _PASSES:
        passes += 1
        improved, waiting, work = _eject_pass(grid, waiting, rank, work, budget)


def schedule_fast(
    scenario: Scenario,
    orders: tuple[str, ...] = ("priority_small", "value"),
    *,
    sweep: bool = True,
    improve: bool = True,
) -> Schedule:
    """The fast heuristic's decisions: the best objective (then the most busy GPU-steps)
    over the insertion orders `orders` and (with `sweep`) the time-forward sweep, each
    first improved by `_improve` (which never lowers a candidate's objective)."""
    base = _Realtime(scenario)
    decay_cum = _decay_cum(scenario)
    n = len(scenario.batch)
    rank = [0] * n
    for pos, i in enumerate(sorted(range(n), key=_by_priority(scenario))):
        rank[i] = pos
    candidates = []
    seen: set[tuple[int, ...]] = set()
    for name in orders:
        order = tuple(sorted(range(n), key=ORDERS[name](scenario)))
        if order in seen:
            continue
        seen.add(order)
        candidates.append(_construct(scenario, list(order), base, decay_cum))
    if sweep:
        candidates.append(_sweep(scenario, base))
    best: tuple[float, int, dict[int, tuple[int, int]], _Realtime] | None = None
    for starts, packer, rt in candidates:
        if improve:
            _improve(scenario, starts, packer, rt, rank, decay_cum, _BUDGET)
            rt.top_up(packer.used, scenario.gpus)
        objective = _objective(scenario, starts, rt, decay_cum)
        busy = sum(packer.used) + sum(rt.total)
        if (
            best is None
            or objective > best[0] + 1e-9
            or (objective > best[0] - 1e-9 and busy > best[1])
        ):
            best = (objective, busy, starts, rt)
    assert best is not None
    _, _, starts, rt = best
    schedule = Schedule()
    for i, start in starts.items():
        schedule.starts[scenario.batch[i].id] = start
    for s, svc in enumerate(scenario.realtime):
        schedule.realtime[svc.id] = rt.held[s]
    return schedule


def plan_fast(scenario: Scenario) -> Plan:
    """The fast-mode plan with its metrics."""
    began = time.perf_counter()
    matrix = build_matrix(scenario, schedule_fast(scenario))
    runtime_ms = (time.perf_counter() - began) * 1000
    return Plan("fast", matrix, compute_metrics(scenario, matrix, runtime_ms))
