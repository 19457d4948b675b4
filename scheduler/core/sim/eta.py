"""Estimated start times of pending jobs: a runtime forecast from history and a forward
simulation of the current state through the same engine `plan()` (pure Python).

- `RuntimeForecast`: quantiles of past runtimes keyed by (project, user, kind, gpus),
  falling back to (project, kind), (kind, gpus), (kind,) and all jobs when a key has
  fewer than `min_samples` runtimes. A running job's remaining time is the quantile of
  the runtimes *longer than what it has already run* (conditional on its elapsed
  time); when history has too few such runtimes, the remaining time follows the
  scale-free rule of heavy-tailed runtimes (P(R > x | R > e) = e / x): the q-quantile
  of what remains is e * q / (1 - q), i.e. the median job runs as long again.
- `forward_starts`: plays the snapshot forward with the engine: running jobs end when
  their forecast says, protections expire, stopped resumable work is requeued, the
  usage of allocated runs grows; cycles run at every event and, under fair share,
  periodically while the engine could act. Returns each job's first start. Jobs that
  arrive later are unknown to it (the main source of error on a busy cluster).
- `estimate`: three forward runs with the low, middle and high runtime quantiles (the
  low one without the expected arrivals): the middle one is the ETA, the earliest and
  latest of the three are its range. In the middle run the jobs do not all end at their
  median: each gets its own quantile (`spread_quantiles`), stratified over the jobs
  and spread around the median by `SPREAD`. With every job at its median, none of many
  running jobs ends before its median, while really the first of them ends long before
  (the runtimes are heavy-tailed): the GPUs came free too late and the waits of jobs
  that wait for running work came out too long (Philly, allocated jobs: median
  relative error 0.18 -> 0.12). Fully independent quantiles (`SPREAD` 1) free them too
  early: jobs that run together are alike (a sweep), so their quantiles are drawn
  nearer the median.
  Also the baseline: Slurm backfill style, the jobs in the engine's queue order each
  booked at the earliest time its shape fits, given the running jobs' expected
  (median) ends and the bookings ahead of it; no preemption, no fair-share drift.

No Django, no clock: `now` is a parameter; times are seconds on the caller's clock.
"""

from __future__ import annotations

import heapq
import math
import zlib
from bisect import bisect_left, bisect_right
from collections import defaultdict
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from statistics import NormalDist

from scheduler.core.engine import EngineState, plan
from scheduler.core.engine.runs import protected_until
from scheduler.core.engine.types import Placement, Policy, RunningWorkload, Snapshot, Workload

__all__ = [
    "QUANTILES",
    "Estimate",
    "RuntimeForecast",
    "baseline_starts",
    "busiest_arrivals",
    "estimate",
    "forward_starts",
    "repeat_arrivals",
    "spread_quantiles",
]

# low, middle, high runtime quantile of the three forward runs: the range is meant as
# an 80% interval (a 50% one, 25th-75th, held the real start under half the time on
# every trace and seed tried, nearly all misses late)
QUANTILES = (0.1, 0.5, 0.9)
MIN_SAMPLES = 20  # a key needs this many runtimes before its quantiles are used
DEFAULT_RUNTIME_S = 3600.0  # a cluster without any history
HORIZON_S = 30 * 86400.0  # how far ahead a forward run looks at most
MAX_CYCLES = 20_000  # engine cycles per forward run at most
REL_STEP = 0.02  # cycles at least this share of the look-ahead apart (see forward_starts)
MAX_PERIOD_S = 3600.0  # the longest gap between periodic cycles that change nothing
# How far the middle run's per-job runtime quantiles spread around the median, as a
# share of the forecast's own spread on the normal scale (0: every job at its median, as
# before; 1: independent draws). Chosen on Philly (seed 0, days 10-16 and 20-26), where
# 0.3-0.6 did about equally well and 0 and 1 worse; checked on other seeds, windows and
# the generated month (README).
SPREAD = 0.5
NOTICED_MOVE_S = 300.0  # a shown start that moves by less is not a move to explain
# The range is widened until this share of the recent real starts would have fallen in
# it (`range_widening`), once at least `CALIBRATION_MIN` of them are known.
RANGE_COVERAGE = 0.9
CALIBRATION_MIN = 10
CALIBRATION_KEEP = 300  # the most recent starts that calibrate the range
_NORMAL = NormalDist()

