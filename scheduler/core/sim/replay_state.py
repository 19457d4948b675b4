"""The replay's cluster and queue bookkeeping, and how it applies a plan (pure Python):
the mutable state of one job (`ReplayJob`), and `ReplayState`: hosts and their free
GPUs, the pending queues in within-project order, the running work the engine sees,
the event heap, usage, and the starts, stops, releases and checkpoints that change
them. `scheduler.core.sim.replay` plays the events and runs the cycles on top of it.

Idle work (`TraceJob.idle_after_s`): a run's GPUs go idle once it has run that long
(each run: a restarted job works that long again first). With the simulator's
`idle_reclaim` on, an `_IDLE` event at that instant marks the running work idle
(`RunningWorkload.idle_since_s`) for the engine and an `_IDLE_DUE` event follows once
it has been idle for `idle_reclaim_after_s`, so that a cycle sees it reclaimable at
once; with it off no event is played (the engine would not read the mark).
"""

from __future__ import annotations

import heapq
import math
from bisect import bisect_left
from collections import Counter
from collections.abc import Sequence
from dataclasses import fields
from typing import Any

from ledger.accounting import EndReason, RunInterval
from scheduler.core.engine.placement import place_on_free
from scheduler.core.engine.runs import checkpointed, protection_s, saved_work_s
from scheduler.core.engine.types import (
    BudgetNode,
    Host,
    Placement,
    Policy,
    RunningWorkload,
    StopReason,
    Workload,
)
from scheduler.core.sim.io import leaf_names
from scheduler.core.sim.model import (
    ClusterSpec,
    JobOutcome,
    JobState,
    PreemptionRecord,
    ReplayError,
    SimConfig,
    TraceJob,
)
from scheduler.core.sim.usage import make_usage

__all__ = ["ReplayJob", "ReplayState", "feasible_gpus", "leaf_projects", "policy_for"]

# Heap event kinds; at one timestamp finishes come first so freed GPUs are seen at once.
_FINISH = 0
_EXPIRE = 1
_IDLE = 2  # a run's GPUs go idle
_IDLE_DUE = 3  # a run has been idle long enough to be reclaimed (idle reclaim on)


def leaf_projects(tree: BudgetNode) -> list[str]:
    """The project names (leaves) of a budget tree, depth first; a bare root has none."""
    return leaf_names(tree) if tree.children else []


def feasible_gpus(gpus: int, host_sizes: Sequence[int]) -> bool:
    """Whether a job of `gpus` GPUs can ever be placed on hosts of these sizes.

    Up to one host's GPUs: any host at least that large; above: whole hosts of one
    size whose count suffices and whose size divides the job.
    """
    if gpus <= 0 or not host_sizes:
        return False
    if gpus <= max(host_sizes):
        return True
    for size, count in Counter(host_sizes).items():
        if gpus % size == 0 and gpus // size <= count:
            return True
    return False


def policy_for(config: SimConfig, **extra: object) -> Policy:
    """The engine `Policy` for a simulator config (`mode` only if the engine has it)."""
    names = {f.name for f in fields(Policy)}
    values: dict[str, object] = {
        "max_min_runtime_s": config.max_min_runtime_s,
        "lookback_s": config.lookback_s,
        "half_life_s": config.half_life_s,
        "checkpoint_interval_s": config.checkpoint_interval_s,
        "restart_overhead_s": config.restart_overhead_s,
        "explain_queue": False,
        "seed": config.seed,
        "mode": config.policy,
        "short_reserve_hosts": config.short_reserve_hosts,
        "short_job_max_s": config.short_job_max_s,
        "short_reserve_auto": config.short_reserve_auto,
        "idle_reclaim": config.idle_reclaim,
        "idle_reclaim_after_s": config.idle_reclaim_after_s,
        "share_floor": config.share_floor,
        "short_reserve_demand_window_s": config.short_reserve_demand_window_s,
        "short_reserve_spares_floor": config.short_reserve_spares_floor,
        "short_reserve_take_after_s": config.short_reserve_take_after_s,
        "short_reserve_fewest_gpus": config.short_reserve_fewest_gpus,
        "short_reserve_room_now": config.short_reserve_room_now,
        "consolidate": config.consolidate,
        "reservation_admit_s": config.reservation_admit_s,
    }
    values.update(extra)
    return Policy(**{k: v for k, v in values.items() if k in names})  # type: ignore[arg-type]


