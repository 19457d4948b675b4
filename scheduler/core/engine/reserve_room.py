"""The backfill search on reserved hosts (`Reservations.place`): the cheapest aligned
block of free GPUs and candidates a job may take there, with the blocks kept for the
whole cycle.

Every job that starts on the short-job reserve searches all of its hosts, yet between
two searches only the hosts where something started or stopped change
(`ClusterState.changed_hosts`). `RoomOrder` keeps, per host, every aligned block of one
size that its free GPUs and live candidates cover, with its victims and its search key,
lowest first, and the hosts sorted by their lowest key: the key depends on the host and
on the level fair shares, which are fixed for the cycle, not on the job. A search
(`HostRooms.cheapest`) reads the hosts in that order while their lowest key can still
beat the best block it has found, and each host's blocks up to the first its job may
take (`may_take`).

Exact: with no two masks of a host overlapping, a block the search would build from
the candidates its job may take (`open_victims`) is a kept block all of whose victims it
may take, with the same victims in the same order (a GPU of the block is free or of one
candidate). A host where masks overlap, where an allocated candidate's project is not
in the tree or where lost work is not a number, is marked inexact, and the search
builds its blocks from `open_victims` as it did without the cache.
"""

from __future__ import annotations

import math
from bisect import bisect_left, insort
from collections.abc import Sequence
from typing import NamedTuple

from scheduler.core.engine.cluster import ClusterState
from scheduler.core.engine.types import Workload
from scheduler.core.engine.victims import Victim, blocks_in_room

__all__ = [
    "BlockKey",
    "FreeHosts",
    "HostRoom",
    "HostRooms",
    "RoomBlock",
    "RoomOrder",
    "TakeRule",
    "may_take",
    "open_victims",
]

# A block's search key: under-served victims (GPUs with `fewest_gpus`, else jobs),
# allocated victims, minus the lowest order index among them, lost work, victims, free
# GPUs left on the host, host, block start (0 for the second and third with
# `fewest_gpus`).
BlockKey = tuple[int, int, int, float, int, int, int, int]
Found = tuple[int, int, list[Victim]]  # host, block start, victims


class TakeRule(NamedTuple):
    """What one search may take: `short`, the short job on the short-job reserve (None:
    any other search, which takes no allocated work); `tight`, whether the cycle's budget for under-served work no longer holds the block
    and the job has not waited `take_after_s`; the reserve's `spares_floor` and
    `take_after_s`; `short_limit`, the min runtime up to which a job is short (never
    taken: short jobs taking each other past their protection would take turns
    forever); the level fair shares `lf` and the projects' node indices."""

    short: Workload | None
    tight: bool
    spares_floor: bool
    take_after_s: float
    short_limit: float
    lf: list[float]
    leaf_index: dict[str, int]


def open_victims(
    on_host: Sequence[tuple[Victim, int]], take: TakeRule, within: set[int]
) -> tuple[list[tuple[Victim, int]], bool]:
    """The live candidates of a host (with their masks there) that the search on the
    hosts `within` may take,
    and whether it passed over work of the short job's own project, or under-served
    work a job that waited longer may take (then the block may exist for another job).

    Allocated work only for a short job, only if it runs on `within` alone (a gang that
    spans other hosts is not stopped for a short job), its project has had at least its
    share among its siblings (level fair share <= 1) or the search is not `tight`, and
    it is not the short job's own project's at the same priority or above (that would
    only trade one job for another), nor a short job (`TakeRule.short_limit`)."""
    short, lf, leaf = take.short, take.lf, take.leaf_index
    root = len(lf)
    skipped_own = False
    on = []
    for u, mu in on_host:
        if not u.alive:
            continue
        if u.allocated:
            if short is None:
                continue
            if u.project == short.project and u.priority >= short.priority:
                skipped_own = True
                continue
            if any(hh not in within for hh, _ in u.host_masks):
                continue
            if u.run.workload.min_runtime_s <= take.short_limit:
                continue
            if u.floor and take.spares_floor and u.project != short.project:
                continue
            if lf[leaf.get(u.project, root)] > 1.0 and take.tight:
                # a job that has waited longer may still take it
                skipped_own = skipped_own or take.take_after_s < math.inf
                continue
        on.append((u, mu))
    return on, skipped_own


def may_take(taken: list[Victim], take: TakeRule, within: set[int]) -> bool:
    """Whether the search on the hosts `within` may take all of `taken`, allocated
    victims (`open_victims`' rule; their projects are in the tree)."""
    if not taken:
        return True
    short = take.short
    if short is None:
        return False
    lf, leaf = take.lf, take.leaf_index
    for u in taken:
        if u.project == short.project and u.priority >= short.priority:
            return False
        if any(hh not in within for hh, _ in u.host_masks):
            return False
        if u.run.workload.min_runtime_s <= take.short_limit:
            return False
        if u.floor and take.spares_floor and u.project != short.project:
            return False
        if take.tight and lf[leaf[u.project]] > 1.0:
            return False
    return True


