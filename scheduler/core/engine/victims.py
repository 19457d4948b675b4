"""The cycle's preemption candidates: running jobs past their protection on healthy
hosts, as `Victim`s, indexed per host and cheapest first (`VictimIndex`), and O(1)
counters of what may still be preempted (`PreemptibleWork`), so that the fair-share
pass can skip searches that cannot succeed. `Victim` objects are memoised across
cycles in the caller's `EngineState`. Who may preempt whom, and the searches, are
`scheduler.core.engine.preemption`.

Candidates come in three tiers, cheapest first (`Victim.tier`): idle work (with
`Policy.idle_reclaim` on: GPUs idle for `idle_reclaim_after_s`, see
`scheduler.core.engine.runs.idle_reclaimable`), unallocated work, allocated work. Idle
and unallocated work is open to any allocated preemptor; allocated work is guarded by
the rule (`victim_allowed`).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from itertools import islice
from operator import attrgetter

from scheduler.core.engine.blocks import Shape
from scheduler.core.engine.cluster import ClusterState, RunInfo
from scheduler.core.engine.runs import idle_reclaimable, protected_until
from scheduler.core.engine.types import RunningWorkload

__all__ = [
    "ALLOCATED",
    "IDLE",
    "UNALLOCATED",
    "PreemptibleWork",
    "Victim",
    "VictimIndex",
    "blocks_in_room",
    "victim_tier",
]

_LOST = attrgetter("lost")
_TIER = attrgetter("tier")
# Victim tiers, cheapest first.
IDLE = 0
UNALLOCATED = 1
ALLOCATED = 2


def victim_tier(rw: RunningWorkload, now: float, idle_after_s: float | None) -> int:
    """The tier of candidate `rw` at `now` (`idle_after_s` None: idle reclaim off)."""
    if idle_after_s is not None and idle_reclaimable(rw, now, idle_after_s):
        return IDLE
    return ALLOCATED if rw.allocated else UNALLOCATED


class Victim:
    """A preemption candidate: a running job past its protection on healthy hosts.

    `allocated`: its run is charged; `tier` (IDLE, UNALLOCATED, ALLOCATED) orders the
    candidates, cheapest first; `guarded`: the rule decides who may take it (allocated
    work that is not idle), else any allocated preemptor may. Tier and guard are set
    each cycle (idleness grows with time)."""

    __slots__ = (
        "alive",
        "allocated",
        "base",
        "floor",
        "gpus",
        "guarded",
        "host_masks",
        "id",
        "lost",
        "priority",
        "project",
        "protected_until",
        "rank",
        "rule_key",
        "run",
        "tier",
    )

    def __init__(
        self,
        rw: RunningWorkload,
        host_masks: tuple[tuple[int, int], ...],
        now: float,
        cap: float,
        tier: int = -1,
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
        # -1: by its charge alone (idle reclaim off)
        self.tier = tier if tier >= 0 else (ALLOCATED if rw.allocated else UNALLOCATED)
        self.guarded = self.tier == ALLOCATED
        # on its project's share floor this cycle: no other project's fair-share
        # preemption takes it (`scheduler.core.engine.share_floor`)
        self.floor = False
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


class VictimIndex:
    """The cycle's preemption candidates per healthy host (with their GPU mask there)
    and in one list, cheapest first (by tier: idle, unallocated, allocated; in a tier by
    lost work), for the best-first block search."""

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
        idle_after_s: float | None = None,
        floor: frozenset[str] = frozenset(),
    ) -> None:
        """`idle_after_s`: idle reclaim's threshold (None: off, no idle tier); `floor`:
        the ids of the jobs on the share floor."""
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
                tier = victim_tier(rw, now, idle_after_s)
                v = memo[id(rw)] = Victim(rw, host_masks, now, cap, tier)
            else:
                v.alive = True
                lost = now - v.base
                v.lost = v.gpus * lost if lost > 0.0 else 0.0
                if idle_after_s is not None or v.tier == IDLE:
                    v.tier = victim_tier(rw, now, idle_after_s)
                    v.guarded = v.tier == ALLOCATED
            v.rank = rank.get(v.project, nrank)
            v.floor = v.id in floor
            victims.append(v)
            for h, m in host_masks:
                lst = by_host.get(h)
                if lst is None:
                    by_host[h] = [(v, m)]
                else:
                    lst.append((v, m))
        # == sort by (tier, lost), stable: two C-level key sorts
        victims.sort(key=_LOST)
        victims.sort(key=_TIER)
        self.by_host = by_host
        self._cheapest_first = victims
        self._dead = 0
        self._first_alive = 0  # victims before it in `_cheapest_first` are all stopped
        self._coverable: dict[int, int] | None = None
        self._largest_room: dict[int, int] = {}
        self._own_hosts: dict[str, list[int]] | None = None

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
        """Victims stopped by this cycle stay in the lists, marked dead (a change of
        each of their hosts: `ClusterState.changed_hosts`)."""
        self._dead += len(victims)
        changed = self.cluster.changed_hosts
        for v in victims:
            v.alive = False
            for h, _ in v.host_masks:
                changed.append(h)

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

    def own_hosts(self, project: str) -> list[int]:
        """The hosts (in `by_host` order) where `project` has allocated candidates that
        run on that host alone, stopped ones included (a superset for the cycle: built
        once)."""
        own = self._own_hosts
        if own is None:
            own = self._own_hosts = {}
            for h, on in self.by_host.items():
                for u, _ in on:
                    if u.allocated and len(u.host_masks) == 1:
                        hosts = own.setdefault(u.project, [])
                        if not hosts or hosts[-1] != h:
                            hosts.append(h)
        return own.get(project, [])

    def enough_coverable(self, sh: Shape) -> bool:
        """Whether enough hosts could be emptied for a whole-host job (upper bound)."""
        cov = self.coverable_hosts()
        touched = self.cluster.touched
        for size, n in sh.whole:
            if sum(1 for h, g in cov.items() if g == size and h not in touched) >= n:
                return True
        return False


class PreemptibleWork:
    """What the fair-share pass may still preempt, kept exact as victims are stopped:
    GPUs of open candidates (unallocated or idle: any allocated job may take them); per
    order index, guarded (allocated, not idle) candidates and their GPUs; per project,
    its own guarded candidates (count, GPUs, lowest priority: a bound)."""

    def __init__(
        self,
        candidates: Iterable[RunInfo],
        stopped: set[str],
        rank: dict[str, int],
        now: float = 0.0,
        idle_after_s: float | None = None,
    ) -> None:
        nproj = len(rank)
        self.open_gpus = 0
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
            if not rw.allocated or (
                idle_after_s is not None and idle_reclaimable(rw, now, idle_after_s)
            ):
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
        self.open_gpus = unallocated
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
        """GPUs of guarded candidates at order index `r` or later (ranked lower):
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
            if not v.guarded:
                self.open_gpus -= v.gpus
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