Key = tuple[object, ...]
Remaining = Callable[[Workload, float], float]


def _keys(project: str, user: str, kind: str, gpus: int) -> tuple[Key, ...]:
    """The forecast keys of a job, finest first."""
    return ((0, project, user, kind, gpus), (1, project, kind), (2, kind, gpus), (3, kind), (4,))


class RuntimeForecast:
    """Runtime quantiles from past runtimes (see the module docstring)."""

    __slots__ = ("min_samples", "runtimes")

    def __init__(
        self,
        history: Iterable[tuple[str, str, str, int, float]] = (),
        min_samples: int = MIN_SAMPLES,
    ) -> None:
        """`history`: (project, user, kind, gpus, runtime seconds) of finished jobs."""
        self.min_samples = max(1, int(min_samples))
        lists: dict[Key, list[float]] = defaultdict(list)
        for project, user, kind, gpus, runtime in history:
            if runtime >= 0 and math.isfinite(runtime):
                for key in _keys(project, user, kind, gpus):
                    lists[key].append(float(runtime))
        self.runtimes: dict[Key, list[float]] = {k: sorted(v) for k, v in lists.items()}

    def __len__(self) -> int:
        return len(self.runtimes.get((4,), ()))

    def remaining(
        self, project: str, user: str, kind: str, gpus: int, elapsed: float, q: float
    ) -> float:
        """The q-quantile of the time still to run for a job that has run `elapsed`
        seconds (0 for a job not started): from the finest key with at least
        `min_samples` runtimes longer than `elapsed`, else the scale-free rule."""
        elapsed = max(0.0, float(elapsed))
        q = min(max(q, 0.0), 1.0)
        for key in _keys(project, user, kind, gpus):
            runs = self.runtimes.get(key)
            if not runs:
                continue
            i = bisect_right(runs, elapsed)
            above = len(runs) - i
            if above < self.min_samples:
                continue
            pos = q * (above - 1)
            lo = math.floor(pos)
            hi = min(lo + 1, above - 1)
            value = runs[i + lo] + (runs[i + hi] - runs[i + lo]) * (pos - lo)
            return max(0.0, value - elapsed)
        scale_free = elapsed * q / (1.0 - q) if q < 1.0 else math.inf
        runs = self.runtimes.get((4,))
        if not runs:  # no history at all: a default runtime, or the rule if longer
            return max(DEFAULT_RUNTIME_S - elapsed, scale_free)
        if elapsed <= 0:  # a few runtimes in all: their quantile beats a constant
            return runs[min(len(runs) - 1, int(q * len(runs)))]
        return scale_free


@dataclass(frozen=True, slots=True)
class Estimate:
    """A pending job's estimated start: `start` (middle runtimes), the range
    `earliest`..`latest` (low and high runtimes), the baseline's start; None where the
    run's horizon passed first."""

    start: float | None
    earliest: float | None
    latest: float | None
    baseline_start: float | None
    method: str = "forward-simulation"


def _radical_inverse(k: int) -> float:
    """The k-th point (k >= 1) of the base-2 van der Corput sequence: 1/2, 1/4, 3/4, 1/8,
    5/8, ...; any run of consecutive points covers (0, 1) evenly."""
    x, f = 0.0, 0.5
    while k:
        if k & 1:
            x += f
        k >>= 1
        f /= 2
    return x


def spread_quantiles(center: float, spread: float, first: int, count: int) -> list[float]:
    """The runtime quantiles of the `first`-th .. (`first` + `count` - 1)-th job of a
    middle run: stratified points of (0, 1) (van der Corput) pulled towards `center` on
    the normal scale, q = Phi(Phi^-1(center) + spread * Phi^-1(u)). The first is
    `center` itself; any `count` consecutive ones spread like the forecast's quantiles
    would (`spread` 1) or less (`spread` < 1); `spread` 0 gives `center` for every job."""
    center = min(max(center, 1e-9), 1.0 - 1e-9)
    if spread <= 0:
        return [center] * count
    z0 = _NORMAL.inv_cdf(center)
    out = []
    for k in range(first, first + count):
        z = _NORMAL.inv_cdf(_radical_inverse(k))
        out.append(_NORMAL.cdf(z0 + spread * z) if z else center)  # exact at the center
    return out


