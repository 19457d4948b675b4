"""One forward run: the snapshot played forward through the engine's `plan()`
(`forward_starts`); see the package docstring."""

from __future__ import annotations

import heapq
import math
from bisect import bisect_left
from collections import defaultdict
from collections.abc import Collection, Mapping, Sequence
from dataclasses import replace

from scheduler.core.engine import EngineState, plan
from scheduler.core.engine.runs import checkpointed, last_checkpoint_s, protected_until
from scheduler.core.engine.types import Policy, RunningWorkload, Snapshot, Workload
from scheduler.core.sim.eta.runtimes import Remaining

HORIZON_S = 30 * 86400.0  # how far ahead a forward run looks at most
MAX_CYCLES = 20_000  # engine cycles per forward run at most
REL_STEP = 0.02  # cycles at least this share of the look-ahead apart (see forward_starts)
MAX_PERIOD_S = 3600.0  # the longest gap between periodic cycles that change nothing
# event kinds in a forward run's heap: a run ends, a protection expires (wakes a
# cycle), an avoidance lapses (wakes a cycle: the job may start on that host now)
END, PROTECTION, AVOIDANCE = 0, 1, 2


def order_key(w: Workload) -> tuple[int, float, str]:
    return (-w.priority, w.submit_s, w.id)


