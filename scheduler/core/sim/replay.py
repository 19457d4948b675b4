"""Discrete-event replay of a trace through the real scheduling engine (pure Python).

`simulate(cluster, tree, jobs, config)` plays the trace's arrivals and the cluster's
health events forward in time. Whenever something happens (an arrival, a finish, a
minimum runtime running out, a host changing health) it runs one engine cycle with
`scheduler.core.engine.plan` and applies the returned stops and starts; events at the same
timestamp are coalesced into one cycle. While the engine could still act on what it
sees, a periodic cycle follows at most `config.cycle_period_s` after the last one, so
that fair-share usage drifting over time is noticed too (fair-share mode only: the
baselines do not look at usage). `config.min_cycle_gap_s` > 0 spaces event-driven
cycles at least that far apart (Slurm's sched_min_interval); events are still applied
at their own times, so intervals and usage stay exact and only decisions wait.

The run ends at `config.until_s` (still-running work is closed as `running_at_end`) or
when every job has ended; pending work that an empty cluster will not start (a shape
only unhealthy hosts could hold, an allocated job of a zero-weight project) stays
pending instead of hanging the loop. Shapes no set of hosts can ever hold (more GPUs
than the cluster, above one host but not whole hosts) are never queued: their
`JobOutcome` is terminated with `rejected` saying why.

Job life cycle in the replay:

- a run of a job needs its remaining work, plus `config.restart_overhead_s` when it is
  a restart after a preemption; it completes when that time has run;
- a stopped resumable job keeps the work saved at its last checkpoint
  (`run start + k * config.checkpoint_interval_s`), loses the rest, and is requeued
  with its original submit time (its next wait counts from the requeue);
  a stopped non-resumable job loses everything and ends terminated;
- only runs the engine started as allocated (`Start.allocated`) are charged to the
  project's usage; usage is the sliding window (or half-life) of `scheduler.core.sim.usage`.

How it stays fast (the engine cycle is the only per-cycle cost that grows with the
cluster): pending work is kept per project in within-project order with `bisect`
(never re-sorted), usage is maintained incrementally in hourly buckets, the running
jobs' `last_checkpoint_s` is refreshed lazily from a heap only when a checkpoint has
passed, events live in a heap (arrivals and health events in pre-sorted lists), and a
cycle is skipped when it provably can do nothing: nothing pending and no drain work;
or no pending job fits any free space while no preemption is possible (no allocated
job pending, or no running job outside its protection; never under `fifo`). After a
skipped cycle nothing can change until the next event, so no periodic cycle follows.
"""

from __future__ import annotations

import gc
import heapq
import math
import time
from collections.abc import Callable, Mapping, Sequence

from ledger.accounting import EndReason, RunInterval
from scheduler.core.engine import EngineState, plan
from scheduler.core.engine.types import (
    BudgetNode,
    CyclePlan,
    Policy,
    Snapshot,
    Workload,
)
from scheduler.core.sim.model import (
    ClusterSpec,
    DrainRecord,
    HealthEvent,
    JobOutcome,
    JobState,
    ReplayError,
    SimConfig,
    SimResult,
    TraceJob,
)
from scheduler.core.sim.replay_state import (
    _EXPIRE,
    _FINISH,
    ReplayJob,
    ReplayState,
    feasible_gpus,
    leaf_projects,
    policy_for,
)

__all__ = ["Planner", "ReplayError", "feasible_gpus", "leaf_projects", "policy_for", "simulate"]

Planner = Callable[[Snapshot, Policy, float], CyclePlan]
# Called at the instant some watched jobs arrive, after that instant's events are applied
# and before its cycle: (now, the arrived watched ids, the state the cycle would see).
Probe = Callable[[float, list[str], Snapshot], None]

# Policies whose decisions depend on usage (and so may change while time passes).
_USAGE_DRIVEN = frozenset({"fairshare"})
# Policies under which the engine never preempts.
_NO_PREEMPTION = frozenset({"fifo", "static"})