def _spread_remaining(
    forecast: RuntimeForecast,
    who: Mapping[str, str],
    running: Iterable[RunningWorkload],
    center: float,
    spread: float,
) -> Remaining:
    """The middle run's `Remaining`: each job its own quantile (`spread_quantiles`), the
    running jobs first (in an order fixed by a hash of their ids, so no attribute of
    theirs lines up with the sequence), then the others as the run first asks for them
    (the order they start in). A job keeps its quantile for the whole run."""
    order = sorted((rw.workload.id for rw in running), key=lambda i: (_unit_hash(i), i))
    quantile = dict(zip(order, spread_quantiles(center, spread, 1, len(order)), strict=True))

    def remaining(w: Workload, elapsed: float) -> float:
        q = quantile.get(w.id)
        if q is None:
            q = quantile[w.id] = spread_quantiles(center, spread, len(quantile) + 1, 1)[0]
        return forecast.remaining(w.project, who.get(w.id, ""), w.kind, w.gpus, elapsed, q)

    return remaining


def _order_key(w: Workload) -> tuple[int, float, str]:
    return (-w.priority, w.submit_s, w.id)


class _Forward:
    """The state of one forward run (see `forward_starts`)."""

    def __init__(
        self, snapshot: Snapshot, policy: Policy, now: float, remaining: Remaining
    ) -> None:
        self.snapshot = snapshot
        self.policy = replace(policy, explain_queue=False)
        self.remaining = remaining
        self.cap = policy.max_min_runtime_s
        self.hosts = tuple(snapshot.hosts)
        self.healthy = {h.name: h.gpus for h in self.hosts if h.healthy}
        self.max_host = max(self.healthy.values(), default=0)
        self.free = dict(self.healthy)
        self.pending: dict[str, list[Workload]] = {
            p: list(v) for p, v in snapshot.pending.items() if v
        }
        self.pkeys = {p: [_order_key(w) for w in v] for p, v in self.pending.items()}
        self.by_id = {w.id: w for v in self.pending.values() for w in v}
        self.need: dict[str, float] = {}  # requeued work: what a stopped run had left
        self.running: dict[str, RunningWorkload] = {}
        self.ends: dict[str, float] = {}
        self.rate: dict[str, float] = defaultdict(float)
        self.usage: dict[str, float] = defaultdict(float, snapshot.usage)
        self.heap: list[tuple[float, int, int, str]] = []  # (time, kind, token, id)
        self.token: dict[str, int] = {}
        self.seq = 0
        for rw in snapshot.running:
            elapsed = max(0.0, now - rw.started_s)
            self.add_running(rw, now + max(0.0, remaining(rw.workload, elapsed)), now)

    def occupy(self, rw: RunningWorkload, sign: int) -> None:
        for pl in rw.placements:
            if pl.host in self.free:
                self.free[pl.host] -= sign * len(pl.gpu_indices)

    def add_running(self, rw: RunningWorkload, end: float, t: float) -> None:
        w = rw.workload
        self.seq += 1
        self.running[w.id] = rw
        self.ends[w.id] = end
        self.token[w.id] = self.seq
        self.occupy(rw, 1)
        heapq.heappush(self.heap, (end, 0, self.seq, w.id))
        if rw.allocated:
            self.rate[w.project] += w.gpus
            until = protected_until(rw, self.cap)
            if t < until < end:
                heapq.heappush(self.heap, (until, 1, self.seq, w.id))

    def remove_running(self, wid: str) -> RunningWorkload:
        rw = self.running.pop(wid)
        self.token.pop(wid, None)
        self.occupy(rw, -1)
        if rw.allocated:
            self.rate[rw.workload.project] -= rw.workload.gpus
        return rw

    def enqueue(self, w: Workload) -> None:
        keys = self.pkeys.setdefault(w.project, [])
        lst = self.pending.setdefault(w.project, [])
        i = bisect_left(keys, _order_key(w))
        keys.insert(i, _order_key(w))
        lst.insert(i, w)
        self.by_id[w.id] = w

    def dequeue(self, wid: str) -> Workload | None:
        w = self.by_id.get(wid)
        keys = self.pkeys.get(w.project) if w is not None else None
        if w is None or keys is None:
            return None
        i = bisect_left(keys, _order_key(w))
        if i >= len(keys) or keys[i] != _order_key(w):
            return None
        del keys[i]
        del self.pending[w.project][i]
        if not keys:
            del self.pending[w.project]
            del self.pkeys[w.project]
        del self.by_id[wid]
        return w

    def could_act(self, t: float) -> bool:
        """False when a cycle at `t` provably does nothing: no pending shape fits the
        free GPUs and no allocated pending job could preempt unprotected work."""
        if not self.pending:
            return False
        free, healthy = self.free, self.healthy
        most = max(free.values(), default=0)
        whole = sum(g for h, g in free.items() if g == healthy[h])
        big = self.max_host
        waiting = [w for v in self.pending.values() for w in v]
        if any(w.gpus <= most or big < w.gpus <= whole for w in waiting):
            return True
        if not any(w.min_runtime_s > 0 for w in waiting):
            return False
        for rw in self.running.values():
            w = rw.workload
            if not rw.allocated or (w.min_runtime_s <= 0 and rw.protected_until_s is None):
                return True
            if protected_until(rw, self.cap) <= t:
                return True
        return False

    def cycle(self, t: float, state: EngineState, starts: dict[str, float]) -> bool:
        """One engine cycle at `t`, applied; True when it started or stopped anything."""
        snap = Snapshot(
            hosts=self.hosts,
            running=list(self.running.values()),
            pending=self.pending,
            tree=self.snapshot.tree,
            usage=self.usage,
        )
        result = plan(snap, self.policy, t, state)
        overhead = self.policy.restart_overhead_s
        for stop in result.stops:
            if stop.workload_id not in self.running:
                continue
            left = max(0.0, self.ends[stop.workload_id] - t)
            stopped = self.remove_running(stop.workload_id).workload
            if stop.requeue:
                self.need[stopped.id] = left + overhead
                self.enqueue(stopped)
        for st in result.starts:
            w = self.dequeue(st.workload_id)
            if w is None:
                continue
            starts.setdefault(w.id, t)
            run = self.need.pop(w.id, None)
            if run is None:
                run = max(0.0, self.remaining(w, 0.0))
            rw = RunningWorkload(
                workload=w, placements=tuple(st.placements), started_s=t, allocated=st.allocated
            )
            self.add_running(rw, t + run, t)
        return bool(result.starts or result.stops)


