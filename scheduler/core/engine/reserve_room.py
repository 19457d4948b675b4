"""The aligned blocks of reserved hosts that a backfill search may take, kept for the
whole cycle (`Reservations._backfill_block`).

Every job that starts on the short-job reserve searches all of its hosts for the
cheapest block, yet between two searches only the hosts where something started or
stopped change (`ClusterState.changed_hosts`). `RoomOrder` keeps, per host, every
aligned block of one size that its free GPUs and live candidates cover, with its
victims and its search key, lowest first, and the hosts sorted by their lowest key:
the key depends on the host and on the level fair shares, which are fixed for the
cycle, not on the job. A search reads the hosts in that order while their lowest key
can still beat the best block it has found, and each host's blocks up to the first
its job may take.

Exact: with no two masks of a host overlapping, a block the search would build from
the candidates its job may take is a kept block all of whose victims it may take, with
the same victims in the same order (a GPU of the block is free or of one candidate).
A host where masks overlap, where an allocated candidate's project is not in the tree
or where lost work is not a number, is marked inexact, and the search reads it as it
did without the cache.
"""

from __future__ import annotations

from bisect import bisect_left, insort
from typing import NamedTuple

from scheduler.core.engine.cluster import ClusterState
from scheduler.core.engine.victims import Victim, blocks_in_room

__all__ = ["BlockKey", "HostRoom", "HostRooms", "RoomBlock", "RoomOrder"]

# A block's search key: under-served victims (GPUs or count), allocated victims,
# minus the lowest order index among them, lost work, victims, free GPUs left on the
# host, host, block start (`Reservations._backfill_block`).
BlockKey = tuple[int, int, int, float, int, int, int, int]


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
    """The blocks of one size (`p` GPUs) on one list of hosts: each host's `HostRoom`,
    the lowest key of each exact host with blocks, sorted (`firsts`: a key ends with its
    host and block start, so no two are equal), and the inexact hosts."""

    def __init__(self, hosts: tuple[int, ...], p: int) -> None:
        self.hosts = hosts
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
    hosts changed since each was last read. `fewest_gpus`: the reserve's rule orders
    blocks by the GPUs of their under-served victims alone (the key's allocated count
    and rank are 0); `lf` and `leaf_index`: the cycle's level fair shares (a project is
    under-served above 1.0) and its projects' node indices."""

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
        self._orders: dict[tuple[tuple[int, ...], int], RoomOrder] = {}

    def order(self, hosts: list[int], p: int) -> RoomOrder:
        """The `p`-blocks of `hosts` as they are now (hosts of fewer GPUs left out)."""
        c = self.cluster
        key = (tuple(hosts), p)
        order = self._orders.get(key)
        if order is None:
            order = self._orders[key] = RoomOrder(key[0], p)
            gpus = c.gpus
            for h in hosts:
                if gpus[h] >= p:
                    order.put(h, self._build(h, p))
        else:
            log = c.changed_hosts
            rooms = order.rooms
            for h in set(log[order.logged :]):
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
                return HostRoom(False, [])
            seen |= mu
        fewest, lf, leaf = self.fewest_gpus, self.lf, self.leaf_index
        free_left = free.bit_count()
        blocks = []
        for s, chosen in blocks_in_room(free, on, c.gpus[h], p):
            taken = [u for u in chosen if u.allocated]
            under = [u.gpus for u in taken if lf[leaf[u.project]] > 1.0]
            key: BlockKey = (
                sum(under) if fewest else len(under),
                0 if fewest else len(taken),
                0 if fewest else -min([u.rank for u in taken], default=0),
                sum(u.lost for u in chosen),
                len(chosen),
                free_left,
                h,
                s,
            )
            blocks.append(RoomBlock(key, chosen, taken))
        blocks.sort(key=_key)
        return HostRoom(True, blocks)


def _key(block: RoomBlock) -> BlockKey:
    return block.key