_MAX_CYCLES_AT_ONE_TIME = 10_000
# How often (in cycles) the objects alive so far are frozen for the cyclic garbage
# collector: a cycle makes many short-lived objects and no reference cycles, while the
# run's records only grow; frozen objects are still freed by reference counting.
_FREEZE_EVERY = 256


class _Replay(ReplayState):
    """The state of one replay; `run()` plays it to the end."""

    def __init__(
        self,
        cluster: ClusterSpec,
        tree: BudgetNode,
        jobs: Sequence[TraceJob],
        config: SimConfig,
        progress: Callable[[float], None] | None,
        planner: Planner,
        probe: tuple[frozenset[str], Probe] | None = None,
    ) -> None:
        self.probe = probe
        self.progress = progress
        self.planner = planner
        super().__init__(cluster, tree, config)
        sizes = self.host_gpus
        for order, spec in enumerate(jobs):
            if spec.project not in self.known:
                raise ValueError(f"job {spec.job_id}: project {spec.project!r} is not in the tree")
            if spec.job_id in self.by_id:
                raise ValueError(f"job {spec.job_id}: duplicate job id")
            min_rt = max(0.0, min(float(spec.min_runtime_s), self.cap))
            wl = Workload(
                id=spec.job_id,
                project=spec.project,
                gpus=spec.gpus,
                submit_s=float(spec.submit_s),
                min_runtime_s=min_rt,
                resumable=bool(spec.resumable),
                priority=int(spec.priority),
                kind=spec.kind,
            )
            out = JobOutcome(
                job_id=spec.job_id,
                project=spec.project,
                kind=spec.kind,
                gpus=spec.gpus,
                min_runtime_s=min_rt,
                submit_s=float(spec.submit_s),
                duration_s=float(spec.duration_s),
            )
            if not feasible_gpus(spec.gpus, sizes):
                out.state = JobState.TERMINATED
                out.end_s = float(spec.submit_s)
                out.rejected = (
                    f"{spec.gpus} GPUs can never be placed: jobs above one host "
                    f"({self.max_host} GPUs) need whole hosts, {len(sizes)} in the cluster"
                )
            self.by_id[spec.job_id] = order
            self.jobs.append(ReplayJob(spec, wl, out, order))
            self.outcomes.append(out)

    # -- cycles -------------------------------------------------------------------------

    def _drain_work(self) -> bool:
        """An unhealthy host that the engine can empty now or report ready."""
        for h in self.open_drain:
            jobs = self.on_host[h]
            if not jobs:
                return True
            for idx in jobs:
                if self.jobs[idx].unprotected:
                    return True
        return False

    def _fits_somewhere(self) -> bool:
        """A necessary condition for a start without preemption: some pending shape fits."""
        hist = self.free_hist
        max_free = len(hist) - 1
        while max_free and not hist[max_free]:
            max_free -= 1
        if not max_free:
            return False
        whole = self.whole_free
        big = self.max_host
        return any(g <= max_free or big < g <= whole for g in self.pending_sizes)

    def _could_act(self) -> bool:
        """False only when a cycle provably returns no action."""
        if self.open_drain and self._drain_work():
            return True
        if not self.n_pending:
            return False
        if self._fits_somewhere():
            return True
        if self.mode in _NO_PREEMPTION or not self.running:
            return False
        if self.mode == "fairshare":
            return bool(self.n_pending_alloc and self.n_unprotected)
        return True  # other baselines: preemption rules not modelled here, so be safe

    def _snapshot(self, now: float, *, detached: bool = False) -> Snapshot:
        """The state a cycle at `now` sees; `detached` copies the pending lists and the
        usage, which the replay goes on changing (for the probe)."""
        usage = self.usage.usage(now)
        return Snapshot(
            hosts=self.hosts_tuple,
            running=list(self.running.values()),
            pending={p: list(w) for p, w in self.pending.items()} if detached else self.pending,
            tree=self.tree,
            usage=dict(usage) if detached else usage,
            worked=self._worked() if detached else {},
        )

    def _worked(self) -> dict[str, float]:
        """The work the running and pending jobs saved in earlier runs (requeued jobs
        only), seconds: `Snapshot.worked`, for the probe."""
        out: dict[str, float] = {}
        jobs = self.jobs
        for idx in self.running:
            j = jobs[idx]
            done = j.spec.duration_s - j.need
            if done > 0:
                out[j.wl.id] = done
        for lst in self.pending.values():
            for w in lst:
                j = jobs[self.by_id[w.id]]
                done = j.spec.duration_s - j.remaining
                if done > 0:
                    out[w.id] = done
        return out

    def _call_probe(self, now: float, watched: list[str]) -> None:
        """Show the probe the state at `now`."""
        assert self.probe is not None
        self.probe[1](now, watched, self._snapshot(now, detached=True))

    def _cycle(self, now: float) -> bool:
        """Run one engine cycle at `now` and apply it; True when it changed anything."""
        self._refresh_checkpoints(now)
        plan = self.planner(self._snapshot(now), self.policy, now)
        self.cycles += 1
        if not self.cycles % _FREEZE_EVERY:
            gc.freeze()  # what the run keeps (intervals, outcomes) is not walked again
        for stop in plan.stops:
            self._stop(now, stop.workload_id, stop.reason_code)
        for start in plan.starts:
            self._start(now, start.workload_id, tuple(start.placements), bool(start.allocated))
        for ready in plan.hosts_ready:
            h = self.host_index.get(ready.host)
            if h is not None and h in self.open_drain and not self.on_host[h]:
                self.drains[self.open_drain.pop(h)][2] = now
        return bool(plan.starts or plan.stops)

    # -- the run's steps (outside the loop) -------------------------------------------

    def _arrivals(self) -> list[ReplayJob]:
        """The jobs to queue (not rejected, not running when the replay starts) in arrival
        order: submit time, then trace order."""
        return sorted(
            (j for j in self.jobs if j.out.state == JobState.PENDING and j.spec.running is None),
            key=lambda j: (j.wl.submit_s, j.key[3]),
        )

    def _firsts(self, arrival_t: list[float], health_t: list[float]) -> list[float]:
        """The first arrival, the first health event and the submit time of the jobs
        already running when the replay starts: the candidates for its start."""
        resumed = [j.wl.submit_s for j in self.jobs if j.spec.running is not None]
        return arrival_t[:1] + health_t[:1] + ([min(resumed)] if resumed else [])

    def _health_events(self) -> list[HealthEvent]:
        """The cluster's health events in time order (file order on ties)."""
        ordered = sorted(enumerate(self.cluster.events), key=lambda e: (e[1].at_s, e[0]))
        return [e for _, e in ordered]

    def _time_span(self, arrivals: list[ReplayJob], firsts: list[float]) -> tuple[float, float]:
        """(start, horizon): the first event (`until_s` if earlier) and the time the
        progress fraction counts up to."""
        until = self.config.until_s
        start = min(firsts) if firsts else 0.0
        if until is not None:
            start = min(start, until)
        horizon = (
            until
            if until is not None
            else max([j.wl.submit_s + j.spec.duration_s for j in arrivals] + [start + 1.0])
        )
        return start, horizon

    def _apply_timed(self, now: float) -> None:
        """Apply the finishes, protection ends and idle marks due by `now` (the events of
        a run that was stopped since are dropped)."""
        heap = self.heap
        while heap and heap[0][0] <= now:
            _, kind, _, idx, token = heapq.heappop(heap)
            j = self.jobs[idx]
            if j.token != token:
                continue  # the run this event belonged to was stopped
            self.events += 1
            if kind == _FINISH:
                self._release(now, idx, j, EndReason.COMPLETED)
                j.remaining = 0.0
                j.out.state = JobState.COMPLETED
                j.out.end_s = now
            elif kind == _EXPIRE:
                j.unprotected = True
                self.n_unprotected += 1
            else:
                self._idle(now, idx, j, kind)

    def _apply_health(
        self, now: float, health: list[HealthEvent], health_t: list[float], hi: int
    ) -> int:
        """Apply the health events from `hi` on that happen by `now`; the next one's index."""
        nh = len(health)
        while hi < nh and health_t[hi] <= now:
            ev = health[hi]
            self._set_health(now, ev.host, ev.healthy)
            self.events += 1
            hi += 1
        return hi

    def _apply_arrivals(
        self, now: float, arrivals: list[ReplayJob], arrival_t: list[float], ai: int
    ) -> int:
        """Queue the jobs from `ai` on that arrive by `now` (and show the probe the watched
        ones); the next one's index."""
        na = len(arrivals)
        watched: list[str] = []
        while ai < na and arrival_t[ai] <= now:
            self._enqueue(arrivals[ai], now)
            self.events += 1
            if self.probe is not None and arrivals[ai].wl.id in self.probe[0]:
                watched.append(arrivals[ai].wl.id)
            ai += 1
        if watched:
            self._call_probe(now, watched)
        return ai

    def _result(self, start: float, now: float, t: float, wall0: float) -> SimResult:
        """Close the run that stopped at `now` (next event time `t`): what is still running
        ends as `running_at_end`, and the result."""
        until = self.config.until_s
        if until is not None and (
            now >= until or until < t < math.inf or self.n_pending or self.running
        ):
            end = until  # cut off (or stuck with work left): the run lasts until `until_s`
        else:
            end = now  # every job has ended
        end = max(end, start)
        for idx in list(self.running):
            j = self.jobs[idx]
            self._release(end, idx, j, EndReason.RUNNING_AT_END)
            j.out.state = JobState.RUNNING
        if self.progress is not None:
            self.progress(1.0)
        drains = [DrainRecord(host=h, start_s=s, ready_s=r) for h, s, r in self.drains]
        return SimResult(
            policy=self.mode,
            cluster=self.cluster,
            start_s=start,
            end_s=end,
            intervals=self.intervals,
            jobs=self.outcomes,
            preemptions=self.preemptions,
            drains=drains,
            capacity=self.capacity,
            wall_s=time.perf_counter() - wall0,
            cycles=self.cycles,
            skipped_cycles=self.skipped,
            events=self.events,
        )

    # -- main loop ----------------------------------------------------------------------

    def run(self) -> SimResult:
        """Play the replay to its end. The event loop keeps its state in locals (it is the
        hot path); the rest are steps."""
        wall0 = time.perf_counter()
        cfg = self.config
        until = cfg.until_s
        period = float(cfg.cycle_period_s)
        usage_driven = self.mode in _USAGE_DRIVEN
        arrivals = self._arrivals()
        arrival_t = [j.wl.submit_s for j in arrivals]
        health = self._health_events()
        health_t = [e.at_s for e in health]
        na, nh = len(arrivals), len(health)
        ai = hi = 0
        start, horizon = self._time_span(arrivals, self._firsts(arrival_t, health_t))
        self._record_capacity(start)
        self.origin = start
        self._resume_running(start)

        inf = math.inf
        heap = self.heap
        gap = max(0.0, float(getattr(cfg, "min_cycle_gap_s", 0.0) or 0.0))
        # when the next cycle runs (events, periodic tick); at once for a job running
        # when the replay starts that found no room and waits
        due: float | None = start if self.n_pending else None
        now = t = start
        same_time = loops = 0
        last_cycle_t = -inf
        progress = self.progress
        span = max(horizon - start, 1e-9)

        while True:
            t_ev = heap[0][0] if heap else inf
            if ai < na and arrival_t[ai] < t_ev:
                t_ev = arrival_t[ai]
            if hi < nh and health_t[hi] < t_ev:
                t_ev = health_t[hi]
            t = t_ev if due is None or t_ev <= due else due
            if t == inf or (until is not None and t > until):
                break
            now = t
            if t_ev == now:
                # Apply everything that happens at this instant, then ask for a cycle.
                self._apply_timed(now)
                hi = self._apply_health(now, health, health_t, hi)
                ai = self._apply_arrivals(now, arrivals, arrival_t, ai)
                when = now if gap <= 0.0 else max(now, last_cycle_t + gap)
                due = when if due is None or when < due else due
            if until is not None and now >= until:
                break
            if due is None or due > now:
                continue

            due = None
            if self._could_act():
                same_time = same_time + 1 if now == last_cycle_t else 0
                if same_time > _MAX_CYCLES_AT_ONE_TIME:
                    raise ReplayError(f"the engine keeps acting at t={now} without end")
                acted = self._cycle(now)
                last_cycle_t = now
                if usage_driven and self._could_act():
                    due = now + max(period, gap)
                if not acted and not self.running and not heap and ai >= na and hi >= nh:
                    due = None  # an empty cluster that starts nothing: stuck for good
            else:
                self.skipped += 1

            loops += 1
            if progress is not None and not loops & 1023:
                progress(min(max((now - start) / span, 0.0), 0.999))

        return self._result(start, now, t, wall0)