class ReplayJob:
    """Mutable replay state of one trace job."""

    __slots__ = (
        "allocated",
        "hosts",
        "key",
        "moved_at",
        "need",
        "out",
        "placements",
        "remaining",
        "run_start",
        "running",
        "spec",
        "token",
        "unprotected",
        "wl",
    )

    def __init__(self, spec: TraceJob, wl: Workload, out: JobOutcome, order: int) -> None:
        self.spec = spec
        self.wl = wl
        self.out = out
        self.key = (-wl.priority, wl.submit_s, wl.id, order)
        self.remaining = float(spec.duration_s)  # work still to do (incl. restart overhead)
        self.token = 0  # id of the current run; stale heap events carry an older one
        self.running = False
        self.run_start = 0.0
        self.need = 0.0  # running time this run needs to complete
        self.placements: tuple[Placement, ...] = ()
        self.hosts: tuple[int, ...] = ()
        self.allocated = False
        self.unprotected = False
        self.moved_at = -1.0  # when the engine last stopped it to move it (consolidation)


class ReplayState:
    """The cluster, queues, running work and records of one replay, and the operations
    that change them (see the module docstring)."""

    def __init__(self, cluster: ClusterSpec, tree: BudgetNode, config: SimConfig) -> None:
        self.cluster = cluster
        self.tree = tree
        self.config = config
        self.mode = config.policy
        self.policy = policy_for(config)
        self.ckpt = float(config.checkpoint_interval_s)
        self.overhead = float(config.restart_overhead_s)
        self.cap = float(config.max_min_runtime_s)

        names = [h.name for h in cluster.hosts]
        if len(set(names)) != len(names):
            raise ValueError("host names must be unique")
        self.host_names = names
        self.host_index = {n: i for i, n in enumerate(names)}
        self.host_gpus = [h.gpus for h in cluster.hosts]
        self.healthy = [True] * len(names)
        self.used = [0] * len(names)  # bit mask of busy GPU indices
        self.free = list(self.host_gpus)
        # Healthy hosts by free GPUs, and the GPUs of healthy hosts that are wholly free:
        # kept up to date so that "could anything fit?" costs O(host size), not O(hosts).
        self.max_host = max(self.host_gpus, default=0)
        self.free_hist = [0] * (self.max_host + 1)
        for g in self.host_gpus:
            self.free_hist[g] += 1
        self.whole_free = sum(self.host_gpus)
        self.on_host: list[set[int]] = [set() for _ in names]  # job indices per host
        self.hosts_tuple: tuple[Host, ...] = tuple(
            Host(n, g, True) for n, g in zip(names, self.host_gpus, strict=True)
        )

        projects = leaf_projects(tree)
        self.known = set(projects)
        self.usage = make_usage(projects, config.lookback_s, config.half_life_s)
        if config.prior_usage:
            steps = sorted(
                (t, i, project, delta)
                for i, (project, start, end, gpus) in enumerate(config.prior_usage)
                for t, delta in ((start, float(gpus)), (min(end, 0.0), -float(gpus)))
                if end > start
            )
            for t, _, project, delta in steps:
                self.usage.add_rate(project, t, delta)

        # Per project: pending keys and workloads in within-project order.
        self.pkeys: dict[str, list[tuple[int, float, str, int]]] = {}
        self.pending: dict[str, list[Workload]] = {}
        self.pending_sizes: Counter[int] = Counter()
        self.n_pending = 0
        self.n_pending_alloc = 0

        self.jobs: list[ReplayJob] = []
        self.by_id: dict[str, int] = {}
        self.outcomes: list[JobOutcome] = []
        self.running: dict[int, RunningWorkload] = {}  # insertion order is deterministic
        self.n_unprotected = 0
        self.heap: list[tuple[float, int, int, int, int]] = []  # (t, kind, seq, job, token)
        self.ckpt_heap: list[tuple[float, int, int]] = []  # (next checkpoint, job, token)
        self.seq = 0
        self.intervals: list[RunInterval] = []
        self.preemptions: list[PreemptionRecord] = []
        self.drains: list[list[Any]] = []  # [host, start, ready]
        self.open_drain: dict[int, int] = {}  # host index -> index into drains
        self.capacity: list[tuple[float, int]] = []
        # when the replay starts: a run going on then is recorded from then on
        self.origin = -math.inf
        self.cycles = 0
        self.skipped = 0
        self.events = 0

    # -- pending queues -------------------------------------------------------------

    def _enqueue(self, j: ReplayJob, now: float) -> None:
        p = j.wl.project
        keys = self.pkeys.get(p)
        if keys is None:
            keys = self.pkeys[p] = []
            self.pending[p] = []
        i = bisect_left(keys, j.key)
        keys.insert(i, j.key)
        self.pending[p].insert(i, j.wl)
        self.pending_sizes[j.wl.gpus] += 1
        self.n_pending += 1
        if j.wl.min_runtime_s > 0:
            self.n_pending_alloc += 1
        j.out.pending_since_s = now

    def _dequeue(self, j: ReplayJob) -> None:
        p = j.wl.project
        keys = self.pkeys.get(p)
        i = bisect_left(keys, j.key) if keys else -1
        if keys is None or i >= len(keys) or keys[i] != j.key:
            raise ReplayError(f"engine started {j.wl.id}, which is not pending")
        del keys[i]
        del self.pending[p][i]
        if not keys:
            del self.pkeys[p]
            del self.pending[p]
        c = self.pending_sizes[j.wl.gpus] - 1
        if c:
            self.pending_sizes[j.wl.gpus] = c
        else:
            del self.pending_sizes[j.wl.gpus]
        self.n_pending -= 1
        if j.wl.min_runtime_s > 0:
            self.n_pending_alloc -= 1

    # -- events -----------------------------------------------------------------------

    def _push(self, t: float, kind: int, job: int, token: int) -> None:
        self.seq += 1
        heapq.heappush(self.heap, (t, kind, self.seq, job, token))

    def _set_health(self, now: float, host: str, healthy: bool) -> None:
        h = self.host_index.get(host)
        if h is None:
            raise ValueError(f"health event names unknown host {host!r}")
        if self.healthy[h] == healthy:
            return
        self.healthy[h] = healthy
        free, gpus = self.free[h], self.host_gpus[h]
        step = 1 if healthy else -1
        self.free_hist[free] += step
        if free == gpus:
            self.whole_free += step * gpus
        hosts = list(self.hosts_tuple)
        hosts[h] = Host(host, self.host_gpus[h], healthy)
        self.hosts_tuple = tuple(hosts)
        if healthy:
            self.open_drain.pop(h, None)  # repaired (or back) before it was empty: no ready time
        else:
            self.open_drain[h] = len(self.drains)
            self.drains.append([host, now, None])
        self._record_capacity(now)

    def _record_capacity(self, now: float) -> None:
        gpus = sum(g for g, ok in zip(self.host_gpus, self.healthy, strict=True) if ok)
        if self.capacity and self.capacity[-1][0] == now:
            self.capacity[-1] = (now, gpus)
        elif not self.capacity or self.capacity[-1][1] != gpus:
            self.capacity.append((now, gpus))

    # -- applying a plan ----------------------------------------------------------------

    def _set_free(self, h: int, free: int) -> None:
        old = self.free[h]
        self.free[h] = free
        if self.healthy[h]:
            gpus = self.host_gpus[h]
            self.free_hist[old] -= 1
            self.free_hist[free] += 1
            if old == gpus:
                self.whole_free -= gpus
            if free == gpus:
                self.whole_free += gpus

    def _start(
        self, now: float, job_id: str, placements: tuple[Placement, ...], allocated: bool
    ) -> None:
        idx = self.by_id.get(job_id)
        if idx is None:
            raise ReplayError(f"engine started unknown workload {job_id!r}")
        j = self.jobs[idx]
        if j.running:
            raise ReplayError(f"engine started {job_id}, which is already running")
        self._dequeue(j)
        hosts = self._occupy(idx, job_id, j.wl.gpus, placements)
        out = j.out
        out.waits_s.append(now - (out.pending_since_s if out.pending_since_s is not None else now))
        out.pending_since_s = None
        # a job moved in this cycle (stopped to be started elsewhere at once) was past
        # its protection: the move gives it none again
        moved = now if j.moved_at == now else None
        self._begin_run(now, idx, j, placements, hosts, allocated, now, j.remaining, moved)

    def _occupy(
        self, idx: int, job_id: str, gpus: int, placements: tuple[Placement, ...]
    ) -> tuple[int, ...]:
        """Mark the GPUs of `placements` busy with job `idx`; the indices of their hosts.
        ReplayError, with nothing marked, when they cannot take it (`_placement_fault`:
        a plan that fails here is a bug of the engine)."""
        fault = self._placement_fault(job_id, gpus, placements)
        if fault is not None:
            raise ReplayError(fault)
        hosts: list[int] = []
        for pl in placements:
            h = self.host_index[pl.host]
            for g in pl.gpu_indices:
                self.used[h] |= 1 << g
            self._set_free(h, self.free[h] - len(pl.gpu_indices))
            self.on_host[h].add(idx)
            hosts.append(h)
        return tuple(hosts)

    def _placement_fault(
        self, job_id: str, gpus: int, placements: tuple[Placement, ...]
    ) -> str | None:
        """Why the GPUs of `placements` cannot take job `job_id` of `gpus` GPUs now: an
        unknown or unhealthy host, a GPU out of range or busy (or named twice), another
        number of GPUs than `gpus`; None when they can."""
        taken: dict[int, int] = {}
        total = 0
        for pl in placements:
            h = self.host_index.get(pl.host)
            if h is None:
                return f"engine placed {job_id} on unknown host {pl.host!r}"
            if not self.healthy[h]:
                return f"engine placed {job_id} on unhealthy host {pl.host}"
            bits = 0
            for g in pl.gpu_indices:
                if not 0 <= g < self.host_gpus[h]:
                    return f"engine placed {job_id} on GPU {g} of {pl.host}"
                bits |= 1 << g
            busy = self.used[h] | taken.get(h, 0)
            if bits & busy or bin(bits).count("1") != len(pl.gpu_indices):
                return f"engine gave a busy GPU of {pl.host} to {job_id}"
            taken[h] = taken.get(h, 0) | bits
            total += len(pl.gpu_indices)
        if total != gpus:
            return f"engine gave {job_id} {total} GPUs, it asked for {gpus}"
        return None

    def _begin_run(
        self,
        now: float,
        idx: int,
        j: ReplayJob,
        placements: tuple[Placement, ...],
        hosts: tuple[int, ...],
        allocated: bool,
        started: float,
        need: float,
        protected_until_s: float | None,
    ) -> None:
        """Job `idx` runs on `placements` (already occupied) from `started` (`now`, or
        earlier for a run going on when the replay starts) until it has run `need`:
        its finish, protection end, checkpoint and idle events, usage and the running
        work the engine sees. `protected_until_s` (None: its minimum runtime from
        `started`) is the protection end of a run going on when the replay starts."""
        j.out.state = JobState.RUNNING
        self.seq += 1
        j.token = self.seq
        j.running = True
        j.run_start = started
        j.need = need
        j.placements = placements
        j.hosts = hosts
        j.allocated = allocated
        if not allocated:
            protected_until_s = None  # unallocated work is never protected
        if protected_until_s is None:
            protected_s = protection_s(j.wl, self.cap)
            guarded = allocated and j.wl.min_runtime_s > 0
            expires = protected_s < need
            expire_at = started + protected_s
        else:
            guarded = allocated and protected_until_s > now
            expires = protected_until_s < started + need
            expire_at = protected_until_s
        j.unprotected = not guarded
        if j.unprotected:
            self.n_unprotected += 1
        if allocated:
            self.usage.add_rate(j.wl.project, now, j.wl.gpus)
        self.running[idx] = RunningWorkload(
            workload=j.wl,
            placements=placements,
            started_s=started,
            allocated=allocated,
            protected_until_s=protected_until_s,
        )
        self._push(started + need, _FINISH, idx, j.token)
        if guarded and expires:
            self._push(expire_at, _EXPIRE, idx, j.token)
        if j.wl.resumable and self.ckpt > 0 and self.ckpt < need:
            heapq.heappush(self.ckpt_heap, (started + self.ckpt, idx, j.token))
        # With idle reclaim off the engine never reads an idle mark, and an event would
        # only bring a cycle of its own: a replay whose idle points differ (a preview
        # reads them from the recorded utilization, the back-fill from the profile)
        # would be cycled at other instants and drift from the history it replays.
        idle_after = j.spec.idle_after_s
        if self.config.idle_reclaim and idle_after is not None and 0.0 <= idle_after < need:
            self._push(max(now, started + idle_after), _IDLE, idx, j.token)

    def _resume_running(self, now: float) -> None:
        """Put the jobs already running when the replay starts (`TraceJob.running`) back
        on their GPUs at `now`, going on with the run they had: first those whose
        recorded placements are free, then the others where the engine would place them
        (`place_on_free`); one that finds no room waits from `now` like a new job."""
        later: list[int] = []
        for idx, j in enumerate(self.jobs):
            run = j.spec.running
            if run is None or j.out.state != JobState.PENDING:
                continue
            recorded = tuple(Placement(h, tuple(g)) for h, g in run.placements)
            if recorded and self._placement_fault(j.wl.id, j.wl.gpus, recorded) is None:
                self._resume(now, idx, j, recorded)
            else:
                later.append(idx)
        for idx in later:
            j = self.jobs[idx]
            free = [((1 << g) - 1) & ~u for g, u in zip(self.host_gpus, self.used, strict=True)]
            fit = place_on_free(self.hosts_tuple, free, j.wl.gpus)
            if fit is None:
                self._enqueue(j, now)
            else:
                self._resume(now, idx, j, fit)

    def _resume(
        self, now: float, idx: int, j: ReplayJob, placements: tuple[Placement, ...]
    ) -> None:
        """Job `idx` goes on at `now` with its run of `TraceJob.running` on `placements`:
        the run started then, so it needs the work left plus what it had run by `now`."""
        run = j.spec.running
        assert run is not None
        hosts = self._occupy(idx, j.wl.id, j.wl.gpus, placements)
        started = min(float(run.started_s), now)
        need = j.remaining + (now - started)
        j.out.pending_since_s = None
        allocated, until = bool(run.allocated), run.protected_until_s
        self._begin_run(now, idx, j, placements, hosts, allocated, started, need, until)

    def _idle(self, now: float, idx: int, j: ReplayJob, kind: int) -> None:
        """An idle event of running job `idx`: its GPUs go idle now (`_IDLE`: the engine
        sees `idle_since_s`; with idle reclaim on, a cycle is due once it has been idle
        long enough), or it has been idle long enough (`_IDLE_DUE`: the event alone
        brings the cycle)."""
        if kind != _IDLE:
            return
        rw = self.running[idx]
        self.running[idx] = RunningWorkload(
            workload=rw.workload,
            placements=rw.placements,
            started_s=rw.started_s,
            allocated=rw.allocated,
            last_checkpoint_s=rw.last_checkpoint_s,
            protected_until_s=rw.protected_until_s,
            idle_since_s=now,
        )
        if self.config.idle_reclaim:
            self._push(now + max(0.0, self.config.idle_reclaim_after_s), _IDLE_DUE, idx, j.token)

    def _release(self, now: float, idx: int, j: ReplayJob, reason: EndReason) -> None:
        """End the current run of job `idx`: free its GPUs, record the interval."""
        for pl, h in zip(j.placements, j.hosts, strict=True):
            bits = 0
            for g in pl.gpu_indices:
                bits |= 1 << g
            self.used[h] &= ~bits
            self._set_free(h, self.free[h] + len(pl.gpu_indices))
            self.on_host[h].discard(idx)
        del self.running[idx]
        if j.unprotected:
            self.n_unprotected -= 1
        if j.allocated:
            self.usage.add_rate(j.wl.project, now, -j.wl.gpus)
        self.intervals.append(
            RunInterval(
                job_id=j.wl.id,
                project=j.wl.project,
                kind=j.wl.kind,
                gpus=j.wl.gpus,
                hosts=tuple(self.host_names[h] for h in j.hosts),
                start_s=max(j.run_start, self.origin),
                end_s=now,
                allocated=j.allocated,
                end_reason=reason,
            )
        )
        j.running = False
        j.unprotected = False
        j.token = -1

    def _stop(self, now: float, job_id: str, reason_code: StopReason) -> None:
        idx = self.by_id.get(job_id)
        if idx is None or not self.jobs[idx].running:
            raise ReplayError(f"engine stopped {job_id!r}, which is not running")
        j = self.jobs[idx]
        code = str(reason_code)
        if code == StopReason.DRAIN:
            end = EndReason.DRAINED
        elif code == StopReason.HOST_DOWN:
            end = EndReason.HOST_DOWN
        else:
            end = EndReason.PREEMPTED
        ran = now - j.run_start
        resumable = j.wl.resumable
        saved = saved_work_s(ran, self.ckpt) if resumable else 0.0
        self.preemptions.append(
            PreemptionRecord(
                at_s=now,
                job_id=j.wl.id,
                project=j.wl.project,
                reason_code=code,
                lost_gpu_s=(ran - saved) * j.wl.gpus,
            )
        )
        need = j.need
        if code == StopReason.MIGRATE:
            j.moved_at = now
        self._release(now, idx, j, end)
        j.out.preemptions += 1
        if resumable:
            j.remaining = max(0.0, need - saved) + self.overhead
            j.out.state = JobState.PENDING
            self._enqueue(j, now)
        else:
            j.out.state = JobState.TERMINATED
            j.out.end_s = now

    def _refresh_checkpoints(self, now: float) -> None:
        """Give running resumable jobs whose checkpoint passed their new `last_checkpoint_s`."""
        heap = self.ckpt_heap
        ckpt = self.ckpt
        while heap and heap[0][0] <= now:
            due, idx, token = heapq.heappop(heap)
            j = self.jobs[idx]
            if j.token != token or not j.running:
                continue
            # `due` was reached whatever the rounding of the division says: taking the
            # later of the two, and stepping past `now`, always moves the next one forward
            # (a floor a hair short of `due` re-queued it at `now` for ever).
            last = max(due, j.run_start + math.floor((now - j.run_start) / ckpt) * ckpt)
            while last + ckpt <= now:
                last += ckpt
            self.running[idx] = checkpointed(self.running[idx], last)
            nxt = last + ckpt
            if nxt < j.run_start + j.need:
                heapq.heappush(heap, (nxt, idx, token))
