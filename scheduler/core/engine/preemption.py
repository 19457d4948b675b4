"""Preemption: which running jobs a waiting job may stop, and the cheapest set to stop.

Decides, for one waiting job at a time:

- who may be preempted at all: `victim_allowed`, the one rule. Unallocated work
  (min runtime 0) always; a job of the preemptor's own project when its priority is
  lower; a job of another project only when the preemptor's project still ranks above
  that project *after* the preemptor's usage grows by what the new job will be
  charged, so that the victim's project could not preempt back at once (no
  preemption cycles; Kueue's "preemption without loops"). Protected jobs (inside
  their min runtime) are never candidates: `ClusterState.candidates` leaves them out.
- which victims to stop (`search_block`, `search_whole_hosts`): the GPUs that make
  room losing the fewest GPU-seconds of work on allocated victims, then on
  unallocated ones, then the fewest victims, then the tightest fit. Reserved hosts
  are never used.

`VictimIndex` holds the cycle's candidates (per host, and cheapest first); `Victim`
objects are memoised across cycles in the caller's `EngineState`. `PreemptibleWork`
keeps O(1) counters of what may still be preempted, so the fair-share pass can skip
searches that cannot succeed.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Iterator, Sequence
from itertools import islice
from operator import attrgetter

from scheduler.core.engine.blocks import Shape
from scheduler.core.engine.cluster import ClusterState, Decisions, RunInfo
from scheduler.core.engine.fairshare import StillAbove
from scheduler.core.engine.runs import protected_until
from scheduler.core.engine.types import Placement, RunningWorkload, StopReason, Workload

__all__ = [
    "PreemptibleWork",
    "SearchResult",
    "Victim",
    "VictimIndex",
    "apply_preemption",
    "search_block",
    "search_whole_hosts",
    "victim_allowed",
]

INF = math.inf
_LOST = attrgetter("lost")
_ALLOCATED = attrgetter("allocated")

# A victim of another project may be preempted only if the preemptor's project still
# outranks it after the preemption: the caller's answer for a project key.
Outranks = Callable[[str], bool]


def victim_allowed(
    victim_allocated: bool,
    victim_project: str,
    victim_priority: int,
    project: str | None,
    priority: int,
    outranks: Outranks,
) -> bool:
    """The rule of who may preempt whom (protection aside), written once.

    A job of `project` with `priority` may preempt: unallocated work; work of its own
    project with a lower priority; work of another project that `outranks` says its
    project still ranks above once the new job runs (no preemption cycles).
    `project` None (the priority baseline) allows everything it is offered."""
    if not victim_allocated:
        return True
    if victim_project == project:
        return victim_priority < priority
    return outranks(victim_project)


class Victim:
    """A preemption candidate: a running job past its protection on healthy hosts."""

    __slots__ = (
        "alive",
        "allocated",
        "base",
        "gpus",
        "host_masks",
        "id",
        "lost",
        "priority",
        "project",
        "protected_until",
        "rank",
        "rule_key",
        "run",
    )

    def __init__(
        self,
        rw: RunningWorkload,
        host_masks: tuple[tuple[int, int], ...],
        now: float,
        cap: float,
    ) -> None:
        w = rw.workload
        self.run = rw
        self.id = w.id
        self.project = w.project
        self.gpus = w.gpus
        self.allocated = rw.allocated
        self.priority = w.priority
        self.protected_until = protected_until(rw, cap)
        base = rw.started_s
        if w.resumable and rw.last_checkpoint_s is not None:
            base = max(base, rw.last_checkpoint_s)
        self.base = base  # work since then is lost on preemption
        self.lost = w.gpus * max(0.0, now - base)  # GPU-seconds lost if stopped now
        self.host_masks = host_masks
        self.alive = True  # False once stopped in this cycle
        self.rank = 0  # fair-share order index of its project
        # what `victim_allowed` reads of it: searches memoise the rule's verdict by it
        self.rule_key = (rw.allocated, w.project, w.priority)

    def mask_on(self, h: int) -> int:
        """Its GPU mask on host `h` (0 if none)."""
        for hh, m in self.host_masks:
            if hh == h:
                return m
        return 0

    def lost_text(self) -> str:
        """How much work stopping it loses, in words."""
        return f"{self.lost / 3600:.1f} GPU-h of work since its last checkpoint is lost"


# (hosts with the start of the block on each, victims) or None
SearchResult = tuple[list[tuple[int, int]], list[Victim]] | None
# A block's cost, compared as a tuple: lost work on allocated victims, on unallocated
# ones, the number of victims, free GPUs left on the host, host index, first GPU.
_BlockKey = tuple[float, float, int, int, int, int]


class VictimIndex:
    """The cycle's preemption candidates per healthy host (with their GPU mask there)
    and in one list, cheapest first (unallocated by lost work, then allocated by lost
    work), for the best-first block search."""

    def __init__(
        self,
        cluster: ClusterState,
        candidates: Iterable[RunInfo],
        stopped: set[str],
        rank: dict[str, int],
        now: float,
        cap: float,
        memo: dict[int, Victim],
        memo_limit: int,
    ) -> None:
        self.cluster = cluster
        self.rank = rank
        by_host: dict[int, list[tuple[Victim, int]]] = {}
        nrank = len(rank)
        # Victim objects are kept across cycles by running-workload identity (the entry
        # holds the object, so its id stays unique); only their per-cycle fields
        # (alive, lost, rank) are reset here.
        if len(memo) > memo_limit:
            memo.clear()
        victims: list[Victim] = []
        for rw, host_masks, _, _, _ in candidates:
            if stopped and rw.workload.id in stopped:
                continue
            v = memo.get(id(rw))
            if v is None or v.run is not rw or v.host_masks is not host_masks:
                # host_masks: re-derived on a change of hosts or cap, so a kept Victim
                # never has stale host indices
                v = memo[id(rw)] = Victim(rw, host_masks, now, cap)
            else:
                v.alive = True
                lost = now - v.base
                v.lost = v.gpus * lost if lost > 0.0 else 0.0
            v.rank = rank.get(v.project, nrank)
            victims.append(v)
            for h, m in host_masks:
                lst = by_host.get(h)
                if lst is None:
                    by_host[h] = [(v, m)]
                else:
                    lst.append((v, m))
        # == sort by (allocated, lost), stable: two C-level key sorts
        victims.sort(key=_LOST)
        victims.sort(key=_ALLOCATED)
        self.by_host = by_host
        self._cheapest_first = victims
        self._dead = 0
        self._first_alive = 0  # victims before it in `_cheapest_first` are all stopped
        self._coverable: dict[int, int] | None = None
        self._largest_room: dict[int, int] = {}

    def cheapest_first(self) -> Iterator[Victim]:
        """The candidates cheapest first, from the first one not stopped (the cheapest
        are stopped first, so a cycle's stops gather at the front; stopped ones further
        on are dropped once they are many)."""
        victims = self._cheapest_first
        if self._dead * 4 > len(victims):
            victims = self._cheapest_first = [v for v in victims if v.alive]
            self._dead = 0
            self._first_alive = 0
        first, n = self._first_alive, len(victims)
        while first < n and not victims[first].alive:
            first += 1
        self._first_alive = first
        return islice(victims, first, None)

    def mark_stopped(self, victims: Sequence[Victim]) -> None:
        """Victims stopped by this cycle stay in the lists, marked dead."""
        self._dead += len(victims)
        for v in victims:
            v.alive = False

    def coverable_hosts(self) -> dict[int, int]:
        """Hosts (-> GPUs) that free GPUs plus all candidates could empty.

        Computed once per cycle; it stays a superset for the rest of the cycle: GPUs only
        become free by stopping candidates (already counted), reserved hosts are
        excluded by every user, and new work only makes hosts less coverable."""
        cov = self._coverable
        if cov is None:
            cov = {}
            c = self.cluster
            free, full, reserved, gpus = c.free, c.full, c.reserved, c.gpus
            for h, vs in self.by_host.items():
                m = free[h]
                for _, mu in vs:
                    m |= mu
                if m == full[h] and h not in reserved:
                    cov[h] = gpus[h]
            for g, d in c.index.whole.items():
                for h in d:
                    cov[h] = g
            self._coverable = cov
        return cov

    def largest_room(self, h: int) -> int:
        """The largest aligned block of host `h` that free GPUs and all its candidates
        could make, whoever preempts: an upper bound for the rest of the cycle (computed
        once per host, for the reason `coverable_hosts` gives), so that a search skips
        hosts where protected work leaves no room without looking at their victims."""
        largest = self._largest_room.get(h)
        if largest is None:
            room = self.cluster.free[h]
            for u, mu in self.by_host[h]:
                if u.alive:
                    room |= mu
            largest = self._largest_room[h] = self.cluster.largest_block(h, room)
        return largest

    def enough_coverable(self, sh: Shape) -> bool:
        """Whether enough hosts could be emptied for a whole-host job (upper bound)."""
        cov = self.coverable_hosts()
        touched = self.cluster.touched
        for size, n in sh.whole:
            if sum(1 for h, g in cov.items() if g == size and h not in touched) >= n:
                return True
        return False


class _Allowed:
    """`victim_allowed` for one search, its verdict memoised: per project for victims of
    other projects (the rule reads their project only), per `Victim.rule_key` for the
    preemptor's own project. The rank threshold is computed only when first needed (an
    allocated victim of another project is seen). Hot loops read `verdicts` first and
    call `decide` on a miss."""

    __slots__ = ("beats", "priority", "project", "rank", "threshold", "threshold_fn", "verdicts")

    def __init__(
        self,
        project: str | None,
        priority: int,
        rank: dict[str, int],
        threshold_fn: Callable[[], int],
        beats: StillAbove | None,
    ) -> None:
        self.project = project
        self.priority = priority
        self.rank = rank
        self.threshold_fn = threshold_fn
        self.beats = beats
        self.threshold = -1
        self.verdicts: dict[object, bool] = {}

    def outranks(self, other: str) -> bool:
        """Whether the preemptor's project still ranks above `other` after the
        preemption: `other` is at or below the rank threshold, and still beaten. The
        pair's cached bounds are read here as `FairShare.beats_after` reads them (this
        runs for every allocated victim's project a search meets: one call saved)."""
        if self.threshold < 0:
            self.threshold = self.threshold_fn()
        if self.rank.get(other, len(self.rank)) < self.threshold:
            return False
        beats = self.beats
        if beats is None:
            return True
        bounds = beats.bounds.get(other)
        if bounds is not None and beats.delta >= 0.0:
            if beats.delta < bounds[0]:
                return True
            if beats.delta > bounds[1]:
                return False
        return beats(other)

    def decide(self, v: Victim) -> bool:
        """The rule's verdict on allocated `v`, memoised."""
        ok = victim_allowed(
            v.allocated, v.project, v.priority, self.project, self.priority, self.outranks
        )
        self.verdicts[v.rule_key if v.project == self.project else v.project] = ok
        return ok

    def __call__(self, v: Victim) -> bool:
        if not v.allocated:
            return True
        ok = self.verdicts.get(v.rule_key if v.project == self.project else v.project)
        return self.decide(v) if ok is None else ok


