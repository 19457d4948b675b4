"""Cluster state of one cycle: hosts, free GPUs, running work and what the cycle decided.

Decides nothing: it answers "which GPUs are free, where does each running job sit,
which jobs are past their protection" and records the cycle's starts and stops.

- `HostLayout`: per-host arrays that depend only on the hosts (index, GPUs, health,
  full masks, healthy hosts by size, job shapes); kept in the caller's `EngineState`
  while the caller passes the same hosts tuple.
- `RunInfo`: what the engine derives from one running workload (its hosts and GPU
  masks, whether all its hosts are healthy, when its protection ends); memoised per
  workload object in `RunMemo`, which also keeps the last cycle's used-GPU masks so
  the next cycle only applies the difference of the two running sets.
- `ClusterState`: the cycle's free masks (bit i = GPU i free), the `FreeIndex`, the
  hosts held for reservations, and `take`/`release` that keep them consistent.
- `Decisions`: the starts, stops, reservations, ready hosts and per-job notes.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from itertools import compress
from typing import NamedTuple

from scheduler.core.engine.blocks import BlockTable, FreeIndex, MaskTable, Shape
from scheduler.core.engine.runs import protected_until
from scheduler.core.engine.types import (
    NO_QUEUE,
    CyclePlan,
    ExplainedQueue,
    Host,
    HostReady,
    Placement,
    Reservation,
    RunningWorkload,
    Snapshot,
    Start,
    Stop,
    StopReason,
    Workload,
)

__all__ = [
    "UNALLOCATED",
    "AllocatedRun",
    "ClusterState",
    "Decisions",
    "HostLayout",
    "RunInfo",
    "RunMemo",
]

INF = math.inf
# Host-packing key of unallocated work (no project key can be empty).
UNALLOCATED = ""
# The memo of derived running-job data is rebuilt from scratch beyond this size.
_MAX_MEMO_RUNS = 200_000


class HostLayout:
    """Per-host arrays of a hosts sequence, and the job shapes they allow."""

    __slots__ = (
        "full",
        "good_sizes",
        "gpus",
        "healthy",
        "healthy_by_size",
        "healthy_gpus",
        "healthy_sizes",
        "host_index",
        "host_sizes",
        "hosts",
        "shapes",
    )

    def __init__(self, hosts: Sequence[Host]) -> None:
        self.hosts = hosts
        self.gpus = [h.gpus for h in hosts]
        self.healthy = [h.healthy for h in hosts]
        self.host_index = {h.name: i for i, h in enumerate(hosts)}
        self.full = [(1 << g) - 1 for g in self.gpus]  # every GPU of the host
        self.healthy_sizes = [g for g, ok in zip(self.gpus, self.healthy, strict=True) if ok]
        self.healthy_gpus = sum(self.healthy_sizes)
        self.host_sizes = set(self.healthy_sizes)
        self.shapes: dict[int, Shape] = {}
        self.healthy_by_size: dict[int, list[int]] = {}
        for h, (g, ok) in enumerate(zip(self.gpus, self.healthy, strict=True)):
            if ok:
                self.healthy_by_size.setdefault(g, []).append(h)
        self.good_sizes: set[int] | None = None

    def shape(self, gpus: int) -> Shape:
        """How a job of `gpus` GPUs can be placed on the healthy hosts (all hosts when
        none is healthy)."""
        sh = self.shapes.get(gpus)
        if sh is None:
            sh = self.shapes[gpus] = Shape(gpus, self.healthy_sizes or self.gpus)
        return sh

    def runnable_sizes(self) -> set[int]:
        """Job sizes (GPUs) that can run on this cluster at all."""
        good = self.good_sizes
        if good is None:
            good = self.good_sizes = set()
            sizes = self.healthy_sizes or self.gpus
            top = max(sizes or [0])
            for g in range(1, top + 1):  # single-host sizes; larger ones are checked per job
                if not self.shape(g).reason:
                    good.add(g)
            for g in set(sizes):
                k = 2
                while not self.shape(g * k).reason:
                    good.add(g * k)
                    k += 1
        return good


class AllocatedRun(NamedTuple):
    """What the reservation scan reads of an allocated running job."""

    project: str
    priority: int
    workload_id: str
    hosts: tuple[int, ...]
    project_priority: tuple[str, int]  # (project, priority): a ready-made memo key


class RunInfo(NamedTuple):
    """A running workload as the engine sees it."""

    run: RunningWorkload
    host_masks: tuple[tuple[int, int], ...]  # (host index, GPU mask) per placement
    on_healthy_hosts: bool
    protected_until: float  # -inf for unallocated work
    allocated: AllocatedRun | None  # None for unallocated work


# The last cycle's running workloads (in the caller's order) and their RunInfo, used mask
# per host, free mask per host (0 on unhealthy ones), free GPUs on healthy hosts.
LastRunning = tuple[list[RunningWorkload], list[RunInfo], list[int], list[int], int]
# A cycle's RunInfo per running workload (in order), used and free masks, free GPUs, and
# whether two placements overlap (the state is then not kept for the next cycle).
Loaded = tuple[list[RunInfo], list[int], list[int], int, bool]


class RunMemo:
    """Derived data of running workloads, by object identity, plus the last cycle's
    used-GPU masks (valid while the hosts, their health and the min-runtime cap stay).

    A memo entry holds its workload object, so the object's id stays unique while the
    entry lives; objects are immutable, so an entry never goes stale."""

    __slots__ = ("derived", "key", "last")

    def __init__(self) -> None:
        self.derived: dict[int, RunInfo] = {}
        self.key: tuple[object, float, list[bool], dict[str, int]] | None = None
        self.last: LastRunning | None = None

    def follow(self, layout: HostLayout, cap: float) -> None:
        """Forget everything unless the hosts, their health and the cap are unchanged."""
        key = self.key
        if (
            key is None
            or key[0] is not layout.hosts
            or key[1] != cap
            or (key[2] is not layout.healthy and key[2] != layout.healthy)
            or (key[3] is not layout.host_index and key[3] != layout.host_index)
        ):
            self.derived = {}
            self.last = None
            self.key = (layout.hosts, cap, layout.healthy, layout.host_index)
        elif len(self.derived) > _MAX_MEMO_RUNS:
            self.derived = {}
            self.last = None


def derive_run(rw: RunningWorkload, layout: HostLayout, cap: float, masks: MaskTable) -> RunInfo:
    """The engine's view of one running workload."""
    host_index, healthy = layout.host_index, layout.healthy
    host_masks = []
    ok = True
    for pl in rw.placements:
        h = host_index.get(pl.host, -1)
        if h < 0:
            raise ValueError(f"running {rw.workload.id} is on unknown host {pl.host!r}")
        host_masks.append((h, masks[pl.gpu_indices]))
        ok = ok and healthy[h]
    w = rw.workload
    if rw.allocated:
        until = protected_until(rw, cap)
        info = AllocatedRun(
            w.project, w.priority, w.id, tuple(h for h, _ in host_masks), (w.project, w.priority)
        )
        return RunInfo(rw, tuple(host_masks), ok, until, info)
    return RunInfo(rw, tuple(host_masks), ok, -INF, None)


