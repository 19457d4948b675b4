"""Consolidation (issue 24): a planned migration that merges free pieces into a block
for a waiting job.

When an allocated job waits that fits in the free GPUs in total but in no host, a few
running jobs may stand between it and a block: jobs on one host, past their
protection, resumable, on no other host. Consolidation stops them and starts them
again at once in free pieces of other hosts, in the same cycle, and starts the waiting
job in the block they leave. The engine plans it only when

- every job it moves is past its protection (a min-runtime contract is never broken),
  resumable, has saved work at a checkpoint of its current run (so a job just moved
  does not move again before its next checkpoint), on one healthy host, and starts
  again in this cycle (all moved jobs fit elsewhere, or nothing moves);
- the waiting job could not start on free GPUs or by preemption this cycle (it is
  still waiting when the pass runs: phases 1 and the reserve have had their turn);
- the work the moved jobs lose (since their last checkpoint, plus the restart
  overhead, times their GPUs) is less than the GPU-time the move puts to work over
  one checkpoint interval (the waiting job's GPUs: the moved jobs keep running);
- reserved hosts are neither taken nor filled (a waiting job's own excepted);
- the short-job reserve holds a host this cycle (else free pieces are the short jobs'
  room: on a small cluster the reserve holds no host while short work is light).

A move is not a new run for protection: the caller starts the moved job again with
the protection it had (over; the simulator passes `protected_until_s`), so a job
of a project that fair share or a short job would preempt stays preemptible.

Bounded per cycle: at most one consolidation, `MAX_JOBS` waiting jobs looked at (one
per block shape) and `MAX_TRIES` trial placements per job; the per-host run lists are
built only when some waiting job could use it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import NamedTuple

from scheduler.core.engine.blocks import Shape, mask_of
from scheduler.core.engine.cluster import ClusterState, Decisions, RunInfo
from scheduler.core.engine.explain import FairShareReasons
from scheduler.core.engine.placement import Placer, block_host, whole_hosts
from scheduler.core.engine.reservations import SCAN_PER_PROJECT, Reservations
from scheduler.core.engine.types import Placement, StopReason, Workload

__all__ = [
    "MAX_JOBS",
    "MAX_TRIES",
    "Consolidation",
    "consolidate",
    "for_cycle",
    "waiting_allocated",
]

MAX_JOBS = 4  # waiting jobs (distinct shapes) looked at per cycle
MAX_TRIES = 16  # cheapest candidate blocks tried per waiting job
MAX_MOVED = 4  # running jobs moved for one block


class Consolidation(NamedTuple):
    """A planned migration: `moved` runs (their new placements) and the waiting job's."""

    workload: Workload
    placements: tuple[Placement, ...]
    moved: tuple[tuple[RunInfo, Placement], ...]
    cost_gpu_s: float


class _Block(NamedTuple):
    cost: float
    hosts: tuple[int, ...]
    start: int  # aligned start of the block (0 for whole hosts)
    moved: tuple[RunInfo, ...]


def for_cycle(
    res: Reservations,
    reasons: FairShareReasons,
    pending: Mapping[str, Sequence[Workload]],
) -> Workload | None:
    """`consolidate` in a fair-share cycle (before the reserved hosts are released) for
    the allocated jobs still waiting: the job it started (its reservation, if any,
    dropped), or None. Only while the short-job reserve holds a host: otherwise the
    free pieces are where the next short job starts (a small cluster, whose reserve
    holds a host only while its short work nearly fills one)."""
    if res.short_k < 0:
        return None  # the short-job reserve holds no host: free pieces are short jobs' room
    policy, rank, now = reasons.policy, reasons.rank, res.now
    cluster, decisions, placer = res.cluster, res.decisions, res.placer
    waiting = waiting_allocated(reasons.order, pending, reasons.entitled, decisions.started)
    held_for = {h: res.held[k].job.id for h, k in cluster.reserved.items() if k != res.short_k}

    def why(w: Workload, pls: tuple[Placement, ...]) -> str:
        how = "a block freed by moving jobs past their protection to other hosts"
        return reasons.start(w, rank[w.project], pls, how)

    done = consolidate(
        cluster,
        decisions,
        placer,
        waiting,
        now,
        policy.checkpoint_interval_s,
        policy.restart_overhead_s,
        held_for,
        why,
    )
    if done is None:
        return None
    w = done.workload
    decisions.reservations = [x for x in decisions.reservations if x.workload_id != w.id]
    decisions.notes.pop(w.id, None)
    return w


def waiting_allocated(
    order: Sequence[str],
    pending: Mapping[str, Sequence[Workload]],
    entitled: Mapping[str, float],
    started: set[str],
) -> Iterator[Workload]:
    """The allocated jobs still waiting, in the fair-share `order` (each project's first
    `SCAN_PER_PROJECT`, projects with an entitled share only)."""
    for proj in order:
        lst = pending.get(proj)
        if not lst or entitled.get(proj, 0.0) <= 0.0:
            continue
        for w in lst[:SCAN_PER_PROJECT]:
            if w.min_runtime_s > 0 and w.id not in started:
                yield w


