"""Preemption: which running jobs a waiting job may stop, and the cheapest set to stop.

Decides, for one waiting job at a time:

- who may be preempted at all: `victim_allowed`, the one rule. Unallocated work
  (min runtime 0) always; idle work (idle reclaim on: GPUs idle for the policy's
  `idle_reclaim_after_s`, past its protection) always; a job of the preemptor's own project when its priority is
  lower; a job of another project only when the preemptor's project still ranks above
  that project *after* the preemptor's usage grows by what the new job will be
  charged, so that the victim's project could not preempt back at once (no
  preemption cycles; Kueue's "preemption without loops"). Protected jobs (inside
  their min runtime) are never candidates: `ClusterState.candidates` leaves them out.
- which victims to stop (`search_block`, `search_whole_hosts`): the GPUs that make
  room losing the fewest GPU-seconds of work on allocated victims, then on
  unallocated ones, then on idle ones, then the fewest victims, then the tightest
  fit: idle work goes first, before unallocated work and before every allocated job
  (its project's included). Reserved hosts are never used.

The candidates (`Victim`, `VictimIndex`, `PreemptibleWork`) are
`scheduler.core.engine.victims`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

from scheduler.core.engine.blocks import Shape
from scheduler.core.engine.cluster import ClusterState, Decisions
from scheduler.core.engine.fairshare import StillAbove
from scheduler.core.engine.share_floor import FloorRule
from scheduler.core.engine.types import Placement, StopReason, Workload
from scheduler.core.engine.victims import (
    ALLOCATED,
    IDLE,
    UNALLOCATED,
    PreemptibleWork,
    Victim,
    VictimIndex,
)

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
    victim_idle: bool = False,
) -> bool:
    """The rule of who may preempt whom (protection aside), written once.

    A job of `project` with `priority` may preempt: unallocated work; idle work
    (`victim_idle`: idle reclaim is on and its GPUs were idle long enough); work of its own
    project with a lower priority; work of another project that `outranks` says its
    project still ranks above once the new job runs (no preemption cycles).
    `project` None (the priority baseline) allows everything it is offered."""
    if not victim_allocated or victim_idle:
        return True
    if victim_project == project:
        return victim_priority < priority
    return outranks(victim_project)


# (hosts with the start of the block on each, victims) or None
SearchResult = tuple[list[tuple[int, int]], list[Victim]] | None
# A block's cost, compared as a tuple: lost work on allocated victims, on unallocated
# ones, on idle ones, the number of victims, free GPUs left on the host, host index,
# first GPU.
_BlockKey = tuple[float, float, float, int, int, int, int]


class _Allowed:
    """`victim_allowed` for one search, its verdict memoised: per project for victims of
    other projects (the rule reads their project only), per `Victim.rule_key` for the
    preemptor's own project. The rank threshold is computed only when first needed (an
    allocated victim of another project is seen). Hot loops read `verdicts` first and
    call `decide` on a miss."""

    __slots__ = (
        "beats",
        "floor_rule",
        "priority",
        "project",
        "rank",
        "threshold",
        "threshold_fn",
        "verdicts",
    )

    def __init__(
        self,
        project: str | None,
        priority: int,
        rank: dict[str, int],
        threshold_fn: Callable[[], int],
        beats: StillAbove | None,
        floor_rule: FloorRule | None = None,
    ) -> None:
        self.project = project
        self.floor_rule = floor_rule
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

    def spares(self, v: Victim) -> bool:
        """Whether guarded `v` is a floor job of another project that the preemptor
        may not take (None rule: none is taken)."""
        if not v.floor or v.project == self.project:
            return False
        rule = self.floor_rule
        return rule is None or not rule(v.project)

    def decide(self, v: Victim) -> bool:
        """The rule's verdict on allocated `v`, memoised."""
        ok = victim_allowed(
            v.allocated,
            v.project,
            v.priority,
            self.project,
            self.priority,
            self.outranks,
            v.tier == IDLE,
        )
        self.verdicts[v.rule_key if v.project == self.project else v.project] = ok
        return ok

    def __call__(self, v: Victim) -> bool:
        if not v.guarded:
            return True
        if v.floor and self.spares(v):
            return False
        ok = self.verdicts.get(v.rule_key if v.project == self.project else v.project)
        return self.decide(v) if ok is None else ok


def search_block(
    victims: VictimIndex,
    sh: Shape,
    project: str | None,
    priority: int,
    threshold_fn: Callable[[], int],
    beats: StillAbove | None = None,
    floor_rule: FloorRule | None = None,
    avoid: Sequence[int] = (),
) -> SearchResult:
    """Cheapest aligned block of one host for a single-host job of shape `sh`.

    Best first: victims are visited cheapest first and the search ends once the next
    victim alone costs at least the best block found (costs add up, so no later block
    can be cheaper). A block must contain the visited victim. `threshold_fn` gives the
    lowest order index of a project the preemptor may still outrank; `beats` whether
    it outranks a project after the preemption (None: any). No block lies on a host in
    `avoid` (hosts the cluster refused the job on) nor on a reserved host."""
    allowed = _Allowed(project, priority, victims.rank, threshold_fn, beats, floor_rule)
    verdicts, outranks = allowed.verdicts, allowed.outranks
    c = victims.cluster
    gpus, free = c.gpus, c.free
    reserved = _closed_hosts(c.reserved, avoid)
    largest_room = victims.largest_room
    p = sh.block
    best_key: _BlockKey | None = None
    best: SearchResult = None
    # the best block's lost work on allocated, unallocated and idle victims (inf: none yet)
    best_allocated = best_unallocated = best_idle = INF
    host_room: dict[int, _Room | None] = {}
    seen: set[tuple[int, int]] = set()
    for v in victims.cheapest_first():
        if not v.alive:
            continue
        # victims come cheapest first: once v alone costs at least the best block
        # (cost (lost, 0, 0) if allocated, (0, lost, 0) if unallocated, (0, 0, lost) if
        # idle, compared as tuples), nothing later can be cheaper
        if _costs_at_least(v.tier, v.lost, best_allocated, best_unallocated, best_idle):
            break
        if v.guarded:
            if v.floor and allowed.spares(v):
                continue
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
                best_allocated, best_unallocated, best_idle = best_key[:3]
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
                best_allocated, best_unallocated, best_idle = best_key[:3]
    return best


