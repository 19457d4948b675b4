"""The ideal schedule behind ``occupancy_bound`` (pure Python).

A scheduler with no placement limits, no preemption losses and no restart overheads,
replaying the same trace on the same healthy capacity. Precisely, it is a fluid,
work-conserving processor-sharing schedule:

- a job is *outstanding* from its submit time until its ``duration_s`` of work at full
  speed is done; ``D(t)`` is the sum of the GPUs of the outstanding jobs and ``C(t)``
  the healthy GPUs of the cluster at ``t``;
- every outstanding job runs at the same fraction ``f(t) = min(1, C(t) / D(t))`` of its
  full speed (it holds ``f x gpus`` GPUs, GPUs being divisible), so no job ever gets
  more GPUs than it asked for and no GPU idles while some job is unfinished;
- busy GPUs are then ``min(C(t), D(t))``.

``occupancy_bound`` over a window is the integral of those busy GPUs over the window
divided by the healthy GPU-time of the window. It is a reference, not a theorem: a real
schedule can beat it over a window (it may finish short jobs first and keep more work
outstanding, or re-run lost work, which counts as busy), but a scheduler that reaches it
loses nothing to packing, fragmentation or preemption.

Cost: O(n log n) for n jobs (one heap of finish points on a shared virtual clock).
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

__all__ = ["IdealSchedule", "ideal_schedule"]


@dataclass(frozen=True, slots=True)
class IdealSchedule:
    """Busy GPUs over time (``(t, busy GPUs from t on)``, sorted) and when the last job ends."""

    busy: list[tuple[float, float]]
    end_s: float


def ideal_schedule(
    jobs: Iterable[tuple[float, int, float]], capacity: Sequence[tuple[float, float]]
) -> IdealSchedule:
    """The fluid processor-sharing schedule of ``(submit_s, gpus, duration_s)`` jobs.

    ``capacity`` is ``[(t, healthy GPUs from t on)]`` sorted by time (0 before its first
    step). Jobs with no GPUs or no work are left out.
    """
    arrivals = sorted((s, g, d) for s, g, d in jobs if g > 0 and d > 0)
    if not arrivals:
        return IdealSchedule([], capacity[0][0] if capacity else 0.0)
    inf = math.inf
    t = arrivals[0][0]
    cap_i = 0
    cap = 0.0
    while cap_i < len(capacity) and capacity[cap_i][0] <= t:
        cap = float(capacity[cap_i][1])
        cap_i += 1
    virtual = 0.0  # full-speed seconds every outstanding job has progressed since t0
    finishes: list[tuple[float, int]] = []  # (virtual time the job completes at, gpus)
    demand = 0
    busy: list[tuple[float, float]] = []
    i, n = 0, len(arrivals)
    while True:
        while finishes and finishes[0][0] <= virtual:
            demand -= heapq.heappop(finishes)[1]
        while i < n and arrivals[i][0] <= t:
            _, gpus, duration = arrivals[i]
            heapq.heappush(finishes, (virtual + duration, gpus))
            demand += gpus
            i += 1
        level = min(cap, float(demand))
        if not busy or busy[-1][1] != level:
            busy.append((t, level))
        if not finishes and i >= n:
            return IdealSchedule(busy, t)
        rate = min(1.0, cap / demand) if demand else 0.0
        t_arrival = arrivals[i][0] if i < n else inf
        t_capacity = capacity[cap_i][0] if cap_i < len(capacity) else inf
        t_finish = t + (finishes[0][0] - virtual) / rate if finishes and rate > 0 else inf
        if t_finish <= min(t_arrival, t_capacity):
            t, virtual = t_finish, finishes[0][0]  # exact: no rounding can miss a finish
            continue
        t_next = min(t_arrival, t_capacity)
        if t_next == inf:  # no capacity ever again: the rest never finishes
            return IdealSchedule(busy, inf)
        virtual += rate * (t_next - t)
        t = t_next
        while cap_i < len(capacity) and capacity[cap_i][0] <= t:
            cap = float(capacity[cap_i][1])
            cap_i += 1
