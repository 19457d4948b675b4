"""The fair-share pass (mode "fairshare", ours): who starts, in which order, and who
gives way.

1. Allocated jobs (min runtime > 0): projects in Fair Tree order, each project's
   pending list in its given order (priority, submit). A job starts in free GPUs
   (`Placer`), else on a reserved host it cannot delay (`Reservations.place`), else
   by preemption (`preemption`: idle work with idle reclaim on, unallocated work, work
   of projects it still outranks after the preemption, lower-priority work of its own
   project, all past their min runtime). The first job needing whole hosts that can start neither way gets hosts
   reserved. Projects with weight 0 run no allocated jobs.
2. Unallocated jobs (min runtime 0): same project order, free GPUs only (reserved
   hosts included: the job they are held for may preempt these at any time).

Bounded work per cycle: the scan skips jobs that provably cannot start (nothing free,
nothing this project may preempt, a failed search for a job no larger); failed
preemption searches are remembered for the cycle and capped by
`Policy.max_failed_preemption_searches`; later cycles retry.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from functools import partial

from scheduler.core.engine.blocks import Shape
from scheduler.core.engine.cluster import ClusterState, Decisions
from scheduler.core.engine.consolidate import for_cycle
from scheduler.core.engine.explain import FairShareReasons, fair_share_queue, no_block_note
from scheduler.core.engine.fairshare import compute_fair_share
from scheduler.core.engine.placement import Placer
from scheduler.core.engine.preemption import (
    PreemptibleWork,
    SearchResult,
    Victim,
    VictimIndex,
    apply_preemption,
    search_block,
    search_whole_hosts,
)
from scheduler.core.engine.reservations import SCAN_PER_PROJECT, Reservations
from scheduler.core.engine.runs import protection_end, protection_s
from scheduler.core.engine.share_floor import FloorRule, floor_jobs
from scheduler.core.engine.short_reserve import own_block, short_reserve_rule
from scheduler.core.engine.state import EngineState
from scheduler.core.engine.types import NO_QUEUE, CyclePlan, Placement, Policy, Snapshot, Workload
from scheduler.core.engine.victims import VictimsWhenNeeded

__all__ = ["FairShareCycle"]

INF = math.inf
# Outcomes of trying one allocated job.
_NEXT_JOB = 0
_NEXT_PROJECT = 1
_STOP = 2
_NO_SIZE = 1 << 30  # no block size failed yet


def _plural(n: int, word: str) -> str:
    return f"{n} {word}{'s' if n > 1 else ''}"


class FairShareCycle:
    """One fair-share cycle over a prepared cluster state."""

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
        self.cap = policy.max_min_runtime_s
        self.state = state
        self.cluster = cluster
        self.decisions = decisions
        fs = self.fair_share = compute_fair_share(
            snapshot.tree, snapshot.usage, policy.seed, state.trees
        )
        self.known = fs.tree.leaf_index
        order = list(fs.order)
        order.extend(sorted(p for p in snapshot.pending if p not in self.known))
        self.order = order
        self.rank = {p: i for i, p in enumerate(order)}
        self.entitled = fs.tree.entitled_by_key
        # idle reclaim's threshold (None: off)
        self.idle_after = policy.idle_reclaim_after_s if policy.idle_reclaim else None
        self.reasons = FairShareReasons(
            order, self.rank, self.entitled, snapshot.usage, policy, cluster.healthy_gpus, fs
        )
        self.floor = (
            floor_jobs(cluster.runs, self.entitled, self.reasons, cluster.healthy_gpus)
            if policy.share_floor
            else frozenset()
        )
        self.work = PreemptibleWork(
            cluster.candidates, decisions.stopped, self.rank, now, self.idle_after
        )
        self.placer = Placer(cluster, decisions, pack_by_project=True, avoid=snapshot.avoid)
        self._victims = VictimsWhenNeeded(
            cluster,
            decisions.stopped,
            self.rank,
            now,
            self.cap,
            state.victims,
            self.idle_after,
            self.floor,
        )
        self.reservations = Reservations(
            cluster,
            decisions,
            self.placer,
            self._victims,
            fs,
            self.reasons,
            now,
            self.cap,
            self.floor,
        )
        # Per project: usage added by this cycle's starts; the last rank threshold.
        self.charged: dict[str, float] = {}
        self.last_threshold: dict[str, int] = {}
        # (threshold, size) of failed preemption searches; with own victims, per project
        # (threshold, size, priority). A failure holds for no larger job at no higher
        # threshold (victims only get fewer).
        self.failures: list[tuple[int, int]] = []
        self.own_failures: dict[str, list[tuple[int, int, int]]] = {}
        self.reservations_left = max(0, policy.max_reservations)
        self.searches_left = policy.max_failed_preemption_searches

    def victims(self) -> VictimIndex:
        """The cycle's preemption candidates (built when first needed)."""
        return self._victims()

    def run(self) -> CyclePlan:
        """Both phases, then the explained queue."""
        pending = self.snapshot.pending
        policy = self.policy
        self.reservations.hold_for_short_jobs(
            policy.short_reserve_hosts,
            min(policy.short_job_max_s, self.cap),
            pending,
            short_reserve_rule(policy, self._head_job()),
        )
        for r, proj in enumerate(self.order):
            lst = pending.get(proj)
            if not lst or self.entitled.get(proj, 0.0) <= 0.0:
                continue
            if not self._allocated_jobs(r, proj, lst):
                break
        self._short_jobs_on_reserve()
        if policy.consolidate:  # at most one planned migration that frees a block
            for_cycle(self.reservations, self.reasons, pending)
        self.reservations.release_all()
        self._unallocated_jobs()
        queue = (
            fair_share_queue(
                self.reasons,
                pending,
                self.fair_share.factor,
                self.cluster,
                self.decisions,
                self.reservations.short_reserve_note,
                self.reservations.pending_ids,
            )
            if self.policy.explain_queue
            else NO_QUEUE
        )
        factor = self.fair_share.factor
        return self.decisions.plan(queue, tuple((p, factor.get(p, 0.0)) for p in self.order))

    def _head_job(self) -> Workload | None:
        """The first waiting allocated job of the fair-share order (of the first project
        with an entitlement and allocated work waiting; its first such job in its own
        order, among its first SCAN_PER_PROJECT), None when there is none."""
        pending = self.snapshot.pending
        for proj in self.order:
            lst = pending.get(proj)
            if not lst or self.entitled.get(proj, 0.0) <= 0.0:
                continue
            for w in lst[:SCAN_PER_PROJECT]:
                if w.min_runtime_s > 0:
                    return w
        return None

    # -- phase 1 ------------------------------------------------------------------------

    def _nothing_to_do(self, r: int, can_preempt_own: bool) -> bool:
        """Nothing free, no usable reserved room, nothing the project at order index `r`
        may preempt."""
        work = self.work
        return (
            not self.cluster.index.any_free()
            and work.open_gpus <= 0
            and work.max_rank <= r
            and not can_preempt_own
            and not self.reservations.usable()
        )

    def _allocated_jobs(self, r: int, proj: str, lst: Sequence[Workload]) -> bool:
        """Try the project's allocated jobs in order; False ends phase 1.

        Fast path: while nothing is free, no reserved host is usable and no job of the
        project may preempt its own jobs, a job can only start by preempting, and a
        failed search at a threshold <= r + 1 for a size <= its own proves it cannot.
        Such jobs are skipped with one comparison; the bounds are recomputed after every
        job that takes the full path."""
        if self._nothing_to_do(r, proj in self.work.own_min_priority):
            return True
        shape, cap, now = self.cluster.shape, self.cap, self.now
        host_sizes = self.cluster.host_sizes
        res = self.reservations
        top_prio = lst[0].priority  # lists come in priority order
        need = True
        bounds: tuple[int, bool, float, int, int] | None = None
        for w in lst:
            if w.min_runtime_s <= 0:
                continue
            if need:
                need = False
                bounds = self._skip_bounds(r, proj, top_prio)
                if bounds is not None and bounds[0] < 0:
                    break  # every job of this project would fail
                res_scan = bounds[4] if bounds is not None else -1
            if bounds is not None:
                dead, res_pre, res_t, res_blk, _ = bounds
                sh = shape(w.gpus)
                if (
                    (sh.block or sh.gpus) >= dead
                    and not (self.reservations_left and (sh.whole or sh.block in host_sizes))
                    and not (
                        res_pre and 0 < sh.block < res_blk and protection_end(w, now, cap) <= res_t
                    )
                ):
                    if res_pre:
                        res.scan_budget -= 1
                        res_scan -= 1
                        if not res_scan or res.scan_budget <= 0:
                            need = True  # re-check: reserved room may be spent
                            if not res_scan:
                                break
                    continue
            need = True
            outcome = self._try_allocated(w, r, proj)
            if outcome == _NEXT_PROJECT:
                break
            if outcome == _STOP:
                return False
        return True

    def _skip_bounds(
        self, r: int, proj: str, top_prio: int
    ) -> tuple[int, bool, float, int, int] | None:
        """Bounds of the fast path for the project at order index `r`, or None when every
        job takes the full path: (smallest size no search can serve (-1: give up on the
        project), room on reserved hosts possible, its latest protection end, its block
        bound, jobs left to look at for it (-1: no limit))."""
        if self.cluster.index.any_free() or self.reservations.usable():
            return None
        work = self.work
        own_min = work.own_min_priority.get(proj)
        if own_min is not None and own_min < top_prio:
            return None
        if work.open_gpus <= 0 and work.max_rank <= r:
            return (-1, False, -INF, 0, -1)  # nothing free and nothing it may preempt
        dead: float = INF
        if self.searches_left <= 0:
            dead = 0.0
        else:
            lo = r + 1 if work.max_rank > r else INF
            for threshold, size in self.failures:
                if threshold <= lo and size < dead:
                    dead = float(size)
        res_pre = self.reservations.preemptible()
        res_t, res_blk = -INF, 0
        if res_pre:
            res_t, res_blk = self.reservations.bound(r, proj)
            res_pre = res_blk > 1
        res_scan = -1
        if dead <= 1 and not self.reservations_left:
            if not res_pre:
                return (-1, False, -INF, 0, -1)  # every job of this project would fail
            # only room on a reserved host is left: look for it among the project's first
            # (highest-priority) jobs
            res_scan = SCAN_PER_PROJECT
        return (int(dead) if dead < INF else 1 << 62, res_pre, res_t, res_blk, res_scan)

    def _try_allocated(self, w: Workload, r: int, proj: str) -> int:
        """Start `w` (order index `r`) if it can start this cycle; else reserve hosts for
        it or note why it waits. Returns what the scan does next."""
        work = self.work
        own_min = work.own_min_priority.get(proj)
        can_own = own_min is not None and own_min < w.priority
        if self._nothing_to_do(r, can_own):
            return _NEXT_PROJECT  # in priority order: later jobs can preempt even less
        sh = self.cluster.shape(w.gpus)
        if sh.reason:
            self.decisions.note(w, sh.reason)
            return _NEXT_JOB
        charge = w.gpus * protection_s(w, self.cap)
        if self._start_without_preemption(w, sh, r, charge):
            return _NEXT_JOB
        total_charge = self.charged.get(proj, 0.0) + charge
        threshold = _Threshold(self, proj, r, total_charge)
        possible = self._search_possible(w, sh, r, proj, can_own, threshold)
        if possible:
            self.searches_left -= 1
            found = self._search(w, sh, proj, threshold, total_charge)
            if found is not None:
                self._start_by_preemption(w, sh, r, found, charge)
                return _NEXT_JOB
            # a job kept off some hosts fails for its own reason: not remembered for
            # every job of its size
            if not self.placer.avoided(w):
                self._remember_failure(proj, sh, w.priority, can_own, threshold())
        self._cannot_start(w, sh, r, total_charge, possible)
        if (
            self.searches_left <= 0
            and not self.reservations_left
            and not self.cluster.index.any_free()
            and not self.reservations.usable()
            and not self.reservations.preemptible()
        ):
            return _STOP  # no more work this cycle can do for allocated jobs
        return _NEXT_JOB

    def _start_without_preemption(self, w: Workload, sh: Shape, r: int, charge: float) -> bool:
        """Start `w` on free GPUs, or on a reserved host it cannot delay."""
        pls = self.placer.place_free(w, sh)
        if pls is not None:
            self._started(w, charge)
            self.decisions.start(w, pls, True, self.reasons.start(w, r, pls, "free GPUs"))
            return True
        c, res = self.cluster, self.reservations
        if not (c.reserved and sh.block and (res.usable() or res.preemptible())):
            return False
        got = res.place(w, r)
        if got is None:
            return False
        self._start_on_reserved(w, r, got, "GPUs of a reserved host it cannot delay", charge)
        return True

    def _start_on_reserved(
        self,
        w: Workload,
        r: int,
        got: tuple[tuple[Placement, ...], list[Victim]],
        how: str,
        charge: float,
    ) -> None:
        """Start `w` where `Reservations.place` found it room (`got`: its placements and
        the victims already stopped for it)."""
        pls, victims = got
        if victims:
            self.work.forget(victims)
            kind = "job" if any(v.allocated for v in victims) else "unallocated job"
            how += f", freed by preempting {_plural(len(victims), kind)}"
        self._started(w, charge)
        self.decisions.start(w, pls, True, self.reasons.start(w, r, pls, how))

    def _search_possible(
        self, w: Workload, sh: Shape, r: int, proj: str, can_own: bool, threshold: _Threshold
    ) -> bool:
        """Whether a preemption search for `w` may succeed (necessary conditions)."""
        work = self.work
        size = sh.block or sh.gpus
        possible = (
            work.open_gpus > 0 or can_own or (work.max_rank > r and work.max_rank >= threshold())
        )
        if possible and not can_own:
            for failed_at, failed_size in self.failures:
                if failed_size <= size and (failed_at <= r + 1 or failed_at <= threshold()):
                    return False
        elif possible:
            for failed_at, failed_size, failed_prio in self.own_failures.get(proj, ()):
                if (
                    failed_size <= size
                    and failed_prio >= w.priority
                    and (failed_at <= r + 1 or failed_at <= threshold())
                ):
                    return False
        if not possible or self.searches_left <= 0:
            return False  # bounded work per cycle; later cycles retry
        # Enough GPUs among free and allowed victims; for whole hosts, enough hosts that
        # could be emptied at all. O(log projects).
        room = self.cluster.free_gpus + work.open_gpus
        if can_own:
            room += work.own_gpus.get(proj, 0)
        if room < w.gpus and work.max_rank > r:
            room += work.allocated_gpus_from(threshold())
        return room >= w.gpus and (bool(sh.block) or self.victims().enough_coverable(sh))

    def _search(
        self, w: Workload, sh: Shape, proj: str, threshold: _Threshold, total_charge: float
    ) -> SearchResult:
        pidx = self.known.get(proj)
        beats = None if pidx is None else self.fair_share.still_above(pidx, total_charge)
        search = search_block if sh.block else search_whole_hosts
        floor = FloorRule(
            self.reasons, self.reasons.usage_relative_to_entitled_share(proj, total_charge)
        )
        avoid = self.placer.avoided(w)
        return search(self.victims(), sh, proj, w.priority, threshold, beats, floor, avoid)

    def _start_by_preemption(
        self,
        w: Workload,
        sh: Shape,
        r: int,
        found: tuple[list[tuple[int, int]], list[Victim]],
        charge: float,
    ) -> None:
        hosts, victims = found
        pls = apply_preemption(
            self.cluster,
            self.victims(),
            self.decisions,
            w,
            sh,
            hosts,
            victims,
            lambda v: self.reasons.victim(v, w, r),
        )
        self.work.forget(victims)
        self.searches_left += 1  # only failed searches count
        self._started(w, charge)
        how = f"GPUs freed by preempting {_plural(len(victims), 'job')}"
        self.decisions.start(w, pls, True, self.reasons.start(w, r, pls, how))

    def _remember_failure(
        self, proj: str, sh: Shape, priority: int, can_own: bool, threshold: int
    ) -> None:
        """The failure also holds for any threshold down to the next order index that
        still has preemptible jobs (counts only ever shrink)."""
        counts = self.work.count_at_rank
        t = threshold
        while t > 0 and not counts[t - 1]:
            t -= 1
        size = sh.block or sh.gpus
        if can_own:
            self.own_failures.setdefault(proj, []).append((t, size, priority))
        else:
            self.failures.append((t, size))

    def _cannot_start(
        self, w: Workload, sh: Shape, r: int, total_charge: float, searched: bool
    ) -> None:
        """Reserve hosts for the first job that needs them, or note why `w` waits."""
        if self.reservations_left and (sh.whole or sh.block in self.cluster.host_sizes):
            self.reservations_left -= 1
            self.reservations.reserve(w, sh, r, total_charge)
        elif self.cluster.index.any_free() or searched:
            size = sh.block or sh.gpus
            self.decisions.note(w, no_block_note(size))

    def _started(self, w: Workload, charge: float) -> None:
        self.charged[w.project] = self.charged.get(w.project, 0.0) + charge

    def _short_jobs_on_reserve(self) -> None:
        """The short jobs still waiting, in the fair-share order, on the short-job
        reserve's hosts: phase 1 looks at a bounded number of each project's jobs, and
        a short job may wait behind a long queue of its project's long work."""
        res = self.reservations
        k = res.short_k
        if k < 0 or not res.short_waiting:
            return
        started = self.decisions.started
        shape = self.cluster.shape
        for proj in self.order:
            lst = res.short_waiting.get(proj)
            if not lst or self.entitled.get(proj, 0.0) <= 0.0:
                continue
            r = self.rank[proj]
            # per project: what a job may take there depends on its project (never its
            # own project's work at its priority or above)
            failed = _NO_SIZE
            for w in lst:
                size = shape(w.gpus).block
                if w.id in started or not size or size >= failed:
                    continue
                how = "GPUs of the short-job reserve"
                got = res.place(w, r, k)
                if got is None:
                    how = "GPUs of its own project's longer work past its protection"
                    got = self._own_trade(w, r, size)
                if got is None:
                    failed = size  # no room for this size: none for larger ones
                    continue
                charge = w.gpus * protection_s(w, self.cap)
                self._start_on_reserved(w, r, got, how, charge)

    def _own_trade(
        self, w: Workload, r: int, p: int
    ) -> tuple[tuple[Placement, ...], list[Victim]] | None:
        """Room for short job `w` (order index `r`, block size `p`) that its own project
        gives: its longer allocated work past its protection on one host, on hosts no
        other reservation holds (`own_block`). The project's usage does not change with
        the trade, so no other project's share does: under overload a project's short
        jobs go before its own long work, not before other projects'. Only for a project
        that has had its share among its siblings (level fair share at most 1): an
        under-served project's short jobs outrank others' work in the fair-share pass."""
        fs = self.fair_share
        leaf = fs.tree.leaf_index.get(w.project)
        if leaf is None or fs.lf[leaf] > 1.0:
            return None
        c = self.cluster
        res = self.reservations
        victims = self.victims()
        reserved = c.reserved
        by_host = victims.by_host  # hosts without such work of its project give nothing
        hosts = {
            h: by_host[h]
            for h in victims.own_hosts(w.project)
            if reserved.get(h, res.short_k) == res.short_k
        }
        short_s = min(self.policy.short_job_max_s, self.cap)
        limit = INF if self.cap <= short_s else short_s
        found = own_block(w, p, hosts, c.free, c.gpus, limit)
        if found is None:
            return None
        h, s, chosen = found
        pls = apply_preemption(
            c,
            victims,
            self.decisions,
            w,
            c.shape(w.gpus),
            [(h, s)],
            chosen,
            partial(self.reasons.own_short_victim, w=w, r=r),
        )
        return pls, chosen

    # -- phase 2 ------------------------------------------------------------------------

    def _unallocated_jobs(self) -> None:
        """Unallocated work fills what is left, reserved hosts included."""
        c = self.cluster
        index, cnt = c.index, c.index.cnt
        shapes, shape = c.layout.shapes, c.shape  # known shapes read inline: every job
        pending = self.snapshot.pending
        for proj in self.order:
            if not index.any_free():
                break
            lst = pending.get(proj)
            if not lst:
                continue
            r = self.rank[proj]
            for w in lst:
                if w.min_runtime_s > 0:
                    continue
                sh = shapes.get(w.gpus) or shape(w.gpus)
                if sh.reason:
                    self.decisions.note(w, sh.reason)
                    continue
                if sh.block and not sh.whole and cnt[sh.block] <= 0:
                    if cnt[1] <= 0:
                        break  # nothing free (place_free would fail, as below)
                    continue  # no free aligned block of its size: place_free would fail
                pls = self.placer.place_free(w, sh)
                if pls is not None:
                    why = self.reasons.start(w, r, pls, "free GPUs (unallocated)")
                    self.decisions.start(w, pls, False, why)
                elif not index.any_free():
                    break


class _Threshold:
    """The lowest order index whose project the job's project would still outrank once
    its usage grows by `charge`: where its victims of other projects must rank.
    Computed only when first asked (an allocated victim of another project is seen)."""

    __slots__ = ("charge", "cycle", "project", "r", "value")

    def __init__(self, cycle: FairShareCycle, project: str, r: int, charge: float) -> None:
        self.cycle = cycle
        self.project = project
        self.r = r
        self.charge = charge
        work = cycle.work
        self.value = len(cycle.order) if work.max_rank <= r or project not in cycle.known else -1

    def __call__(self) -> int:
        if self.value < 0:
            # the threshold only grows with added usage: search from the last one
            last = self.cycle.last_threshold
            lo = max(self.r, last.get(self.project, self.r + 1) - 1)
            self.value = last[self.project] = self.cycle.fair_share.position_after(
                self.project, self.charge, lo
            )
        return self.value