def _engine_plan() -> Planner:
    """The engine's `plan` with one `EngineState` for the whole run (warm caches)."""
    state = EngineState()

    def planner(snapshot: Snapshot, policy: Policy, now: float) -> CyclePlan:
        return plan(snapshot, policy, now, state)

    return planner


def simulate(
    cluster: ClusterSpec,
    tree: BudgetNode,
    jobs: Sequence[TraceJob],
    config: SimConfig,
    progress: Callable[[float], None] | None = None,
    *,
    planner: Planner | None = None,
    probe: tuple[frozenset[str], Probe] | None = None,
) -> SimResult:
    """Replay `jobs` on `cluster` under `config.policy` with the real engine.

    `progress` is called now and then with the fraction of simulated time done (0..1).
    `planner` replaces `scheduler.core.engine.plan` (for tests only). `probe` = (job ids,
    callback): the callback sees the state at each instant one of those jobs arrives
    (see `Probe`; `bench/eta.py` asks its ETA there).
    Raises `ValueError` for inputs the replay cannot play (unknown project, duplicate
    job id, unknown host in a health event) and `ReplayError` for an engine plan that
    cannot be applied (a GPU given twice, an unknown or non-pending job started).
    """
    replay = _Replay(cluster, tree, jobs, config, progress, planner or _engine_plan(), probe)
    # The inputs and the replay's own tables live for the whole run: freezing them keeps
    # the cyclic garbage collector from walking them again and again (a cycle makes many
    # short-lived objects and no reference cycles); the run's growing records are frozen
    # every `_FREEZE_EVERY` cycles. Everything is unfrozen at the end; the caller's gc
    # settings are left as they were.
    gc.freeze()
    try:
        return replay.run()
    finally:
        gc.unfreeze()


def usage_from_intervals(
    intervals: Sequence[RunInterval], now: float, lookback_s: float
) -> Mapping[str, float]:
    """Charged GPU-seconds per project in `[now - lookback_s, now]`, straight from the
    intervals (a slow reference for tests and checks)."""
    out: dict[str, float] = {}
    lo = now - lookback_s
    for iv in intervals:
        if not iv.allocated:
            continue
        a, b = max(iv.start_s, lo), min(iv.end_s, now)
        if b > a:
            out[iv.project] = out.get(iv.project, 0.0) + (b - a) * iv.gpus
    return out