def search_block(
    victims: VictimIndex,
    sh: Shape,
    project: str | None,
    priority: int,
    threshold_fn: Callable[[], int],
    beats: StillAbove | None = None,
) -> SearchResult:
    """Cheapest aligned block of one host for a single-host job of shape `sh`.

    Best first: victims are visited cheapest first and the search ends once the next
    victim alone costs at least the best block found (costs add up, so no later block
    can be cheaper). A block must contain the visited victim. `threshold_fn` gives the
    lowest order index of a project the preemptor may still outrank; `beats` whether
    it outranks a project after the preemption (None: any)."""
    allowed = _Allowed(project, priority, victims.rank, threshold_fn, beats)
    verdicts, outranks = allowed.verdicts, allowed.outranks
    c = victims.cluster
    gpus, reserved, free = c.gpus, c.reserved, c.free
    largest_room = victims.largest_room
    p = sh.block
    best_key: _BlockKey | None = None
    best: SearchResult = None
    # the best block's lost work on allocated and on unallocated victims (inf: none yet)
    best_allocated = best_unallocated = INF
    host_room: dict[int, _Room | None] = {}
    seen: set[tuple[int, int]] = set()
    for v in victims.cheapest_first():
        if not v.alive:
            continue
        # victims come cheapest first: once v alone costs at least the best block
        # (cost (lost, 0) if allocated, else (0, lost), compared as tuples), nothing
        # later can be cheaper
        lost = v.lost
        if v.allocated:
            if lost > best_allocated or (lost == best_allocated and best_unallocated <= 0.0):
                break
        elif best_allocated <= 0.0 and lost >= best_unallocated:
            break
        if v.allocated:
            key = v.rule_key if v.project == project else v.project
            ok = verdicts.get(key)
            if ok is None:
                # a verdict costs fair-share comparisons: first see whether any host of
                # v could hold the block at all (cheap, cached)
                for h, _ in v.host_masks:
                    if h not in reserved and largest_room(h) >= p:
                        break
                else:
                    continue
                ok = verdicts[key] = victim_allowed(
                    True, v.project, v.priority, project, priority, outranks
                )
            if not ok:
                continue
        if p == 1:
            one = _one_gpu_block(v, reserved, free)
            if one is not None and (best_key is None or one[0] < best_key):
                best_key, best = one
                best_allocated, best_unallocated = best_key[0], best_key[1]
            continue
        for h, m in v.host_masks:
            if h in reserved or gpus[h] < p:
                continue
            if h in host_room:
                room = host_room[h]
            elif largest_room(h) < p:
                room = host_room[h] = None
            else:
                room = host_room[h] = _host_room(victims, h, v, allowed, p)
            if room is None:
                continue
            found = _best_block_on(c, h, m, p, room, seen)
            if found is not None and (best_key is None or found[0] < best_key):
                best_key, best = found[0], ([(h, found[1])], found[2])
                best_allocated, best_unallocated = best_key[0], best_key[1]
    return best


