"""Placement on free GPUs: which host and GPUs a job that can start gets.

Decides where, never whether: single-host jobs get the free aligned block of their
size on the best-fit host (fewest free GPUs that still fit, so whole hosts stay
whole); among equally good hosts, in fair-share mode, the one where the job's project
already holds the most GPUs, with unallocated work counted as one project of its own
(so a host holds one project's work: that project's higher-priority jobs and projects
ranked above it can assemble whole blocks by preemption, and hosts of unallocated work
can be emptied at once for allocated jobs). Larger jobs take whole free hosts, all or
nothing. Reserved hosts take new work only through `place_reserved`.
"""

from __future__ import annotations

from collections.abc import Iterable

from scheduler.core.engine.blocks import Shape
from scheduler.core.engine.cluster import UNALLOCATED, ClusterState, Decisions
from scheduler.core.engine.types import Placement, Workload

__all__ = ["Placer"]

# How many best-fit hosts the same-project packing looks at.
_PACKING_LOOKAHEAD = 32


class Placer:
    """Places jobs on the cycle's free GPUs."""

    def __init__(self, cluster: ClusterState, decisions: Decisions, pack_by_project: bool) -> None:
        self.cluster = cluster
        self.decisions = decisions
        self.pack_by_project = pack_by_project
        self._host_projects: list[dict[str, int]] | None = None

    def place_free(self, w: Workload, sh: Shape) -> tuple[Placement, ...] | None:
        """Placements for `w` in free, unreserved GPUs (best fit), or None."""
        c = self.cluster
        index = c.index
        if sh.block:
            h = index.find_block(sh.block)
            if h >= 0:
                if self.pack_by_project:
                    h = self._same_project(h, sh.block, w)
                return (c.take_block(h, c.best_start(h, sh.block), sh.gpus),)
        for size, n in sh.whole:
            d = index.whole.get(size)
            if d is not None and len(d) >= n:
                return tuple(c.take_whole(h) for h in list(d)[:n])
        return None

    def host_projects(self) -> list[dict[str, int]]:
        """Per host, the GPUs each project's jobs hold there (built when first needed in
        a cycle, this cycle's starts included; kept up to date by `_same_project`)."""
        hp = self._host_projects
        if hp is None:
            c = self.cluster
            hp = self._host_projects = [{} for _ in c.gpus]
            for rw, host_masks, _, _, _ in c.runs:
                p = rw.workload.project if rw.allocated else UNALLOCATED
                for h, m in host_masks:
                    d = hp[h]
                    d[p] = d.get(p, 0) + m.bit_count()
            start_project = self.decisions.start_project
            for st in self.decisions.starts:
                p = start_project[st.workload_id]
                for pl in st.placements:
                    d = hp[c.host_index[pl.host]]
                    d[p] = d.get(p, 0) + len(pl.gpu_indices)
        return hp

    def _same_project(self, h0: int, p: int, w: Workload) -> int:
        """Among the best-fit hosts (as few free GPUs as `h0`), the one where `w`'s
        project holds the most GPUs (lowest index on ties)."""
        index = self.cluster.index
        d = index.buckets[p][index.nfree[h0]]
        key = w.project if w.min_runtime_s > 0 else UNALLOCATED
        if len(d) > 1:
            hp = self.host_projects()
            best, best_gpus = h0, hp[h0].get(key, 0)
            for n, h in enumerate(d):
                k = hp[h].get(key, 0)
                if k > best_gpus or (k == best_gpus and h < best):
                    best, best_gpus = h, k
                if n >= _PACKING_LOOKAHEAD - 1:
                    break
            h0 = best
        built = self._host_projects
        if built is not None:
            held = built[h0]
            held[key] = held.get(key, 0) + w.gpus
        return h0

    def place_reserved(
        self, w: Workload, sh: Shape, hosts: Iterable[int]
    ) -> tuple[Placement, ...] | None:
        """Placements for a single-host job on the free GPUs of reserved `hosts` (the
        host with the fewest free GPUs that has a free block of its size)."""
        if not sh.block:
            return None
        c = self.cluster
        free = c.free
        best = -1
        for h in hosts:
            f = free[h]
            if (
                f
                and c.largest_block(h, f) >= sh.block
                and (best < 0 or f.bit_count() < free[best].bit_count())
            ):
                best = h
        if best < 0:
            return None
        return (c.take_block(best, c.best_start(best, sh.block), sh.gpus),)
