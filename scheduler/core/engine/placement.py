"""Placement on free GPUs: which host and GPUs a job that can start gets.

Decides where, never whether: single-host jobs get the free aligned block of their
size on the best-fit host (fewest free GPUs that still fit, so whole hosts stay
whole); among equally good hosts, in fair-share mode, the one where the job's project
already holds the most GPUs, with unallocated work counted as one project of its own
(so a host holds one project's work: that project's higher-priority jobs and projects
ranked above it can assemble whole blocks by preemption, and hosts of unallocated work
can be emptied at once for allocated jobs). Larger jobs take whole free hosts, all or
nothing. Reserved hosts take new work only through `place_reserved`.

`block_host` and `whole_hosts` are the rule itself (which free GPUs a job's shape
takes); `place_on_free` applies it to a bare list of hosts and free masks, for the
simulator's replay, which resumes the runs going on at its start by the same rule.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from scheduler.core.engine.blocks import FreeIndex, Shape
from scheduler.core.engine.cluster import UNALLOCATED, ClusterState, Decisions, HostLayout
from scheduler.core.engine.types import Host, Placement, Workload

__all__ = ["Placer", "block_host", "place_on_free", "whole_hosts"]

# How many best-fit hosts the same-project packing looks at.
_PACKING_LOOKAHEAD = 32


def block_host(index: FreeIndex, sh: Shape) -> int:
    """The best-fit host (fewest free GPUs) with a free aligned block for a one-host
    shape `sh` among the free GPUs `index` holds; -1 when none, or `sh` is not one host's."""
    return index.find_block(sh.block) if sh.block else -1


def whole_hosts(index: FreeIndex, sh: Shape) -> list[int] | None:
    """Wholly free hosts for `sh`: of its first host size that has enough of them
    (all or nothing); None when no size has."""
    for size, n in sh.whole:
        d = index.whole.get(size)
        if d is not None and len(d) >= n:
            return list(d)[:n]
    return None


def place_on_free(
    hosts: Sequence[Host], free: Sequence[int], gpus: int
) -> tuple[Placement, ...] | None:
    """Where the engine places a job of `gpus` GPUs (`Placer.place_free`, without
    project packing) on `hosts` whose free GPUs are the masks `free` (bit i: GPU i
    free; an unhealthy host takes nothing), or None when nothing fits."""
    layout = HostLayout(hosts)
    sh = layout.shape(gpus)
    index = FreeIndex(layout.gpus)
    for h, mask in enumerate(free):
        if mask and layout.healthy[h]:
            index.set(h, mask)
    h = block_host(index, sh)
    if h >= 0:
        return (Placement(hosts[h].name, index.take_block(h, sh.block, gpus)),)
    whole = whole_hosts(index, sh)
    if whole is None:
        return None
    return tuple(Placement(hosts[h].name, tuple(range(hosts[h].gpus))) for h in whole)


class Placer:
    """Places jobs on the cycle's free GPUs."""

    def __init__(
        self,
        cluster: ClusterState,
        decisions: Decisions,
        pack_by_project: bool,
        avoid: Mapping[str, frozenset[str]] | None = None,
    ) -> None:
        self.cluster = cluster
        self.decisions = decisions
        self.pack_by_project = pack_by_project
        self._host_projects: list[dict[str, int]] | None = None
        # workload id -> indices of the hosts it must not be placed on (`Snapshot.avoid`)
        self.avoid: dict[str, list[int]] = {}
        index = cluster.host_index
        for wid, names in (avoid or {}).items():
            hosts = sorted(index[n] for n in names if n in index)
            if hosts:
                self.avoid[wid] = hosts

    def avoided(self, w: Workload) -> list[int]:
        """The hosts `w` must not be placed on (the cluster refused it there)."""
        return self.avoid.get(w.id, []) if self.avoid else []

    def place_free(self, w: Workload, sh: Shape) -> tuple[Placement, ...] | None:
        """Placements for `w` in free, unreserved GPUs (best fit), or None; never on a
        host `w` must avoid (hidden from the free index while it is placed)."""
        avoided = self.avoided(w)
        if not avoided:
            return self._place_free(w, sh)
        index = self.cluster.index
        hidden = [(h, index.free[h]) for h in avoided if index.free[h]]
        for h, _ in hidden:
            index.set(h, 0)
        try:
            return self._place_free(w, sh)
        finally:
            for h, mask in hidden:
                index.set(h, mask)

    def _place_free(self, w: Workload, sh: Shape) -> tuple[Placement, ...] | None:
        c = self.cluster
        h = block_host(c.index, sh)
        if h >= 0:
            if self.pack_by_project:
                h = self._same_project(h, sh.block, w)
            return (c.take_block(h, c.best_start(h, sh.block), sh.gpus),)
        whole = whole_hosts(c.index, sh)
        return None if whole is None else tuple(c.take_whole(h) for h in whole)

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
        avoided = self.avoided(w)
        for h in hosts:
            f = free[h]
            if (
                f
                and h not in avoided
                and c.largest_block(h, f) >= sh.block
                and (best < 0 or f.bit_count() < free[best].bit_count())
            ):
                best = h
        if best < 0:
            return None
        return (c.take_block(best, c.best_start(best, sh.block), sh.gpus),)