_Room = tuple[int, list[tuple[Victim, int]]]


def _one_gpu_block(
    v: Victim, reserved: dict[int, int], free: list[int]
) -> tuple[_BlockKey, tuple[list[tuple[int, int]], list[Victim]]] | None:
    """The cheapest one-GPU block of victim `v` (cost key, (host and GPU, [v])): such a
    block holds `v` alone, so no room is computed; the host with the fewest free GPUs
    left, then the lowest host index and GPU (None: only on reserved hosts)."""
    lost_allocated, lost_unallocated = (v.lost, 0.0) if v.allocated else (0.0, v.lost)
    best: tuple[_BlockKey, tuple[list[tuple[int, int]], list[Victim]]] | None = None
    for h, m in v.host_masks:
        if h in reserved:
            continue
        gpu = (m & -m).bit_length() - 1
        key = (lost_allocated, lost_unallocated, 1, free[h].bit_count(), h, gpu)
        if best is None or key < best[0]:
            best = (key, ([(h, gpu)], [v]))
    return best


def _host_room(victims: VictimIndex, h: int, v: Victim, allowed: _Allowed, p: int) -> _Room | None:
    """GPUs of host `h` that are free or held by allowed victims, and those victims
    (`v`, already allowed, included); None when they hold no aligned p-block."""
    avail = victims.cluster.free[h]
    on = []
    verdicts, own, priority = allowed.verdicts, allowed.project, allowed.priority
    outranks = allowed.outranks
    for u, mu in victims.by_host[h]:
        if not u.alive:
            continue
        if u.allocated and u is not v:
            key = u.rule_key if u.project == own else u.project
            ok = verdicts.get(key)
            if ok is None:
                ok = verdicts[key] = victim_allowed(
                    True, u.project, u.priority, own, priority, outranks
                )
            if not ok:
                continue
        avail |= mu
        on.append((u, mu))
    if victims.cluster.largest_block(h, avail) < p:
        return None
    return avail, on