def keyed_blocks(
    h: int,
    free: int,
    host_gpus: int,
    on: Sequence[tuple[Victim, int]],
    p: int,
    fewest_gpus: bool,
    lf: list[float],
    leaf_index: dict[str, int],
) -> list[tuple[BlockKey, list[Victim]]]:
    """The aligned `p`-blocks of host `h` that its `free` mask and the candidates `on`
    cover, with their search keys and victims."""
    root = len(lf)
    free_left = free.bit_count()
    out: list[tuple[BlockKey, list[Victim]]] = []
    for s, chosen in blocks_in_room(free, on, host_gpus, p):
        taken = [u for u in chosen if u.allocated]
        under = [u.gpus for u in taken if lf[leaf_index.get(u.project, root)] > 1.0]
        key: BlockKey = (
            sum(under) if fewest_gpus else len(under),
            0 if fewest_gpus else len(taken),
            0 if fewest_gpus else -min([u.rank for u in taken], default=0),
            sum(u.lost for u in chosen),
            len(chosen),
            free_left,
            h,
            s,
        )
        out.append((key, chosen))
    return out


class RoomBlock(NamedTuple):
    """One aligned block: its search key, its victims (in the host's candidate order)
    and the allocated ones among them."""

    key: BlockKey
    chosen: list[Victim]
    taken: list[Victim]


class HostRoom(NamedTuple):
    """A host's blocks of one size, lowest key first; `exact` False: the search reads
    the host without them (see the module)."""

    exact: bool
    blocks: list[RoomBlock]


class RoomOrder:
    """The blocks of one size (`p` GPUs) on one list of hosts (`within`, as a set): each
    host's `HostRoom`, the lowest key of each exact host with blocks, sorted (`firsts`:
    a key ends with its host and block start, so no two are equal), and the inexact
    hosts."""

    def __init__(self, within: set[int], p: int) -> None:
        self.within = within
        self.p = p
        self.rooms: dict[int, HostRoom] = {}
        self.firsts: list[BlockKey] = []
        self.inexact: set[int] = set()
        self.logged = 0  # entries of `ClusterState.changed_hosts` already applied

    def put(self, h: int, room: HostRoom) -> None:
        """Host `h`'s blocks are now `room`."""
        old = self.rooms.get(h)
        if old is not None:
            if not old.exact:
                self.inexact.discard(h)
            elif old.blocks:
                firsts = self.firsts
                del firsts[bisect_left(firsts, old.blocks[0].key)]
        self.rooms[h] = room
        if not room.exact:
            self.inexact.add(h)
        elif room.blocks:
            insort(self.firsts, room.blocks[0].key)