class ClusterState:
    """Free GPUs and running work of one cycle; `take`/`release` keep the free masks,
    the free-GPU count and the index consistent."""

    def __init__(
        self,
        snapshot: Snapshot,
        layout: HostLayout,
        cap: float,
        now: float,
        memo: RunMemo,
        blocks: BlockTable,
        masks: MaskTable,
        index: FreeIndex | None = None,
    ) -> None:
        self.layout = layout
        self.hosts = layout.hosts
        self.host_index = layout.host_index
        self.gpus = layout.gpus
        self.healthy = layout.healthy
        self.full = layout.full
        self.healthy_gpus = layout.healthy_gpus
        self.host_sizes = layout.host_sizes
        self.healthy_by_size = layout.healthy_by_size
        self.shape = layout.shape
        self.blocks = blocks
        self.index = FreeIndex(layout.gpus, blocks) if index is None else index  # empty
        self.free: list[int] = []  # free mask of each healthy host (0 on unhealthy ones)
        self.free_gpus = 0  # free GPUs on healthy hosts (reserved ones included)
        self.reserved: dict[int, int] = {}  # host -> reservation number
        self.version = 0  # bumped on every change of free GPUs or reservations
        # the hosts whose free GPUs or candidates changed, once per change, in order
        # (`take`, `release`, `VictimIndex.mark_stopped`): what a search derived from a
        # host holds until the host is logged again
        self.changed_hosts: list[int] = []
        self.touched: set[int] = set()  # hosts that got new work this cycle
        self.runs: list[RunInfo] = []
        self.candidates: list[RunInfo] = []  # past protection, on healthy hosts only
        self.on_unhealthy: list[RunInfo] = []  # with a placement on an unhealthy host
        self._load(snapshot.running, cap, now, memo, masks)

    def _load(
        self,
        running: Sequence[RunningWorkload],
        cap: float,
        now: float,
        memo: RunMemo,
        masks: MaskTable,
    ) -> None:
        """Derive every running job (memoised) and the free masks: from the previous
        cycle's by the jobs that started and ended since, when they are few, else from
        scratch."""
        memo.follow(self.layout, cap)
        last, memo.last = memo.last, None
        loaded = None
        if last is not None:
            loaded = self._apply_changes_in_order(last, running, cap, memo, masks)
            if loaded is None:
                loaded = self._apply_difference(last, running, cap, memo, masks)
        if loaded is None:
            loaded = self._from_scratch(running, cap, memo, masks)
        runs, used, free, free_gpus, overlap = loaded
        self.runs = runs
        if not overlap:
            memo.last = (list(running), runs, used.copy(), free.copy(), free_gpus)
        self.candidates = [c for c in runs if c.protected_until <= now and c.on_healthy_hosts]
        if not all(self.healthy):
            self.on_unhealthy = [c for c in runs if not c.on_healthy_hosts]
        self.free = free  # owned by this cycle: the memo keeps a copy
        self.free_gpus = free_gpus
        index = self.index
        for h in compress(range(len(free)), free):  # only hosts with free GPUs (a few)
            index.set(h, free[h])

    def _apply_changes_in_order(
        self,
        last: LastRunning,
        running: Sequence[RunningWorkload],
        cap: float,
        memo: RunMemo,
        masks: MaskTable,
    ) -> Loaded | None:
        """The last cycle's state changed by what started and ended since, found by one
        walk of both running lists side by side: a caller that keeps its running jobs in
        a stable order (the simulator, which replaces an entry in place and adds new
        ones at the end) differs from the last cycle only where jobs ended or started.
        None when the order changed (or a job is listed twice): `_apply_difference`
        finds the changes by set difference then."""
        old_running, old_runs, used, free, free_gpus = last
        derived = memo.derived
        n_old = len(old_running)
        runs: list[RunInfo] = []
        gone: list[RunInfo] = []
        started: list[RunInfo] = []
        i = 0
        for rw in running:
            if i < n_old and old_running[i] is rw:
                runs.append(old_runs[i])
                i += 1
                continue
            if id(rw) in derived:
                # a job of the last cycle further on: those before it have ended (the
                # memo holds its objects, so an id there is of the same object)
                while i < n_old and old_running[i] is not rw:
                    gone.append(old_runs[i])
                    i += 1
                if i == n_old:
                    return None  # not further on: the order changed
                runs.append(old_runs[i])
                i += 1
                continue
            c = derived[id(rw)] = derive_run(rw, self.layout, cap, masks)
            started.append(c)
            runs.append(c)
        gone.extend(old_runs[i:])
        if len(gone) + len(started) >= len(runs):
            return self._from_scratch(running, cap, memo, masks)
        return self._changed(used, free, free_gpus, runs, gone, started, memo)

    def _apply_difference(
        self,
        last: LastRunning,
        running: Sequence[RunningWorkload],
        cap: float,
        memo: RunMemo,
        masks: MaskTable,
    ) -> Loaded | None:
        """The last cycle's state changed by the set difference of the two running
        sets (any order); None when the changes are many (from scratch is cheaper) or a
        job is listed twice."""
        ids = list(map(id, running))
        current = set(ids)
        if len(current) != len(ids):
            return None  # the same object twice
        old_running, _, used, free, free_gpus = last
        old = set(map(id, old_running))
        gone_ids = old - current
        new_ids = current - old
        if len(gone_ids) + len(new_ids) >= len(ids):
            return None
        derived = memo.derived
        gone = [derived[i] for i in gone_ids]
        started = []
        by_id: dict[int, RunningWorkload] | None = None
        for i in new_ids:
            c = derived.get(i)
            if c is None:
                if by_id is None:
                    by_id = dict(zip(ids, running, strict=True))
                c = derived[i] = derive_run(by_id[i], self.layout, cap, masks)
            started.append(c)
        runs = list(map(derived.__getitem__, ids))
        return self._changed(used, free, free_gpus, runs, gone, started, memo)

    def _changed(
        self,
        used: list[int],
        free: list[int],
        free_gpus: int,
        runs: list[RunInfo],
        gone: list[RunInfo],
        started: list[RunInfo],
        memo: RunMemo,
    ) -> Loaded:
        """The last cycle's used and free masks (owned by the memo, which gave them up)
        with the `gone` jobs' GPUs released and the `started` ones' taken."""
        derived = memo.derived
        full, healthy = self.full, self.healthy
        changed: set[int] = set()
        overlap = False
        for c in gone:
            del derived[id(c.run)]
            for h, m in c.host_masks:
                used[h] &= ~m
                changed.add(h)
        for c in started:
            for h, m in c.host_masks:
                if used[h] & m:
                    overlap = True
                used[h] |= m
                changed.add(h)
        for h in changed:  # only hosts whose used GPUs changed are recomputed
            if healthy[h]:
                f = full[h] & ~used[h]
                free_gpus += f.bit_count() - free[h].bit_count()
                free[h] = f
        return runs, used, free, free_gpus, overlap

    def _from_scratch(
        self, running: Sequence[RunningWorkload], cap: float, memo: RunMemo, masks: MaskTable
    ) -> Loaded:
        old = memo.derived
        derived: dict[int, RunInfo] = {}  # only the current jobs: the memo stays bounded
        runs = []
        used = [0] * len(self.gpus)
        overlap = len(set(map(id, running))) != len(running)  # the same object twice
        for rw in running:
            c = old.get(id(rw))
            if c is None or c.run is not rw:
                c = derive_run(rw, self.layout, cap, masks)
            derived[id(rw)] = c
            runs.append(c)
            for h, m in c.host_masks:
                if used[h] & m:
                    overlap = True
                used[h] |= m
        memo.derived = derived
        free = [0] * len(used)
        free_gpus = 0
        for h, ok in enumerate(self.healthy):
            if ok:
                f = self.full[h] & ~used[h]
                free[h] = f
                free_gpus += f.bit_count()
        return runs, used, free, free_gpus, overlap

    def release(self, h: int, m: int) -> None:
        """GPUs `m` of host `h` become free (a stop)."""
        self.version += 1
        self.changed_hosts.append(h)
        self.free_gpus += (m & ~self.free[h]).bit_count()
        f = self.free[h] | m
        self.free[h] = f
        if h not in self.reserved:
            self.index.set(h, f)

    def take(self, h: int, m: int) -> None:
        """GPUs `m` of host `h` get new work (a start)."""
        self.version += 1
        self.changed_hosts.append(h)
        self.free_gpus -= (m & self.free[h]).bit_count()
        f = self.free[h] & ~m
        self.free[h] = f
        self.touched.add(h)
        self.index.set(h, 0 if h in self.reserved else f)

    def take_block(self, h: int, start: int, gpus: int) -> Placement:
        """Take `gpus` GPUs of host `h` from `start` on."""
        self.take(h, ((1 << gpus) - 1) << start)
        return Placement(self.hosts[h].name, tuple(range(start, start + gpus)))

    def take_whole(self, h: int) -> Placement:
        """Take every GPU of host `h`."""
        self.take(h, self.full[h])
        return Placement(self.hosts[h].name, tuple(range(self.gpus[h])))

    def best_start(self, h: int, block: int) -> int:
        """Start of the best free aligned `block` on host `h` (it must have one)."""
        return self.blocks[self.gpus[h], self.free[h]][1][block]

    def largest_block(self, h: int, mask: int) -> int:
        """The largest aligned power-of-two block inside `mask` on host `h`."""
        return self.blocks[self.gpus[h], mask][0]