def _closed_hosts(reserved: dict[int, int], avoid: Sequence[int]) -> dict[int, int]:
    """The hosts a search must not use: the reserved ones, and those in `avoid`."""
    if not avoid:
        return reserved
    closed = dict(reserved)
    for h in avoid:
        closed.setdefault(h, -1)
    return closed


_Room = tuple[int, list[tuple[Victim, int]]]


def _costs_at_least(
    tier: int, lost: float, allocated: float, unallocated: float, idle: float
) -> bool:
    """Whether a victim of `tier` losing `lost` alone costs at least a block losing
    (`allocated`, `unallocated`, `idle`), compared as tuples (all >= 0)."""
    if tier == ALLOCATED:
        return lost > allocated or (lost == allocated and unallocated <= 0.0 and idle <= 0.0)
    if allocated > 0.0:
        return False
    if tier == UNALLOCATED:
        return lost > unallocated or (lost == unallocated and idle <= 0.0)
    return unallocated <= 0.0 and lost >= idle


def _tier_costs(tier: int, lost: float) -> tuple[float, float, float]:
    """A victim's lost work as (on allocated, on unallocated, on idle victims)."""
    if tier == ALLOCATED:
        return lost, 0.0, 0.0
    if tier == UNALLOCATED:
        return 0.0, lost, 0.0
    return 0.0, 0.0, lost


def _one_gpu_block(
    v: Victim, reserved: dict[int, int], free: list[int]
) -> tuple[_BlockKey, tuple[list[tuple[int, int]], list[Victim]]] | None:
    """The cheapest one-GPU block of victim `v` (cost key, (host and GPU, [v])): such a
    block holds `v` alone, so no room is computed; the host with the fewest free GPUs
    left, then the lowest host index and GPU (None: only on reserved hosts)."""
    lost_allocated, lost_unallocated, lost_idle = _tier_costs(v.tier, v.lost)
    best: tuple[_BlockKey, tuple[list[tuple[int, int]], list[Victim]]] | None = None
    for h, m in v.host_masks:
        if h in reserved:
            continue
        gpu = (m & -m).bit_length() - 1
        key = (lost_allocated, lost_unallocated, lost_idle, 1, free[h].bit_count(), h, gpu)
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
        if u.guarded and u is not v:
            if u.floor and allowed.spares(u):
                continue
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
        lost_allocated = lost_unallocated = lost_idle = 0.0
        chosen = []
        for u, mu in on:
            if mu & bm:
                chosen.append(u)
                tier = u.tier
                if tier == ALLOCATED:
                    lost_allocated += u.lost
                elif tier == UNALLOCATED:
                    lost_unallocated += u.lost
                else:
                    lost_idle += u.lost
        if free_left < 0:
            free_left = c.free[h].bit_count()
        key = (lost_allocated, lost_unallocated, lost_idle, len(chosen), free_left, h, s)
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
    floor_rule: FloorRule | None = None,
    avoid: Sequence[int] = (),
) -> SearchResult:
    """Cheapest whole hosts for a job of shape `sh` (all of them, or None): free hosts
    first, then hosts whose every job is an allowed victim, by lost work; never a host
    in `avoid` (hosts the cluster refused the job on)."""
    allowed = _Allowed(project, priority, victims.rank, threshold_fn, beats, floor_rule)
    c = victims.cluster
    gpus, free, full = c.gpus, c.free, c.full
    reserved = _closed_hosts(c.reserved, avoid)
    # Only hosts that all candidates together could empty can be emptied by the
    # allowed ones (a subset): the per-cycle coverable map prunes the rest.
    cov = victims.coverable_hosts()
    by_host = victims.by_host
    for size, n in sh.whole:
        cand: list[tuple[tuple[float, float, float, int, int], int, list[Victim]]] = [
            ((0.0, 0.0, 0.0, 0, h), h, [])
            for h in c.index.whole.get(size, {})
            if h not in reserved  # free whole hosts are never reserved; maybe avoided
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
            lost_allocated = sum(v.lost for v in live if v.tier == ALLOCATED)
            lost_unallocated = sum(v.lost for v in live if v.tier == UNALLOCATED)
            lost_idle = sum(v.lost for v in live if v.tier == IDLE)
            on = [v for v in live if v.mask_on(h)]
            cand.append(((lost_allocated, lost_unallocated, lost_idle, len(on), h), h, on))
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