class HostRooms:
    """The cycle's `RoomOrder`s per (hosts, block size), brought up to date with the
    hosts changed since each was last read, and the searches over them. `fewest_gpus`:
    the reserve's rule orders blocks by the GPUs of their under-served victims alone;
    `lf` and `leaf_index`: the cycle's level fair shares (a project is under-served
    above 1.0) and its projects' node indices."""

    def __init__(
        self,
        cluster: ClusterState,
        by_host: dict[int, list[tuple[Victim, int]]],
        fewest_gpus: bool,
        lf: list[float],
        leaf_index: dict[str, int],
    ) -> None:
        self.cluster = cluster
        self.by_host = by_host
        self.fewest_gpus = fewest_gpus
        self.lf = lf
        self.leaf_index = leaf_index
        self._orders: dict[tuple[int, ...], dict[int, RoomOrder]] = {}
        # the last search's hosts list and its orders per block size: callers pass the
        # same list object while the reservation's hosts stay the same
        self._hosts: list[int] | None = None
        self._by_size: dict[int, RoomOrder] = {}

    def cheapest(self, hosts: list[int], p: int, take: TakeRule) -> Found | None:
        """The block of `p` GPUs on `hosts` with the lowest key whose victims the search
        may take (a block of free GPUs alone only on a host with a candidate it may
        take). None when there is none."""
        order = self.order(hosts, p)
        within = order.within
        c = self.cluster
        best_key: BlockKey | None = None
        best: Found | None = None
        if order.inexact:
            for h in hosts:
                if h in order.inexact:
                    on, _ = open_victims(self.by_host.get(h, ()), take, within)
                    if not on:
                        continue
                    for key, chosen in keyed_blocks(
                        h, c.free[h], c.gpus[h], on, p, self.fewest_gpus, self.lf, self.leaf_index
                    ):
                        if best_key is None or key < best_key:
                            best_key, best = key, (h, key[7], chosen)
        rooms = order.rooms
        for first in order.firsts:
            if best_key is not None and first >= best_key:
                break  # every later host's blocks have larger keys
            h = first[6]
            opened = -1  # whether the search may take a candidate on h (-1: not asked)
            for key, chosen, taken in rooms[h].blocks:
                if best_key is not None and key >= best_key:
                    break  # every later block of the host has a larger key
                if not may_take(taken, take, within):
                    continue
                if not chosen:
                    if opened < 0:
                        on_host = self.by_host.get(h, ())
                        opened = 1 if open_victims(on_host, take, within)[0] else 0
                    if not opened:
                        continue
                best_key, best = key, (h, key[7], chosen)
                break  # the host's best block the search may take
        return best

    def passed_over(self, hosts: list[int], p: int, take: TakeRule) -> bool:
        """Whether a search on `hosts` passed over candidates another job may take
        (`open_victims`)."""
        gpus, within = self.cluster.gpus, self.order(hosts, p).within
        skipped = False
        for h in hosts:
            if gpus[h] >= p:
                skipped = open_victims(self.by_host.get(h, ()), take, within)[1] or skipped
        return skipped

    def order(self, hosts: list[int], p: int) -> RoomOrder:
        """The `p`-blocks of `hosts` as they are now (hosts of fewer GPUs left out)."""
        c = self.cluster
        if hosts is not self._hosts:
            self._hosts = hosts
            self._by_size = self._orders.setdefault(tuple(hosts), {})
        order = self._by_size.get(p)
        if order is None:
            order = self._by_size[p] = RoomOrder(set(hosts), p)
            gpus = c.gpus
            for h in hosts:
                if gpus[h] >= p:
                    order.put(h, self._build(h, p))
        else:
            rooms = order.rooms
            for h in set(c.changed_hosts[order.logged :]):
                if h in rooms:
                    order.put(h, self._build(h, p))
        order.logged = len(c.changed_hosts)
        return order

    def _build(self, h: int, p: int) -> HostRoom:
        c = self.cluster
        free = c.free[h]
        on = [(u, mu) for u, mu in self.by_host.get(h, ()) if u.alive]
        seen = free
        for u, mu in on:
            if (
                seen & mu
                or (u.allocated and u.project not in self.leaf_index)
                or u.lost != u.lost  # NaN: no order
            ):
                return _new_tuple(HostRoom, (False, []))
            seen |= mu
        blocks = [
            _new_tuple(RoomBlock, (key, chosen, [u for u in chosen if u.allocated]))
            for key, chosen in keyed_blocks(
                h, free, c.gpus[h], on, p, self.fewest_gpus, self.lf, self.leaf_index
            )
        ]
        blocks.sort(key=_key)
        return _new_tuple(HostRoom, (True, blocks))


class FreeHosts:
    """The hosts of a list (a reservation's) that have free GPUs, in its order, brought
    up to date with the hosts changed since the last read: what `Placer.place_reserved`
    looks at, without a walk over every host of a large reserve."""

    def __init__(self, cluster: ClusterState, hosts: list[int]) -> None:
        self.cluster = cluster
        self.hosts = hosts
        self.position = {h: i for i, h in enumerate(hosts)}
        free = cluster.free
        self.free_at = [i for i, h in enumerate(hosts) if free[h]]  # positions, sorted
        self.logged = len(cluster.changed_hosts)

    def now(self) -> list[int]:
        """The hosts with free GPUs now, in the list's order (the whole list if it names
        a host twice)."""
        if len(self.position) != len(self.hosts):
            return self.hosts
        self._follow()
        hosts = self.hosts
        return [hosts[i] for i in self.free_at]

    def has_free(self) -> bool:
        """Whether a host of the list has free GPUs now."""
        if len(self.position) != len(self.hosts):
            free = self.cluster.free
            return any(free[h] for h in self.hosts)
        self._follow()
        return bool(self.free_at)

    def _follow(self) -> None:
        """Apply the hosts changed since the last read."""
        c = self.cluster
        log, free_at = c.changed_hosts, self.free_at
        if self.logged < len(log):
            for h in set(log[self.logged :]):
                i = self.position.get(h)
                if i is None:
                    continue
                j = bisect_left(free_at, i)
                listed = j < len(free_at) and free_at[j] == i
                if c.free[h] and not listed:
                    free_at.insert(j, i)
                elif not c.free[h] and listed:
                    del free_at[j]
            self.logged = len(log)


# `HostRoom(...)` and `RoomBlock(...)` without the named tuples' constructors, Python
# functions even in the compiled engine (a scale_10k cycle builds 6,000 host rooms)
_new_tuple = tuple.__new__


def _key(block: RoomBlock) -> BlockKey:
    return block.key