class Decisions:
    """What one cycle decided: starts, stops, reservations, ready hosts, and notes
    that explain why particular jobs wait."""

    def __init__(self) -> None:
        self.starts: list[Start] = []
        self.stops: list[Stop] = []
        self.reservations: list[Reservation] = []
        self.ready: list[HostReady] = []
        self.started: set[str] = set()
        self.stopped: set[str] = set()
        self.start_project: dict[str, str] = {}  # workload id -> packing key
        self.notes: dict[str, str] = {}  # workload id -> why it waits (job-specific)
        self.noted_projects: set[str] = set()  # projects with such notes
        self.started_projects: set[str] = set()
        self.short_reserve: tuple[str, ...] = ()  # hosts held for short jobs (names)

    def start(
        self, w: Workload, placements: tuple[Placement, ...], allocated: bool, why: str
    ) -> None:
        """Start `w` on `placements`; `allocated` runs are charged to its project."""
        self.start_project[w.id] = w.project if allocated else UNALLOCATED
        self.started.add(w.id)
        self.started_projects.add(w.project)
        self.starts.append(
            Start(workload_id=w.id, placements=placements, allocated=allocated, reason=why)
        )

    def stop(self, w: Workload, code: StopReason, why: str, for_id: str | None) -> None:
        """Stop running `w` (requeued by the caller when resumable)."""
        self.stopped.add(w.id)
        self.stops.append(
            Stop(
                workload_id=w.id,
                reason_code=code,
                reason=why,
                requeue=w.resumable,
                for_workload_id=for_id,
            )
        )

    def note(self, w: Workload, text: str) -> None:
        """Say why `w` waits (shown in its queue entry)."""
        self.notes[w.id] = text
        self.noted_projects.add(w.project)

    def plan(
        self, queue: ExplainedQueue = NO_QUEUE, order: tuple[tuple[str, float], ...] = ()
    ) -> CyclePlan:
        """The cycle's plan."""
        return CyclePlan(
            starts=tuple(self.starts),
            stops=tuple(self.stops),
            reservations=tuple(self.reservations),
            hosts_ready=tuple(self.ready),
            queue=queue,
            project_order=order,
            short_reserve=self.short_reserve,
        )
