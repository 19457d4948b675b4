"""The short-job reserve's reading of a cycle (`Reservations.hold_for_short_jobs`): the
waiting short jobs and how many hosts their work needs. Pure functions."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import NamedTuple

from scheduler.core.engine.cluster import RunInfo
from scheduler.core.engine.types import Policy, Workload
from scheduler.core.engine.victims import Victim, blocks_in_room


class ShortReserveRule(NamedTuple):
    """How the short-job reserve sizes itself and when it gives way (`Policy`'s
    `short_reserve_*` settings, read by `short_reserve_rule`), and the first waiting
    allocated job of the fair-share order (`head`)."""

    auto: bool = False
    idle_share: float = 0.0
    release_s: float = math.inf
    head: Workload | None = None
    demand_window_s: float = math.inf
    spares_floor: bool = False
    take_after_s: float = math.inf
    fewest_gpus: bool = False
    room_now: bool = False


def short_reserve_rule(policy: Policy, head: Workload | None) -> ShortReserveRule:
    """The reserve's rule as `policy` sets it, with the fair-share order's head job."""
    return ShortReserveRule(
        policy.short_reserve_auto,
        policy.short_reserve_idle_share,
        policy.short_reserve_release_s,
        head,
        policy.short_reserve_demand_window_s,
        policy.short_reserve_spares_floor,
        policy.short_reserve_take_after_s,
        policy.short_reserve_fewest_gpus,
        policy.short_reserve_room_now,
    )


__all__ = [
    "ShortReserveRule",
    "host_loads",
    "hosts_with_room",
    "PendingIds",
    "own_block",
    "pending_short",
    "short_reserve_rule",
    "under_served_budget",
]


def hosts_with_room(
    short_gpus: int, size: int, long_gpus: Mapping[int, int], by_long: Sequence[int]
) -> int:
    """How many of `by_long`'s first hosts it takes for their GPUs not under long
    protected work (the room short jobs have there within the short limit) to hold
    `short_gpus`; hosts without such room add none and end the count."""
    room = hosts = 0
    for h in by_long:
        if room >= short_gpus or long_gpus[h] >= size:
            break
        room += size - long_gpus[h]
        hosts += 1
    return hosts


# A project's waiting jobs as the explained queue lists them: the ids of its allocated
# and of its unallocated jobs, in order, and whether every job has a size the cluster
# can run. Tuples, not lists: a tuple of strings leaves the garbage collector's lists
# at its first collection, so the 100,000 ids of a large queue, kept to the end of the
# cycle and after it in the queue, are not walked by every later collection.
PendingIds = tuple[tuple[str, ...], tuple[str, ...], bool]


def pending_short(
    short_limit: float,
    size: int,
    pending: Mapping[str, Sequence[Workload]],
    since: float,
    runnable: set[int] | None = None,
) -> tuple[int, int, dict[str, list[Workload]], int, dict[str, PendingIds]]:
    """(GPUs of the widest pending job, GPUs of the pending short jobs, those with a min
    runtime in (0, `short_limit`], that fit one host of `size` GPUs: only those can start
    on a held host; those jobs per project; GPUs of the pending allocated jobs submitted
    at `since` or later: the recent demand, not a backlog that overload only grows).
    Last, with `runnable` (the job sizes the cluster can run), every project's
    `PendingIds` for the explained queue, read in the same pass (else empty).
    Every pending job is read once per cycle: no call per job."""
    widest = short = allocated = 0
    found: dict[str, list[Workload]] = {}
    split: dict[str, PendingIds] = {}
    keep_ids = runnable is not None
    sizes: set[int] = runnable if runnable is not None else set()
    for proj, jobs in pending.items():
        # one loop that reads each job once: 100,000 jobs are scattered in memory, and
        # reaching them (not the arithmetic) is what costs; a pass per figure took twice
        # as long, and the queue's own pass as long again
        mine: list[Workload] = []
        with_min: list[str] = []
        without_min: list[str] = []
        all_runnable = True
        for w in jobs:
            gpus = w.gpus
            if gpus > widest:
                widest = gpus
            if keep_ids and gpus not in sizes:
                all_runnable = False
            min_runtime = w.min_runtime_s
            if min_runtime > 0:
                if keep_ids:
                    with_min.append(w.id)
                if w.submit_s >= since:
                    allocated += gpus
                if min_runtime <= short_limit and gpus <= size:
                    mine.append(w)
                    short += gpus
            elif keep_ids:
                without_min.append(w.id)
        if keep_ids:
            split[proj] = (tuple(with_min), tuple(without_min), all_runnable)
        if mine:
            found[proj] = mine
    return widest, short, found, allocated, split


def _own_room(
    w: Workload, h: int, on_host: Sequence[tuple[Victim, int]], short_limit: float
) -> list[tuple[Victim, int]]:
    """What short job `w` may take on host `h` by trading with its own project: work past
    its protection that is unallocated, or allocated work of `w`'s project at its
    priority or below, protected for longer than `short_limit` (long work, never another
    short job) and running on `h` alone (a gang is not stopped for a short job)."""
    out = []
    for u, mu in on_host:
        if not u.alive:
            continue
        if u.allocated and (
            u.project != w.project
            or u.priority > w.priority
            or u.run.workload.min_runtime_s <= short_limit
            or len(u.host_masks) > 1
        ):
            continue
        out.append((u, mu))
    return out


def own_block(
    w: Workload,
    p: int,
    hosts: Mapping[int, Sequence[tuple[Victim, int]]],
    free: Sequence[int],
    gpus: Sequence[int],
    short_limit: float,
) -> tuple[int, int, list[Victim]] | None:
    """The cheapest aligned `p`-block for short job `w` of free GPUs and what `_own_room`
    lets it take (`hosts`: the candidate hosts' victims with their masks there): least
    lost work, then fewest victims, then fewest free GPUs left, then host and slot. None
    when there is none. A block with no allocated victim of `w`'s project is not
    returned (free and unallocated room is the other passes')."""
    best_key: tuple[float, int, int, int, int] | None = None
    best: tuple[int, int, list[Victim]] | None = None
    for h, on_host in hosts.items():
        if gpus[h] < p:
            continue
        on = _own_room(w, h, on_host, short_limit)
        if not any(u.allocated for u, _ in on):
            continue
        free_left = free[h].bit_count()
        for s, chosen in blocks_in_room(free[h], on, gpus[h], p):
            key = (sum(u.lost for u in chosen), len(chosen), free_left, h, s)
            if best_key is None or key < best_key:
                best_key, best = key, (h, s, chosen)
    return best


def under_served_budget(
    total_gpus: int, short_gpus: int, running_short: int, allocated_demand: int
) -> int:
    """GPUs of under-served projects' work past its protection that short jobs may
    take on the reserve this cycle: the short jobs' share of the allocated demand
    (`short_gpus`, running and waiting, over `allocated_demand`, the GPUs of all
    allocated work running and waiting) of the cluster's `total_gpus`, less the GPUs
    short work already runs on.
    Under overload short work gets its share of the cluster, no more, at the cost
    of the under-served projects too."""
    if allocated_demand <= 0 or short_gpus <= 0:
        return 0
    return max(0, math.ceil(total_gpus * short_gpus / allocated_demand) - running_short)


def host_loads(
    runs: Sequence[RunInfo],
    hosts: Sequence[int],
    short_limit: float,
    size: int,
    until: tuple[float, float],
    blocked_after: float | None = None,
) -> tuple[int, dict[int, int], dict[int, int], set[int], dict[int, int], int]:
    """GPUs of running short jobs that fit one host of `size` GPUs (on any host); per
    host of `hosts`, GPUs of allocated work protected beyond `until[0]`, and beyond
    `until[1]`; the hosts of `hosts` that run allocated work that is not short
    (protected or not); and per host the GPUs a short job may not take there within
    `until[0]` (`blocked`): long work still protected then, and gangs spanning
    hosts, which the reserve never takes; last, GPUs of all running allocated jobs.
    `blocked_after`: count in `blocked` long work protected beyond it instead."""
    short = allocated = 0
    long_gpus = dict.fromkeys(hosts, 0)
    late_gpus = dict.fromkeys(hosts, 0)
    blocked = dict.fromkeys(hosts, 0)
    has_longer: set[int] = set()
    soon, late = until
    edge = soon if blocked_after is None else blocked_after
    for run in runs:
        if run.allocated is None:
            continue
        w = run.run.workload
        allocated += w.gpus
        if 0.0 < w.min_runtime_s <= short_limit:
            if w.gpus <= size:
                short += w.gpus
            continue
        gang = len(run.host_masks) > 1  # the reserve never stops a gang
        for h, mask in run.host_masks:
            if h in long_gpus:
                has_longer.add(h)
                n = mask.bit_count()
                if run.protected_until > soon:
                    long_gpus[h] += n
                    if run.protected_until > late:
                        late_gpus[h] += n
                if gang or run.protected_until > edge:
                    blocked[h] += n
    return short, long_gpus, late_gpus, has_longer, blocked, allocated