def repeat_arrivals(
    recent: Iterable[Workload],
    now: float,
    window_s: float,
    periods: int = 1,
    since: float | None = None,
) -> list[Workload]:
    """Expected arrivals in `[now, now + window_s)`: a persistence forecast of demand
    per project and shape, with its time of day when the window is a day.

    The jobs submitted in the last `periods` windows, `[now - periods * window_s,
    now)`, arrive again whole windows later, each at its own place in the window's
    cycle; with more than one period only one job in `periods` is kept (chosen by a
    hash of its id, so the forecast is deterministic), so the expected rate is the
    average of those windows rather than the last one alone: a quiet day after a busy
    one (or the reverse) no longer sets the whole forecast. `since`: when the records
    begin; only the whole windows after it count (a young cluster averages fewer).
    Ids get a "~next" suffix."""
    periods = max(1, int(periods))
    if since is not None:
        periods = max(1, min(periods, math.floor((now - since) / window_s)))
    return [
        _again(w, k, window_s)
        for k, w in _windows_back(recent, now, window_s, periods)
        if periods == 1 or _unit_hash(w.id) * periods < 1.0
    ]


def busiest_arrivals(
    recent: Iterable[Workload], now: float, window_s: float, periods: int
) -> list[Workload]:
    """The pessimistic expected arrivals in `[now, now + window_s)`: of the last
    `periods` windows, the one that asked for the most GPUs arrives again (with
    seven daily windows, about the 90th percentile of a day's demand), shifted as in
    `repeat_arrivals`. The latest start of a range expects these."""
    by_period: dict[int, list[Workload]] = defaultdict(list)
    for k, w in _windows_back(recent, now, window_s, max(1, int(periods))):
        by_period[k].append(w)
    if not by_period:
        return []
    k, jobs = max(by_period.items(), key=lambda kv: (sum(w.gpus for w in kv[1]), -kv[0]))
    return [_again(w, k, window_s) for w in jobs]