def _loss_s(info: RunInfo, now: float, overhead: float) -> float:
    """Seconds of work a run loses when stopped now and restarted (since its last
    checkpoint, plus the restart overhead)."""
    rw = info.run
    saved = rw.last_checkpoint_s if rw.last_checkpoint_s is not None else rw.started_s
    return max(0.0, now - saved) + overhead


Tables = tuple[list[list[RunInfo]], list[int]]


def _by_host(cluster: ClusterState, stopped: set[str], now: float) -> Tables:
    """Per host: its movable running jobs and the mask of GPUs they hold (a block is
    free to take when each of its GPUs is free or held by one of them). Jobs on the
    share floor move too: a moved job starts again at once, so its project keeps its
    GPUs (the floor keeps them from fair-share preemption, not from a move)."""
    n = len(cluster.gpus)
    runs: list[list[RunInfo]] = [[] for _ in range(n)]
    movable_mask = [0] * n
    for info in cluster.runs:
        if info.run.workload.id in stopped:
            continue
        w = info.run.workload
        movable = (
            len(info.host_masks) == 1
            and info.on_healthy_hosts
            and w.resumable
            and info.protected_until <= now
            and info.run.last_checkpoint_s is not None
        )
        if movable:
            h, m = info.host_masks[0]
            runs[h].append(info)
            movable_mask[h] |= m
    return runs, movable_mask


def consolidate(
    cluster: ClusterState,
    decisions: Decisions,
    placer: Placer,
    waiting: Iterable[Workload],
    now: float,
    horizon_s: float,
    overhead_s: float,
    held_for: Mapping[int, str],
    start_reason: Callable[[Workload, tuple[Placement, ...]], str],
) -> Consolidation | None:
    """Plan at most one consolidation for the first of `waiting` (allocated jobs in the
    fair-share order, still waiting) that one can serve; apply it to `cluster` and
    `decisions` and return it (None: nothing pays or fits). `held_for`: the reserved
    hosts and the job each is held for (a job may take its own, no job another's)."""
    index = cluster.index
    if not index.any_free():
        return None
    free_total = sum(index.nfree)
    tables: Tables | None = None
    seen: set[tuple[int, int]] = set()
    looked = 0
    for w in waiting:
        if looked >= MAX_JOBS:
            break
        if w.id in decisions.started:
            continue
        own = {h for h, wid in held_for.items() if wid == w.id}
        if w.gpus > free_total + sum(cluster.free[h].bit_count() for h in own):
            continue  # it does not fit in the free GPUs in total
        sh = cluster.shape(w.gpus)
        if sh.reason:
            continue
        key = (sh.block, sh.hosts_needed if not sh.block else 0)
        if key in seen:
            continue
        seen.add(key)
        looked += 1
        if block_host(index, sh) >= 0 or whole_hosts(index, sh) is not None:
            continue  # free GPUs fit it (it waits for another reason)
        if tables is None:
            tables = _by_host(cluster, decisions.stopped, now)
        found = _for_job(cluster, placer, w, sh, tables, own, now, horizon_s, overhead_s)
        if found is not None:
            _apply(cluster, decisions, found, start_reason)
            return found
    return None


def _blocks(
    cluster: ClusterState,
    placer: Placer,
    w: Workload,
    sh: Shape,
    tables: Tables,
    own: set[int],
    now: float,
    overhead_s: float,
) -> list[_Block]:
    """Candidate blocks for `w`, cheapest first: one aligned block on one host, or
    single whole hosts (combined by the caller), each freed by moving movable work."""
    runs, movable_mask = tables
    free = cluster.free
    avoided = placer.avoided(w)
    out: list[_Block] = []
    size = sh.block
    for h, g in enumerate(cluster.gpus):
        if not cluster.healthy[h] or (h in cluster.reserved and h not in own) or h in avoided:
            continue
        if size:
            if g < size:
                continue
            spans = [(s, ((1 << size) - 1) << s) for s in range(0, g - size + 1, size)]
        elif any(g == hs for hs, _ in sh.whole):
            spans = [(0, cluster.full[h])]
        else:
            continue
        for s, region in spans:
            if region & ~(free[h] | movable_mask[h]):
                continue  # held by work that may not move (or started this cycle)
            moved = tuple(i for i in runs[h] if i.host_masks[0][1] & region)
            if not moved or len(moved) > MAX_MOVED:
                continue
            cost = sum(_loss_s(i, now, overhead_s) * i.run.workload.gpus for i in moved)
            out.append(_Block(cost, (h,), s, moved))
    out.sort(key=lambda b: (b.cost, b.hosts))
    return out