def blocks_in_room(
    free: int, on: Sequence[tuple[Victim, int]], host_gpus: int, p: int
) -> list[tuple[int, list[Victim]]]:
    """The aligned `p`-blocks of a host with `host_gpus` GPUs that its `free` mask and
    the masks of the victims `on` it cover: (block start, the victims inside it) each."""
    avail = free
    for _, mu in on:
        avail |= mu
    if p <= 0:
        raise ValueError(f"block size {p}: must be positive")
    pmask = (1 << p) - 1
    out: list[tuple[int, list[Victim]]] = []
    s = 0
    while s + p <= host_gpus:  # the block starts 0, p, 2p, ... (a while loop compiles
        # to plain arithmetic; a range with a variable step is a Python object)
        bm = pmask << s
        if avail & bm == bm:
            out.append((s, [u for u, mu in on if mu & bm]))
        s += p
    return out


class VictimsWhenNeeded:
    """The cycle's preemption candidates (`VictimIndex`), built on the first call. The
    cycle and its `Reservations` share this holder rather than a bound method of the
    cycle, so that a cycle's objects hold no reference cycle: they are freed when `plan`
    returns, not left to the garbage collector (whose full passes over a large
    cluster's leftovers cost more than a tenth of the cycle)."""

    def __init__(
        self,
        cluster: ClusterState,
        stopped: set[str],
        rank: dict[str, int],
        now: float,
        cap: float,
        memo: dict[int, Victim],
        idle_after: float | None,
        floor: frozenset[str],
    ) -> None:
        self.cluster = cluster
        self.stopped = stopped
        self.rank = rank
        self.now = now
        self.cap = cap
        self.memo = memo
        self.idle_after = idle_after
        self.floor = floor
        self._index: VictimIndex | None = None

    def __call__(self) -> VictimIndex:
        v = self._index
        if v is None:
            c = self.cluster
            v = self._index = VictimIndex(
                c,
                c.candidates,
                self.stopped,
                self.rank,
                self.now,
                self.cap,
                self.memo,
                4 * len(c.candidates) + 1024,
                self.idle_after,
                self.floor,
            )
        return v