def _windows_back(
    recent: Iterable[Workload], now: float, window_s: float, periods: int
) -> Iterator[tuple[int, Workload]]:
    """(k, job) for the jobs submitted in the last `periods` windows before `now`: k
    whole windows later the job lands in `[now, now + window_s)`."""
    span = window_s * periods
    for w in recent:
        age = now - w.submit_s
        if 0 < age <= span:
            yield max(1, math.ceil(age / window_s)), w


def _again(w: Workload, k: int, window_s: float) -> Workload:
    """`w` expected again `k` windows after its submission (id with a "~next" suffix)."""
    return replace(w, id=f"{w.id}~next", submit_s=w.submit_s + k * window_s)


def _unit_hash(text: str) -> float:
    """A stable pseudo-random number in [0, 1) for `text` (the same in every process)."""
    return zlib.crc32(text.encode()) / 2**32


def forward_starts(
    snapshot: Snapshot,
    policy: Policy,
    now: float,
    remaining: Remaining,
    *,
    targets: Collection[str] | None = None,
    arrivals: Sequence[Workload] = (),
    period_s: float = 60.0,
    horizon_s: float = HORIZON_S,
    max_cycles: int = MAX_CYCLES,
    rel_step: float = REL_STEP,
) -> dict[str, float]:
    """Play `snapshot` forward from `now` through the engine; return workload id ->
    its first start (>= now) for the pending jobs that start before the horizon.

    `remaining(workload, elapsed)` forecasts how long a job still runs after
    `elapsed` seconds of its current run (0 for a pending job). Stops early once every
    id in `targets` has started (all pending jobs when None). Like the replay, a cycle
    runs at every event (an end, a protection expiring) and, under fair share, every
    `period_s` while the engine could act. `arrivals` are jobs expected to arrive
    later (queued at their `submit_s`, ids distinct from the snapshot's).

    Precision is relative: a cycle follows the previous one at t no sooner than
    `rel_step * (t - now)` later (events are still applied at their own times), so a
    start an hour ahead is exact to about a minute, one a day ahead to about half an
    hour, and a long queue costs a number of cycles that grows with the logarithm of
    its horizon rather than with its length.
    """
    run = _Forward(snapshot, policy, now, remaining)
    want = set(run.by_id) if targets is None else set(targets) & set(run.by_id)
    starts: dict[str, float] = {}
    if not want:
        return starts
    state = EngineState()
    periodic = run.policy.mode == "fairshare"
    heap = run.heap
    last_t = now
    end_t = now + horizon_s
    cycles = 0
    quiet = 0
    next_cycle = now
    due: float | None = now
    later = sorted((w for w in arrivals if w.submit_s > now), key=_order_key)
    later.sort(key=lambda w: w.submit_s)
    ai = 0
    while cycles < max_cycles:
        t_ev = heap[0][0] if heap else math.inf
        if ai < len(later) and later[ai].submit_s < t_ev:
            t_ev = later[ai].submit_s
        t = min(t_ev, due) if due is not None else t_ev
        if t == math.inf or t > end_t:
            break
        woke = False
        while heap and heap[0][0] <= t:
            _, kind, tok, wid = heapq.heappop(heap)
            if run.token.get(wid) != tok:
                continue
            if kind == 0:
                run.remove_running(wid)
            woke = True
        while ai < len(later) and later[ai].submit_s <= t:
            run.enqueue(later[ai])
            ai += 1
            woke = True
        if woke:
            at = max(t, next_cycle)
            due = at if due is None else min(due, at)
        if due is None or due > t:
            continue
        due = None
        for p, r in run.rate.items():
            if r:
                run.usage[p] += r * (t - last_t)
        last_t = t
        if not run.could_act(t):
            continue
        acted = run.cycle(t, state, starts)
        cycles += 1
        next_cycle = t + rel_step * (t - now)
        if want.issubset(starts):
            break
        # Periodic cycles notice usage drifting; while they change nothing, they come
        # at doubling intervals (up to an hour), so a long wait costs few cycles.
        quiet = 0 if acted or t == t_ev else quiet + 1
        if periodic and run.could_act(t):
            gap = min(period_s * 2**quiet, max(period_s, MAX_PERIOD_S))
            due = max(t + gap, next_cycle)
    return {wid: s for wid, s in starts.items() if wid in want}


