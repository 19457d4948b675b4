"""The aligned blocks of reserved hosts that a backfill search may take, kept per host
for the whole cycle (`Reservations._backfill_block`).

Every job that starts on the short-job reserve searches all of its hosts for the
cheapest block, yet between two searches only the hosts where something started or
stopped change (`ClusterState.host_changes`). `HostRooms` keeps, per host and block
size, every aligned block that its free GPUs and live candidates cover, with its
victims and the part of the search's key that depends on the host alone, best first:
a search checks each block against its job's rule only while that bound can still
beat the best block it has found.

Exact: with no two masks of a host overlapping, a block the search would build from
the candidates its job may take is a kept block all of whose victims it may take, with
the same victims in the same order (a GPU of the block is free or of one candidate).
A host where masks overlap, where an allocated candidate's project is not in the tree
or where lost work is not a number, is marked inexact, and the search reads it as it did without the cache.
"""

from __future__ import annotations

from typing import NamedTuple

from scheduler.core.engine.cluster import ClusterState
from scheduler.core.engine.victims import Victim, blocks_in_room

__all__ = ["BlockKey", "HostRoom", "HostRooms", "RoomBlock"]

# A block's search key: under-served victims (GPUs or count), allocated victims,
# minus the lowest order index among them, lost work, victims, free GPUs left on the
# host, host, block start (`Reservations._backfill_block`).
BlockKey = tuple[int, int, int, float, int, int, int, int]


class RoomBlock(NamedTuple):
    """One aligned block: its key with no under-served victim (a lower bound of its
    key for any job), its victims (in the host's candidate order) and the allocated
    ones among them."""

    bound: BlockKey
    chosen: list[Victim]
    taken: list[Victim]


class HostRoom(NamedTuple):
    """A host's blocks of one size, lowest bound first, as of its `changes` count;
    `exact` False: the search reads the host without them (see the module)."""

    changes: int
    exact: bool
    blocks: list[RoomBlock]


class HostRooms:
    """The cycle's `HostRoom`s per (host, block size), rebuilt for a host when its
    change count moved. `fewest_gpus`: the reserve's rule orders blocks by the GPUs of
    their under-served victims alone (the key's allocated count and rank are 0)."""

    def __init__(
        self,
        cluster: ClusterState,
        by_host: dict[int, list[tuple[Victim, int]]],
        fewest_gpus: bool,
        leaf_index: dict[str, int],
    ) -> None:
        self.cluster = cluster
        self.by_host = by_host
        self.fewest_gpus = fewest_gpus
        self.leaf_index = leaf_index
        self._rooms: dict[tuple[int, int], HostRoom] = {}

    def room(self, h: int, p: int) -> HostRoom:
        """Host `h`'s aligned `p`-blocks as it is now."""
        changes = self.cluster.host_changes[h]
        room = self._rooms.get((h, p))
        if room is None or room.changes != changes:
            room = self._rooms[h, p] = self._build(h, p, changes)
        return room

    def _build(self, h: int, p: int, changes: int) -> HostRoom:
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
                return HostRoom(changes, False, [])
            seen |= mu
        fewest = self.fewest_gpus
        free_left = free.bit_count()
        blocks = []
        for s, chosen in blocks_in_room(free, on, c.gpus[h], p):
            taken = [u for u in chosen if u.allocated]
            bound: BlockKey = (
                0,
                0 if fewest else len(taken),
                0 if fewest else -min([u.rank for u in taken], default=0),
                sum(u.lost for u in chosen),
                len(chosen),
                free_left,
                h,
                s,
            )
            blocks.append(RoomBlock(bound, chosen, taken))
        blocks.sort(key=_bound)
        return HostRoom(changes, True, blocks)


def _bound(block: RoomBlock) -> BlockKey:
    return block.bound
