"""Placement on free GPUs: which host and GPUs a job that can start gets.

Decides where, never whether: single-host jobs get the free aligned block of their
size on the best-fit host (fewest free GPUs that still fit, so whole hosts stay
whole); among equally good hosts, in fair-share mode, the one where the job's project
already holds the most GPUs, with unallocated work counted as one project of its own
(so a host holds one project's work: that project's higher-priority jobs and projects
ranked above it can assemble whole blocks by preemption, and hosts of unallocated work
can be emptied at once for allocated jobs). A pinned job (one that cannot resume,
protected for `_PINNED_S` or longer: an interactive session) goes, among all hosts with
a free block of its size, where pinned work already holds the most GPUs (then best
fit): pinned work gathers on few hosts instead of leaving a fragment on each host it
lands on once the movable work beside it ends. Larger jobs take whole free hosts, all
or nothing. Reserved hosts take new work only through `place_reserved`.
"""

from __future__ import annotations

from collections.abc import Iterable

from scheduler.core.engine.blocks import Shape
from scheduler.core.engine.cluster import UNALLOCATED, ClusterState, Decisions
from scheduler.core.engine.types import Placement, Workload

__all__ = ["Placer"]

# How many best-fit hosts the same-project packing looks at.
_PACKING_LOOKAHEAD = 32

# A job that cannot resume and is protected this long or longer is pinned to its host.
_PINNED_S = 3600.0


def _pinned(w: Workload) -> bool:
    """Whether `w`, once started, holds its GPUs for a long protection it cannot leave."""
    return not w.resumable and w.min_runtime_s >= _PINNED_S


class Placer:
    """Places jobs on the cycle's free GPUs."""

    def __init__(self, cluster: ClusterState, decisions: Decisions, pack_by_project: bool) -> None:
        self.cluster = cluster
        self.decisions = decisions
        self.pack_by_project = pack_by_project
        self._host_projects: list[dict[str, int]] | None = None
        self._host_pinned: list[int] | None = None

    def place_free(self, w: Workload, sh: Shape) -> tuple[Placement, ...] | None:
        """Placements for `w` in free, unreserved GPUs (best fit), or None."""
        c = self.cluster
        index = c.index
        if sh.block:
            h = index.find_block(sh.block)
            if h >= 0:
                if self.pack_by_project:
                    if _pinned(w):
                        h = self._beside_pinned(h, sh.block)
                        self.host_pinned()[h] += w.gpus
                        self._count_project(h, w)
                    else:
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

    def host_pinned(self) -> list[int]:
        """Per host, the GPUs that pinned jobs hold there (their runs, built when first
        needed in a cycle, and the pinned jobs `place_free` starts)."""
        hp = self._host_pinned
        if hp is None:
            c = self.cluster
            hp = self._host_pinned = [0] * len(c.gpus)
            for rw, host_masks, _, _, _ in c.runs:
                if _pinned(rw.workload):
                    for h, m in host_masks:
                        hp[h] += m.bit_count()
        return hp

    def _beside_pinned(self, h0: int, p: int) -> int:
        """Among the hosts with a free p-block (at most `_PACKING_LOOKAHEAD` per free
        count), the one where pinned jobs hold the most GPUs, then the fewest free GPUs
        (`h0`, the best fit, when no such host holds pinned work)."""
        index = self.cluster.index
        pinned = self.host_pinned()
        best, best_n = h0, pinned[h0]
        for d in index.buckets[p][p:]:
            for n, h in enumerate(d):
                k = pinned[h]
                if k > best_n:
                    best, best_n = h, k
                if n >= _PACKING_LOOKAHEAD - 1:
                    break
        return best

    def _same_project(self, h0: int, p: int, w: Workload) -> int:
        """Among the best-fit hosts (as few free GPUs as `h0`), the one where `w`'s
        project holds the most GPUs (lowest index on ties)."""
        index = self.cluster.index
        d = index.buckets[p][index.nfree[h0]]
        key = w.project if w.min_runtime_s > 0 else UNALLOCATED
        if len(d) > 1:
            hp = self.host_projects()
            pinned = self.host_pinned()
            best, best_key = h0, (pinned[h0], -hp[h0].get(key, 0), h0)
            for n, h in enumerate(d):
                k = (pinned[h], -hp[h].get(key, 0), h)
                if k < best_key:
                    best, best_key = h, k
                if n >= _PACKING_LOOKAHEAD - 1:
                    break
            h0 = best
        self._count_project(h0, w)
        return h0

    def _count_project(self, h: int, w: Workload) -> None:
        """Count `w`'s start on host `h` in the per-host project GPUs, once built."""
        built = self._host_projects
        if built is not None:
            key = w.project if w.min_runtime_s > 0 else UNALLOCATED
            held = built[h]
            held[key] = held.get(key, 0) + w.gpus

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