def baseline_starts(
    snapshot: Snapshot, policy: Policy, now: float, remaining: Remaining
) -> dict[str, float]:
    """Slurm backfill-style estimates: the engine's queue order (its plan at `now`,
    whose starts count as starting now), each job booked on the GPUs that free up
    first given the running jobs' expected ends and the bookings ahead of it."""
    result = plan(snapshot, replace(policy, explain_queue=True), now, EngineState())
    healthy = {h.name: h.gpus for h in snapshot.hosts if h.healthy}
    avail: dict[str, list[float]] = {h: [now] * g for h, g in healthy.items()}

    def book(placements: Iterable[Placement], end: float) -> None:
        for pl in placements:
            slots = avail.get(pl.host)
            if slots is not None:
                for g in pl.gpu_indices:
                    if 0 <= g < len(slots):
                        slots[g] = max(slots[g], end)

    stopped = {s.workload_id for s in result.stops}
    for rw in snapshot.running:
        if rw.workload.id not in stopped:
            elapsed = max(0.0, now - rw.started_s)
            book(rw.placements, now + max(0.0, remaining(rw.workload, elapsed)))
    by_id = {w.id: w for v in snapshot.pending.values() for w in v}
    out: dict[str, float] = {}
    for st in result.starts:
        w = by_id.get(st.workload_id)
        if w is not None:
            out[w.id] = now
            book(st.placements, now + max(0.0, remaining(w, 0.0)))
    for slots in avail.values():  # from here on only the counts per time matter
        slots.sort()
    max_host = max(healthy.values(), default=0)
    for entry in sorted(result.queue, key=lambda e: e.position):
        w = by_id.get(entry.workload_id)
        if w is None or w.id in out:
            continue
        dur = max(0.0, remaining(w, 0.0))
        if w.gpus <= max_host:
            best: tuple[float, str] | None = None
            k = w.gpus - 1
            for h, slots in avail.items():  # each host's slots stay sorted
                if len(slots) > k and (best is None or slots[k] < best[0]):
                    best = (slots[k], h)
            if best is None:
                continue
            at, h = best
            slots = avail[h]
            slots[: w.gpus] = [at + dur] * w.gpus
            slots.sort()
        else:
            if not max_host:
                continue
            k = w.gpus // max_host
            whole = sorted((max(s), h) for h, s in avail.items() if len(s) == max_host)
            if w.gpus % max_host or k > len(whole):
                continue
            at = whole[k - 1][0]
            for _, h in whole[:k]:
                avail[h] = [at + dur] * max_host
        out[w.id] = max(now, at)
    return out