class Forward:
    """The state of one forward run (see `forward_starts`)."""

    def __init__(
        self,
        snapshot: Snapshot,
        policy: Policy,
        now: float,
        remaining: Remaining,
        avoid_until: Mapping[str, Mapping[str, float]] | None = None,
    ) -> None:
        self.snapshot = snapshot
        self.policy = replace(policy, explain_queue=False)
        self.remaining = remaining
        self.cap = policy.max_min_runtime_s
        self.interval = policy.checkpoint_interval_s
        self.hosts = tuple(snapshot.hosts)
        self.healthy = {h.name: h.gpus for h in self.hosts if h.healthy}
        self.max_host = max(self.healthy.values(), default=0)
        self.free = dict(self.healthy)
        self.pending: dict[str, list[Workload]] = {
            p: list(v) for p, v in snapshot.pending.items() if v
        }
        self.pkeys = {p: [order_key(w) for w in v] for p, v in self.pending.items()}
        self.by_id = {w.id: w for v in self.pending.values() for w in v}
        self.need: dict[str, float] = {}  # requeued work: what a stopped run had left
        self.worked = snapshot.worked  # work saved in earlier runs: time already run
        self.running: dict[str, RunningWorkload] = {}
        self.ends: dict[str, float] = {}
        self.rate: dict[str, float] = defaultdict(float)
        self.usage: dict[str, float] = defaultdict(float, snapshot.usage)
        self.heap: list[tuple[float, int, int, str]] = []  # (time, kind, token, id)
        # (next checkpoint, token, id) of the resumable runs: read at each cycle, like
        # the replay's (a checkpoint wakes no cycle)
        self.saves: list[tuple[float, int, str]] = []
        self.token: dict[str, int] = {}
        self.seq = 0
        # pending workload -> host it is kept off -> when that lapses (`Snapshot.avoid`
        # pairs without an end given last the whole run)
        self.kept: dict[str, dict[str, float]] = {
            wid: dict.fromkeys(hosts, math.inf) for wid, hosts in snapshot.avoid.items()
        }
        for wid, ends in (avoid_until or {}).items():
            for host, until in ends.items():
                if until > now:
                    self.kept.setdefault(wid, {})[host] = until
                    heapq.heappush(self.heap, (until, AVOIDANCE, 0, wid))
        self.kept = {wid: ends for wid, ends in self.kept.items() if ends}
        for rw in snapshot.running:
            elapsed = max(0.0, now - rw.started_s) + self.worked.get(rw.workload.id, 0.0)
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
        heapq.heappush(self.heap, (end, END, self.seq, w.id))
        if rw.allocated:
            self.rate[w.project] += w.gpus
            until = protected_until(rw, self.cap)
            if t < until < end:
                heapq.heappush(self.heap, (until, PROTECTION, self.seq, w.id))
        if w.resumable and self.interval > 0:
            self.checkpoint(rw, t, end)

    def checkpoint(
        self, rw: RunningWorkload, t: float, end: float, due: float | None = None
    ) -> None:
        """Running `rw` as its checkpoints leave it at `t` (`last_checkpoint_s`, the one
        rule of the engine's runs, as the live snapshot and the replay read it), and its
        next checkpoint before `end`. The engine reads it to choose victims (the work a
        stop loses) and the runs consolidation may move (saved work). `due`: a
        checkpoint known reached (whatever the rounding of the rule's division says)."""
        saved = last_checkpoint_s(rw.started_s, t, self.interval)
        if due is not None and (saved is None or saved < due):
            saved = due
        if saved is not None and (rw.last_checkpoint_s is None or saved > rw.last_checkpoint_s):
            rw = checkpointed(rw, saved)
            self.running[rw.workload.id] = rw
        nxt = (saved if saved is not None else rw.started_s) + self.interval
        while nxt <= t:
            nxt += self.interval
        if nxt < end:
            heapq.heappush(self.saves, (nxt, self.token[rw.workload.id], rw.workload.id))

    def save_work(self, t: float) -> None:
        """The checkpoints due by `t` of the runs still going (`checkpoint`)."""
        saves = self.saves
        while saves and saves[0][0] <= t:
            due, tok, wid = heapq.heappop(saves)
            if self.token.get(wid) == tok:
                self.checkpoint(self.running[wid], t, self.ends[wid], due)

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
        i = bisect_left(keys, order_key(w))
        keys.insert(i, order_key(w))
        lst.insert(i, w)
        self.by_id[w.id] = w

    def dequeue(self, wid: str) -> Workload | None:
        w = self.by_id.get(wid)
        keys = self.pkeys.get(w.project) if w is not None else None
        if w is None or keys is None:
            return None
        i = bisect_left(keys, order_key(w))
        if i >= len(keys) or keys[i] != order_key(w):
            return None
        del keys[i]
        del self.pending[w.project][i]
        if not keys:
            del self.pending[w.project]
            del self.pkeys[w.project]
        del self.by_id[wid]
        return w

    def wake(self, t: float, later: Sequence[Workload], ai: int) -> tuple[bool, int]:
        """Apply the events due by `t` (ends; a protection expiring or an avoidance
        lapsing only wakes a cycle) and queue the arrivals `later[ai:]` submitted by
        then: whether anything happened, and the index of the next arrival."""
        woke = False
        heap = self.heap
        while heap and heap[0][0] <= t:
            _, kind, tok, wid = heapq.heappop(heap)
            if kind == AVOIDANCE:
                woke = woke or wid in self.by_id
                continue
            if self.token.get(wid) != tok:
                continue
            if kind == END:
                self.remove_running(wid)
            woke = True
        while ai < len(later) and later[ai].submit_s <= t:
            self.enqueue(later[ai])
            ai += 1
            woke = True
        return woke, ai

    def accrue(self, elapsed: float) -> None:
        """The usage of the allocated runs over the last `elapsed` seconds."""
        for p, r in self.rate.items():
            if r:
                self.usage[p] += r * elapsed

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

    def avoid_at(self, t: float) -> dict[str, frozenset[str]]:
        """`Snapshot.avoid` at `t`: the hosts each pending job is still kept off."""
        if not self.kept:
            return {}
        out = {}
        for wid, ends in list(self.kept.items()):
            hosts = frozenset(h for h, until in ends.items() if until > t)
            if hosts:
                out[wid] = hosts
            else:
                del self.kept[wid]
        return out

    def cycle(self, t: float, state: EngineState, starts: dict[str, float]) -> bool:
        """One engine cycle at `t`, applied; True when it started or stopped anything."""
        self.save_work(t)
        snap = Snapshot(
            hosts=self.hosts,
            running=list(self.running.values()),
            pending=self.pending,
            tree=self.snapshot.tree,
            usage=self.usage,
            avoid=self.avoid_at(t),
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
                run = max(0.0, self.remaining(w, self.worked.get(w.id, 0.0)))
            rw = RunningWorkload(
                workload=w, placements=tuple(st.placements), started_s=t, allocated=st.allocated
            )
            self.add_running(rw, t + run, t)
        return bool(result.starts or result.stops)


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
    avoid_until: Mapping[str, Mapping[str, float]] | None = None,
) -> dict[str, float]:
    """Play `snapshot` forward from `now` through the engine; return workload id ->
    its first start (>= now) for the pending jobs that start before the horizon.

    `remaining(workload, elapsed)` forecasts how long a job still runs after
    `elapsed` seconds of its current run (0 for a pending job). Stops early once every
    id in `targets` has started (all pending jobs when None). Like the replay, a cycle
    runs at every event (an end, a protection expiring) and, under fair share, every
    `period_s` while the engine could act. `arrivals` are jobs expected to arrive
    later (queued at their `submit_s`, ids distinct from the snapshot's).
    `avoid_until`: pending id -> host it is kept off -> when that lapses (refused there,
    `scheduler.core.refusals.avoid_ends`); `snapshot.avoid` pairs not in it hold throughout.

    Precision is relative: a cycle follows the previous one at t no sooner than
    `rel_step * (t - now)` later (events are still applied at their own times), so a
    start an hour ahead is exact to about a minute, one a day ahead to about half an
    hour, and a long queue costs a number of cycles that grows with the logarithm of
    its horizon rather than with its length.
    """
    run = Forward(snapshot, policy, now, remaining, avoid_until)
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
    later = sorted((w for w in arrivals if w.submit_s > now), key=order_key)
    later.sort(key=lambda w: w.submit_s)
    ai = 0
    while cycles < max_cycles:
        t_ev = heap[0][0] if heap else math.inf
        if ai < len(later) and later[ai].submit_s < t_ev:
            t_ev = later[ai].submit_s
        t = min(t_ev, due) if due is not None else t_ev
        if t == math.inf or t > end_t:
            break
        woke, ai = run.wake(t, later, ai)
        if woke:
            at = max(t, next_cycle)
            due = at if due is None else min(due, at)
        if due is None or due > t:
            continue
        due = None
        run.accrue(t - last_t)
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