def _best_block_on(
    c: ClusterState,
    h: int,
    victim_mask: int,
    p: int,
    room: tuple[int, list[tuple[Victim, int]]],
    seen: set[tuple[int, int]],
) -> tuple[_BlockKey, int, list[Victim]] | None:
    """The cheapest p-block of host `h` inside `room` that overlaps `victim_mask`:
    (cost key, block start, victims), or None. Blocks in `seen` were costed before."""
    avail, on = room
    gh = c.gpus[h]
    pmask = (1 << p) - 1
    best: tuple[_BlockKey, int, list[Victim]] | None = None
    free_left = -1
    for s in range(0, gh - p + 1, p):
        bm = pmask << s
        if not bm & victim_mask or avail & bm != bm or (h, s) in seen:
            continue
        seen.add((h, s))
        lost_allocated = lost_unallocated = 0.0
        chosen = []
        for u, mu in on:
            if mu & bm:
                chosen.append(u)
                if u.allocated:
                    lost_allocated += u.lost
                else:
                    lost_unallocated += u.lost
        if free_left < 0:
            free_left = c.free[h].bit_count()
        key = (lost_allocated, lost_unallocated, len(chosen), free_left, h, s)
        if best is None or key < best[0]:
            best = (key, s, chosen)
    return best


def search_whole_hosts(
    victims: VictimIndex,
    sh: Shape,
    project: str | None,
    priority: int,
    threshold_fn: Callable[[], int],
    beats: StillAbove | None = None,
) -> SearchResult:
    """Cheapest whole hosts for a job of shape `sh` (all of them, or None): free hosts
    first, then hosts whose every job is an allowed victim, by lost work."""
    allowed = _Allowed(project, priority, victims.rank, threshold_fn, beats)
    c = victims.cluster
    gpus, reserved, free, full = c.gpus, c.reserved, c.free, c.full
    # Only hosts that all candidates together could empty can be emptied by the
    # allowed ones (a subset): the per-cycle coverable map prunes the rest.
    cov = victims.coverable_hosts()
    by_host = victims.by_host
    for size, n in sh.whole:
        cand: list[tuple[tuple[float, float, int, int], int, list[Victim]]] = [
            ((0.0, 0.0, 0, h), h, []) for h in c.index.whole.get(size, {})
        ]
        for h in cov:
            if h in reserved or gpus[h] != size:
                continue
            vs = by_host.get(h)
            if vs is None:
                continue
            vm = free[h]
            live = []
            for v, mu in vs:
                if v.alive and allowed(v):
                    live.append(v)
                    vm |= mu
            if not live or vm != full[h]:
                continue
            lost_allocated = sum(v.lost for v in live if v.allocated)
            lost_unallocated = sum(v.lost for v in live if not v.allocated)
            on = [v for v in live if v.mask_on(h)]
            cand.append(((lost_allocated, lost_unallocated, len(on), h), h, on))
        if len(cand) < n:
            continue
        cand.sort(key=lambda x: x[0])
        hosts = []
        chosen: dict[str, Victim] = {}
        for _, h, on in cand[:n]:
            hosts.append((h, 0))
            for v in on:
                chosen[v.id] = v
        return hosts, list(chosen.values())
    return None