def estimate(
    snapshot: Snapshot,
    policy: Policy,
    now: float,
    forecast: RuntimeForecast,
    *,
    users: Mapping[str, str] | None = None,
    targets: Collection[str] | None = None,
    arrivals: Sequence[Workload] = (),
    busy_arrivals: Sequence[Workload] | None = None,
    quantiles: tuple[float, float, float] = QUANTILES,
    period_s: float = 60.0,
    horizon_s: float = HORIZON_S,
    rel_step: float = REL_STEP,
    baseline: bool = True,
    spread: float = SPREAD,
) -> dict[str, Estimate]:
    """The `Estimate` of every pending job in `targets` (all pending jobs when None).

    `users` maps workload ids to their submitters (the forecast's finest key).
    `arrivals` are the expected later jobs of the middle run, `busy_arrivals` those of
    the high (latest) run (the same as `arrivals` when None); the low run expects none.
    `spread`: how far the middle run's per-job quantiles spread around its quantile
    (`spread_quantiles`; 0: every job at it); the low and high runs put every job at
    theirs, so the range still spans runtimes that are all short or all long."""
    who = users or {}

    def runtime_at(q: float) -> Remaining:
        def remaining(w: Workload, elapsed: float) -> float:
            return forecast.remaining(w.project, who.get(w.id, ""), w.kind, w.gpus, elapsed, q)

        return remaining

    def middle_at(q: float) -> Remaining:
        if spread <= 0:
            return runtime_at(q)
        return _spread_remaining(forecast, who, snapshot.running, q, spread)

    # The earliest run expects no other arrivals, the middle one the expected ones and
    # the latest one a busy window's: the range spans both unknowns, how long jobs run
    # and what else comes.
    busy = arrivals if busy_arrivals is None else busy_arrivals
    runs = [
        forward_starts(
            snapshot,
            policy,
            now,
            remaining,
            targets=targets,
            arrivals=expected,
            period_s=period_s,
            horizon_s=horizon_s,
            rel_step=rel_step,
        )
        for remaining, expected in zip(
            (runtime_at(quantiles[0]), middle_at(quantiles[1]), runtime_at(quantiles[2])),
            ((), arrivals, busy),
            strict=True,
        )
    ]
    base = baseline_starts(snapshot, policy, now, runtime_at(0.5)) if baseline else {}
    pending = {w.id for v in snapshot.pending.values() for w in v}
    ids = pending if targets is None else set(targets) & pending
    out: dict[str, Estimate] = {}
    for wid in ids:
        found = [r.get(wid) for r in runs]
        known = [s for s in found if s is not None]
        out[wid] = Estimate(
            start=found[len(found) // 2],
            earliest=min(known) if known else None,
            latest=max(known) if len(known) == len(found) else None,
            baseline_start=base.get(wid),
        )
    return out


def steady(previous: Estimate | None, new: Estimate, now: float) -> Estimate:
    """The estimate to show after `new` replaces `previous` (shown before): the new
    range, with the previous start kept while it is still ahead and inside that range.

    A forward run's start moves a little with every arrival and finished job; a user
    plans by the time shown, so it moves only when the new range no longer holds it
    (`moved_beyond_range` then says whether the page must explain the move)."""
    if previous is None or previous.start is None or new.start is None:
        return new
    if new.earliest is None or new.latest is None:
        return new
    if now <= previous.start and new.earliest <= previous.start <= new.latest:
        return replace(new, start=previous.start)
    return new


def moved_beyond_range(previous: Estimate | None, shown: Estimate) -> bool:
    """Whether the shown start moved by more than the previous range's width (and more
    than `NOTICED_MOVE_S`): the move a user notices, which the job page explains (a
    budget change, a job ahead, a host down)."""
    if previous is None or previous.start is None or shown.start is None:
        return False
    width = 0.0
    if previous.earliest is not None and previous.latest is not None:
        width = previous.latest - previous.earliest
    return abs(shown.start - previous.start) > max(width, NOTICED_MOVE_S)


def _miss(at: float, start: float, earliest: float, latest: float, real: float) -> float:
    """How far a real start fell outside the range stated at `at`, relative to the wait
    the estimate then expected (0 inside)."""
    scale = max(start - at, 60.0)
    if real < earliest:
        return (earliest - real) / scale
    if real > latest:
        return (real - latest) / scale
    return 0.0


def range_widening(
    records: Iterable[tuple[float, float, float, float, float]],
    coverage: float = RANGE_COVERAGE,
) -> float:
    """How much to widen ranges so that `coverage` of recent real starts fall in them.

    `records`: (stated at, start, earliest, latest, real start) of jobs that started, as
    estimated when they were submitted. The answer `s` widens a range by `s` times the
    expected wait on each side (`widened`); 0 until `CALIBRATION_MIN` records are known.
    A split-conformal calibration: the range adapts to how wrong it has been on this
    cluster, instead of constants tuned on one trace."""
    misses = sorted(_miss(*r) for r in records)
    if len(misses) < CALIBRATION_MIN:
        return 0.0
    return misses[min(len(misses) - 1, math.ceil(coverage * len(misses)) - 1)]


def widened(est: Estimate, now: float, widening: float) -> Estimate:
    """`est` with its range widened by `widening` times the expected wait on each side
    (never before `now`)."""
    if widening <= 0 or est.start is None:
        return est
    margin = widening * max(est.start - now, 60.0)
    return replace(
        est,
        earliest=None if est.earliest is None else max(now, est.earliest - margin),
        latest=None if est.latest is None else est.latest + margin,
    )