def _for_job(
    cluster: ClusterState,
    placer: Placer,
    w: Workload,
    sh: Shape,
    tables: Tables,
    own: set[int],
    now: float,
    horizon_s: float,
    overhead_s: float,
) -> Consolidation | None:
    """The cheapest consolidation that serves `w` and pays, or None."""
    gain = w.gpus * horizon_s
    cands = _blocks(cluster, placer, w, sh, tables, own, now, overhead_s)
    # whole hosts: the cheapest hosts of one size, with the wholly free ones
    tries = [[b] for b in cands[:MAX_TRIES]] if sh.block else _whole_sets(cluster, sh, cands, own)
    for chosen in tries:
        cost = sum(b.cost for b in chosen)
        if cost >= gain:
            break  # cheapest first: no later set pays either
        moved = [i for b in chosen for i in b.moved]
        if len(moved) > MAX_MOVED:
            continue
        targets = {h for b in chosen for h in b.hosts}
        new = _trial(cluster, placer, moved, targets, own)
        if new is None:
            continue
        pls = _target_placements(cluster, sh, chosen)
        return Consolidation(w, pls, tuple(zip(moved, new, strict=True)), cost)
    return None


def _whole_sets(
    cluster: ClusterState, sh: Shape, cands: Sequence[_Block], own: set[int]
) -> list[list[_Block]]:
    """For a whole-host shape: per host size, its wholly free unreserved hosts (and its
    own reserved ones) plus the cheapest candidate hosts of that size to make up the
    count (one set per size)."""
    out: list[list[_Block]] = []
    whole = cluster.index.whole
    for size, n in sh.whole:
        free_hosts = [h for h in whole.get(size, {}) if h not in cluster.reserved]
        free_hosts += sorted(
            h for h in own if cluster.gpus[h] == size and cluster.free[h] == cluster.full[h]
        )
        need = n - len(free_hosts)
        if need <= 0:
            continue  # place_free would have found them
        mine = [b for b in cands if cluster.gpus[b.hosts[0]] == size][:need]
        if len(mine) < need:
            continue
        free_blocks = [_Block(0.0, (h,), 0, ()) for h in free_hosts]
        out.append(mine + free_blocks)
    out.sort(key=lambda s: sum(b.cost for b in s))
    return out


def _trial(
    cluster: ClusterState,
    placer: Placer,
    moved: Sequence[RunInfo],
    targets: set[int],
    own: set[int],
) -> list[Placement] | None:
    """New placements for every moved run in free GPUs off `targets` (best fit, largest
    first; the waiting job's own reserved hosts count as free), or None when one does
    not fit; the free index is left as it was."""
    index = cluster.index
    saved: dict[int, int] = {}
    for h in targets | own:
        saved[h] = index.free[h]
        index.set(h, 0 if h in targets else cluster.free[h])
    order = sorted(range(len(moved)), key=lambda k: -moved[k].run.workload.gpus)
    got: dict[int, Placement] = {}
    try:
        for k in order:
            w = moved[k].run.workload
            sh = cluster.shape(w.gpus)
            hidden = [h for h in placer.avoided(w) if h not in saved and index.free[h]]
            masks = [(h, index.free[h]) for h in hidden]
            for h in hidden:
                index.set(h, 0)
            h2 = index.find_block(sh.block) if sh.block else -1
            for h, m in masks:
                index.set(h, m)
            if h2 < 0:
                return None
            if h2 not in saved:
                saved[h2] = index.free[h2]
            got[k] = Placement(cluster.hosts[h2].name, index.take_block(h2, sh.block, w.gpus))
    finally:
        for h, m in saved.items():
            index.set(h, m)
    return [got[k] for k in range(len(moved))]


def _target_placements(
    cluster: ClusterState, sh: Shape, chosen: Sequence[_Block]
) -> tuple[Placement, ...]:
    """Where the waiting job goes once the moved runs have left (not yet taken)."""
    if sh.block:
        b = chosen[0]
        h = b.hosts[0]
        return (Placement(cluster.hosts[h].name, tuple(range(b.start, b.start + sh.gpus))),)
    hosts = sorted(h for b in chosen for h in b.hosts)
    return tuple(Placement(cluster.hosts[h].name, tuple(range(cluster.gpus[h]))) for h in hosts)


def _apply(
    cluster: ClusterState,
    decisions: Decisions,
    c: Consolidation,
    start_reason: Callable[[Workload, tuple[Placement, ...]], str],
) -> None:
    """Stop the moved runs, start them again where the trial put them, start the job."""
    w = c.workload
    for info, pl in c.moved:
        rw = info.run
        h, m = info.host_masks[0]
        decisions.stop(
            rw.workload,
            StopReason.MIGRATE,
            f"moved to {pl.host} (restarted at once from its last checkpoint) so that "
            f"waiting job {w.id} of project {w.project} gets a whole block",
            w.id,
        )
        cluster.release(h, m)
    for info, pl in c.moved:
        rw = info.run
        cluster.take(cluster.host_index[pl.host], mask_of(pl.gpu_indices))
        decisions.start(
            rw.workload,
            (pl,),
            rw.allocated,
            f"restarted on {pl.host}[{pl.gpu_indices[0]}-{pl.gpu_indices[-1]}]: moved to "
            f"free a block for waiting job {w.id}",
        )
    for pl in c.placements:
        cluster.take(cluster.host_index[pl.host], mask_of(pl.gpu_indices))
    decisions.start(w, c.placements, True, start_reason(w, c.placements))