def apply_preemption(
    cluster: ClusterState,
    victims: VictimIndex,
    decisions: Decisions,
    w: Workload,
    sh: Shape,
    hosts: list[tuple[int, int]],
    stopped: list[Victim],
    reason_of: Callable[[Victim], tuple[StopReason, str]],
) -> tuple[Placement, ...]:
    """Stop `stopped` for `w` and take its GPUs on `hosts`; returns its placements."""
    victims.mark_stopped(stopped)
    for v in stopped:
        code, why = reason_of(v)
        decisions.stop(v.run.workload, code, why, w.id)
        for h, m in v.host_masks:
            if cluster.healthy[h]:
                cluster.release(h, m)
    if sh.block:
        h, s = hosts[0]
        return (cluster.take_block(h, s, sh.gpus),)
    return tuple(cluster.take_whole(h) for h, _ in hosts)


class PreemptibleWork:
    """What the fair-share pass may still preempt, kept exact as victims are stopped:
    GPUs of unallocated candidates; per order index, allocated candidates and their
    GPUs; per project, its own candidates (count, GPUs, lowest priority: a bound)."""

    def __init__(
        self, candidates: Iterable[RunInfo], stopped: set[str], rank: dict[str, int]
    ) -> None:
        nproj = len(rank)
        self.unallocated_gpus = 0
        self.count_at_rank = [0] * (nproj + 1)
        self.gpus_at_rank = [0] * (nproj + 1)
        self.own_gpus: dict[str, int] = {}
        self.own_count: dict[str, int] = {}
        self.own_min_priority: dict[str, int] = {}
        self.max_rank = -1  # highest order index with a candidate (-1: none)
        own_gpus, own_count, own_min = self.own_gpus, self.own_count, self.own_min_priority
        unallocated = 0
        for rw, _, _, _, _ in candidates:
            w = rw.workload
            if stopped and w.id in stopped:
                continue
            if not rw.allocated:
                unallocated += w.gpus
                continue
            p = w.project
            g = own_gpus.get(p)
            if g is None:
                own_gpus[p] = w.gpus
                own_count[p] = 1
                own_min[p] = w.priority
            else:
                own_gpus[p] = g + w.gpus
                own_count[p] += 1
                if w.priority < own_min[p]:
                    own_min[p] = w.priority
        self.unallocated_gpus = unallocated
        for p, n in own_count.items():
            r = rank.get(p, nproj)
            self.count_at_rank[r] += n
            self.gpus_at_rank[r] += own_gpus[p]
            if r > self.max_rank:
                self.max_rank = r
        # a Fenwick tree over gpus_at_rank: the GPUs from an order index on in O(log n)
        tree = [0, *self.gpus_at_rank]
        for i in range(1, len(tree)):
            j = i + (i & -i)
            if j < len(tree):
                tree[j] += tree[i]
        self._gpus_tree = tree
        self._allocated_gpus = sum(self.gpus_at_rank)

    def allocated_gpus_from(self, r: int) -> int:
        """GPUs of allocated candidates at order index `r` or later (ranked lower):
        `sum(gpus_at_rank[r:])` in O(log n)."""
        tree = self._gpus_tree
        before = 0
        i = min(max(r, 0), len(tree) - 1)
        while i > 0:
            before += tree[i]
            i -= i & -i
        return self._allocated_gpus - before

    def forget(self, stopped: Sequence[Victim]) -> None:
        """Victims were stopped: they can be preempted no more."""
        for v in stopped:
            if not v.allocated:
                self.unallocated_gpus -= v.gpus
                continue
            self.count_at_rank[v.rank] -= 1
            self.gpus_at_rank[v.rank] -= v.gpus
            self._allocated_gpus -= v.gpus
            tree, i = self._gpus_tree, v.rank + 1
            while i < len(tree):
                tree[i] -= v.gpus
                i += i & -i
            self.own_gpus[v.project] -= v.gpus
            left = self.own_count[v.project] - 1
            if left:
                self.own_count[v.project] = left
            else:
                del self.own_count[v.project]
                self.own_min_priority.pop(v.project, None)
        m = self.max_rank
        while m >= 0 and not self.count_at_rank[m]:
            m -= 1
        self.max_rank = m
