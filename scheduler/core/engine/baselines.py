"""The baselines, run through the same cluster state, placement and preemption code so
that comparisons are fair: `fifo`, `priority` (the old scheduler) and `static`.

- fifo: every job in arrival order (submit time) on free GPUs; no preemption.
- priority: jobs by priority across all projects; each project may hold GPUs up to its
  entitled share of the healthy cluster and is never preempted inside that limit; jobs
  beyond it run opportunistically and may be preempted by jobs inside their limits.
- static: jobs by priority, each project confined to its entitled share of the healthy
  GPUs (rounded down); no preemption.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence

from scheduler.core.engine.cluster import ClusterState, Decisions, RunInfo
from scheduler.core.engine.explain import baseline_queue
from scheduler.core.engine.fairshare import compile_tree
from scheduler.core.engine.placement import Placer
from scheduler.core.engine.preemption import (
    Victim,
    VictimIndex,
    apply_preemption,
    search_block,
    search_whole_hosts,
)
from scheduler.core.engine.state import EngineState
from scheduler.core.engine.types import (
    CyclePlan,
    Placement,
    Policy,
    Snapshot,
    StopReason,
    Workload,
)

__all__ = ["BaselineCycle", "by_arrival", "by_priority"]


def by_priority(pending: Mapping[str, Sequence[Workload]]) -> Iterable[Workload]:
    """Every pending job by priority (highest first), then submit time, then id."""
    lists = [pending[p] for p in sorted(pending) if pending[p]]
    return heapq.merge(*lists, key=lambda w: (-w.priority, w.submit_s, w.id))


def by_arrival(pending: Mapping[str, Sequence[Workload]]) -> Iterable[Workload]:
    """Every pending job by submit time, then id."""
    lists = []
    for p in sorted(pending):
        lst = pending[p]
        if not lst:
            continue
        if lst[0].priority != lst[-1].priority:
            lst = sorted(lst, key=lambda w: (w.submit_s, w.id))
        lists.append(lst)
    return heapq.merge(*lists, key=lambda w: (w.submit_s, w.id))


def _startable(
    pending: Mapping[str, Sequence[Workload]],
    limits: Mapping[str, int],
    used: Mapping[str, int],
    free_gpus: int,
) -> dict[str, list[Workload]]:
    """The static pass's jobs that could start, in their order: a static cycle stops
    nothing, so a project's room under its limit and the free GPUs only shrink while it
    runs, and a job larger than either now is skipped all cycle. Without the explained
    queue a skipped job leaves no trace (its note is not shown), so it is left out
    instead of walked: on an overloaded cluster the queue is many times what can start."""
    out: dict[str, list[Workload]] = {}
    for p, jobs in pending.items():
        room = min(limits.get(p, 0) - used.get(p, 0), free_gpus)
        if room > 0:
            kept = [w for w in jobs if w.gpus <= room]
            if kept:
                out[p] = kept
    return out


def _within_limits(
    pending: Mapping[str, Sequence[Workload]],
    limits: Mapping[str, float],
    in_use: Mapping[str, float],
) -> tuple[dict[str, list[Workload]], bool]:
    """The priority pass's jobs that fit inside their project's limit now, in their order,
    and whether any was left out. The GPUs a project holds inside its limit only grow
    while the pass runs (preemption stops opportunistic jobs, which are not counted), so
    a job beyond its limit now is skipped all cycle, and a skipped job leaves no trace
    but that the pass defers: it is left out instead of walked (on an overloaded cluster
    the queue is many times what can start, mostly of projects at their limit)."""
    out: dict[str, list[Workload]] = {}
    left_out = False
    for p, jobs in pending.items():
        held, bound = in_use.get(p, 0.0), limits.get(p, 0.0) + 1e-9
        kept = [w for w in jobs if held + w.gpus <= bound]
        if len(kept) < len(jobs):
            left_out = True
        if kept:
            out[p] = kept
    return out, left_out


def _walk_fitting(
    pending: Mapping[str, Sequence[Workload]], fits: Callable[[Workload], bool]
) -> Iterator[Workload]:
    """The jobs of `pending` in `by_priority`'s order, less those `fits` refuses when they
    come up. A refusal must last the pass (a project's room only shrinks while it runs),
    so a refused job's project's later jobs of its size are dropped with it, unseen: the
    pass walks what starts or is tried, not every job of a project at its limit."""
    runs: list[list[Workload]] = []
    for p in sorted(pending):
        by_size: dict[int, list[Workload]] = {}
        for w in pending[p]:
            same = by_size.get(w.gpus)
            if same is None:
                by_size[w.gpus] = [w]
            else:
                same.append(w)
        runs.extend(by_size.values())
    heap = [(-r[0].priority, r[0].submit_s, r[0].id, i, 0) for i, r in enumerate(runs)]
    heapq.heapify(heap)
    while heap:
        _, _, _, i, k = heap[0]
        run = runs[i]
        w = run[k]
        if not fits(w):
            heapq.heappop(heap)
            continue
        yield w
        if k + 1 < len(run):
            n = run[k + 1]
            heapq.heapreplace(heap, (-n.priority, n.submit_s, n.id, i, k + 1))
        else:
            heapq.heappop(heap)


class BaselineCycle:
    """One cycle of a baseline mode over a prepared cluster state."""

    def __init__(
        self,
        snapshot: Snapshot,
        policy: Policy,
        now: float,
        state: EngineState,
        cluster: ClusterState,
        decisions: Decisions,
    ) -> None:
        self.snapshot = snapshot
        self.policy = policy
        self.now = now
        self.state = state
        self.cluster = cluster
        self.decisions = decisions
        self.entitled = compile_tree(snapshot.tree, state.trees).entitled_by_key
        self.placer = Placer(cluster, decisions, pack_by_project=False, avoid=snapshot.avoid)
        self.static_limits: dict[str, int] = {}
        self._candidates: list[RunInfo] = []
        self._victims: VictimIndex | None = None

    def run(self) -> CyclePlan:
        """The mode's pass, then its explained queue."""
        mode = self.policy.mode
        pending = dict(self.snapshot.pending)
        if mode == "fifo":
            self._fifo(pending)
        elif mode == "static":
            self._static(pending)
        else:
            self._priority(pending)
        if not self.policy.explain_queue:
            return self.decisions.plan()
        ordered = by_arrival(pending) if mode == "fifo" else by_priority(pending)
        return self.decisions.plan(
            baseline_queue(ordered, mode, self.cluster, self.decisions, self.static_limits)
        )

    def _place(self, w: Workload) -> tuple[Placement, ...] | None:
        sh = self.cluster.shape(w.gpus)
        if sh.reason:
            self.decisions.note(w, sh.reason)
            return None
        return self.placer.place_free(w, sh)

    def _fifo(self, pending: Mapping[str, Sequence[Workload]]) -> None:
        for w in by_arrival(pending):
            if not self.cluster.index.any_free():
                break
            pls = self._place(w)
            if pls is not None:
                why = f"started on free GPUs in arrival order (fifo); submitted at {w.submit_s:.0f}"
                self.decisions.start(w, pls, w.allocated, why)

    def _static(self, pending: Mapping[str, Sequence[Workload]]) -> None:
        healthy_gpus = self.cluster.healthy_gpus
        limits = {p: math.floor(s * healthy_gpus + 1e-9) for p, s in self.entitled.items()}
        self.static_limits = limits
        used: dict[str, int] = {}
        stopped = self.decisions.stopped
        for rw, _, _, _, _ in self.cluster.runs:
            if rw.workload.id not in stopped:
                p = rw.workload.project
                used[p] = used.get(p, 0) + rw.workload.gpus
        ordered = by_priority(pending)
        if not self.policy.explain_queue:
            # Nothing notes a job at its limit, so such jobs are left out, not walked.
            ordered = _walk_fitting(
                _startable(pending, limits, used, self.cluster.free_gpus),
                lambda w: used.get(w.project, 0) + w.gpus <= limits.get(w.project, 0),
            )
        for w in ordered:
            if not self.cluster.index.any_free():
                break
            limit = limits.get(w.project, 0)
            if used.get(w.project, 0) + w.gpus > limit:
                self.decisions.note(
                    w, f"project {w.project} is at its static limit of {limit} GPUs"
                )
                continue
            pls = self._place(w)
            if pls is not None:
                used[w.project] = used.get(w.project, 0) + w.gpus
                why = f"started inside project {w.project}'s static limit of {limit} GPUs"
                self.decisions.start(w, pls, w.allocated, why)

    def _opportunistic(self, limits: Mapping[str, float]) -> tuple[dict[str, float], set[str]]:
        """GPUs each project holds inside its limit (its oldest runs first), and the ids of
        the runs beyond it (opportunistic)."""
        by_project: dict[str, list[tuple[float, str, int]]] = {}
        stopped = self.decisions.stopped
        for rw, _, _, _, _ in self.cluster.runs:
            w = rw.workload
            if w.id in stopped:
                continue
            by_project.setdefault(w.project, []).append((rw.started_s, w.id, w.gpus))
        in_use: dict[str, float] = {}
        beyond: set[str] = set()
        for p, runs in by_project.items():
            runs.sort(key=lambda x: (x[0], x[1]))
            held = 0
            limit = limits.get(p, 0.0)
            for _, wid, g in runs:
                if held + g <= limit + 1e-9:
                    held += g
                else:
                    beyond.add(wid)
            in_use[p] = held
        return in_use, beyond

    def _priority(self, pending: Mapping[str, Sequence[Workload]]) -> None:
        limits = {p: s * self.cluster.healthy_gpus for p, s in self.entitled.items()}
        in_use, beyond = self._opportunistic(limits)
        stopped = self.decisions.stopped
        # Only opportunistic jobs (beyond their project's limit) may be preempted.
        candidates: list[RunInfo] = [
            c
            for c in self.cluster.runs
            if c.run.workload.id in beyond
            and c.run.workload.id not in stopped
            and c.on_healthy_hosts
        ]
        self._candidates = candidates
        preemptible_gpus = sum(c.run.workload.gpus for c in candidates)
        inside, deferred = _within_limits(pending, limits, in_use)
        for w in by_priority(inside):
            free = self.cluster.index.any_free()
            if not free and preemptible_gpus <= 0:
                deferred = True
                break
            limit = limits.get(w.project, 0.0)
            if in_use.get(w.project, 0.0) + w.gpus > limit + 1e-9:
                deferred = True
                continue
            started, preempted = self._priority_start(w, limit, free, preemptible_gpus)
            preemptible_gpus -= preempted
            if started:
                in_use[w.project] = in_use.get(w.project, 0.0) + w.gpus
        if deferred:
            self._beyond_limits(pending)

    def _victim_index(self) -> VictimIndex:
        """The opportunistic jobs as preemption candidates (built when first needed)."""
        if self._victims is None:
            self._victims = VictimIndex(
                self.cluster,
                self._candidates,
                self.decisions.stopped,
                {},
                self.now,
                self.policy.max_min_runtime_s,
                self.state.victims,
                4 * len(self._candidates) + 1024,
            )
        return self._victims

    def _priority_start(
        self, w: Workload, limit: float, free: bool, preemptible_gpus: int
    ) -> tuple[bool, int]:
        """Start `w`, inside its project's limit, on free GPUs or by preempting
        opportunistic work. Returns (started, GPUs preempted)."""
        sh = self.cluster.shape(w.gpus)
        if sh.reason:
            self.decisions.note(w, sh.reason)
            return False, 0
        pls = self.placer.place_free(w, sh) if free else None
        how = "free GPUs"
        preempted = 0
        if pls is None and preemptible_gpus > 0:
            victims = self._victim_index()
            search = search_block if sh.block else search_whole_hosts
            found = search(victims, sh, None, 0, lambda: 0, avoid=self.placer.avoided(w))
            if found is not None:
                hosts, stopped = found
                pls = apply_preemption(
                    self.cluster,
                    victims,
                    self.decisions,
                    w,
                    sh,
                    hosts,
                    stopped,
                    lambda v: _opportunistic_stop(v, w),
                )
                preempted = sum(v.gpus for v in stopped)
                how = f"GPUs freed by preempting {len(stopped)} opportunistic job(s)"
        if pls is None:
            return False, preempted
        why = (
            f"started inside project {w.project}'s limit of {limit:.0f} GPUs on {how}; "
            "never preempted"
        )
        self.decisions.start(w, pls, w.allocated, why)
        return True, preempted

    def _beyond_limits(self, pending: Mapping[str, Sequence[Workload]]) -> None:
        """Fill what is left with jobs beyond their project's limit (preemptible)."""
        for w in by_priority(pending):
            if not self.cluster.index.any_free():
                break
            if w.id in self.decisions.started:
                continue
            pls = self._place(w)
            if pls is not None:
                why = (
                    f"started opportunistically beyond project {w.project}'s limit; "
                    "preemptible by jobs inside their limit"
                )
                self.decisions.start(w, pls, w.allocated, why)


def _opportunistic_stop(v: Victim, w: Workload) -> tuple[StopReason, str]:
    return StopReason.PRIORITY, (
        f"preempted: opportunistic job beyond project {v.project}'s GPU limit "
        f"gives way to job {w.id}, which is inside project {w.project}'s limit; " + v.lost_text()
    )
