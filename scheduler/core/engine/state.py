"""What the engine keeps warm between cycles: one object, created and owned by the
caller, passed to `plan()`. The simulator keeps one per run, the live worker one per
cluster. `plan()` without it builds a fresh one (the cold path) and decides the same.

Every cache is keyed either by content (block tables, GPU masks) or by the identity of
an immutable input object that the cache entry holds (so the id stays unique while the
entry lives): hosts tuples, budget trees, running workloads. A caller that passes new
objects every cycle (the live worker reads them from the database) therefore never
sees a stale entry; it only gets less reuse. The caches are bounded.

A state serves one `plan()` call at a time; it holds nothing that outlives its owner.
"""

from __future__ import annotations

from collections.abc import Sequence

from scheduler.core.engine.blocks import BlockTable, FreeIndex, MaskTable
from scheduler.core.engine.cluster import HostLayout, RunMemo
from scheduler.core.engine.fairshare import TreeMemo
from scheduler.core.engine.types import Host
from scheduler.core.engine.victims import Victim

__all__ = ["EngineState"]


class EngineState:
    """The engine's warm caches for one cluster (see the module docstring)."""

    __slots__ = ("blocks", "index", "layout", "masks", "runs", "trees", "victims")

    def __init__(self) -> None:
        self.blocks = BlockTable()
        self.masks = MaskTable()
        self.trees: TreeMemo = {}
        self.layout: tuple[Sequence[Host], HostLayout] | None = None
        self.runs = RunMemo()
        self.victims: dict[int, Victim] = {}
        self.index: tuple[HostLayout, FreeIndex] | None = None

    def reset(self) -> None:
        """Forget everything (the next cycle is cold)."""
        self.__init__()  # type: ignore[misc]

    def free_index(self, layout: HostLayout) -> FreeIndex:
        """An empty free-GPU index for `layout`: the last cycle's, cleared, while the
        layout is the same (the same hosts tuple)."""
        kept = self.index
        if kept is not None and kept[0] is layout:
            kept[1].clear()
            return kept[1]
        index = FreeIndex(layout.gpus, self.blocks)
        self.index = (layout, index)
        return index

    def host_layout(self, hosts: Sequence[Host]) -> HostLayout:
        """The layout of `hosts`, kept while the caller passes the same hosts tuple (a
        list may change in place, so only tuples are kept)."""
        kept = self.layout
        if kept is not None and kept[0] is hosts:
            return kept[1]
        layout = HostLayout(hosts)
        if isinstance(hosts, tuple):
            self.layout = (hosts, layout)
        return layout
