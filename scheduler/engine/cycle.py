"""One scheduling cycle: `plan(snapshot, policy, now) -> CyclePlan`.

Pure and deterministic: no clock, no I/O, no Django; ties are broken by a seeded hash
(see `fairshare`), by list order of the inputs or by host index, never by `hash(str)`.
The caller applies the plan's stops before its starts (starts may use GPUs that the
stops free).

Fair-share mode (ours), in order:

1. Drain: jobs on unhealthy hosts are stopped if unallocated or past their (capped)
   min runtime; an unhealthy host with nothing left is reported ready for repair.
2. Phase 1, allocated jobs: projects in Fair Tree order, each project's pending list
   in its given order (priority, submit). A job starts in free GPUs (best fit), else
   on a host reserved for a large job if it cannot delay that job, else by preempting:
   unallocated jobs, allocated jobs past their min runtime whose project ranks below
   the preemptor's *and still would after the preemptor's usage grows by the new
   job's GPUs x its min runtime* (no preemption cycles), and lower-priority jobs of
   the same project past their min runtime. Victims are chosen to lose the fewest
   GPU-seconds of work on allocated jobs, then on unallocated ones, then the fewest
   jobs. The first job needing whole hosts that can start neither way gets hosts
   reserved (those that become usable for it soonest).
   Projects with weight 0 run no allocated jobs.
3. Phase 2, unallocated jobs: same project order, free GPUs only (reserved hosts
   included: the job they are reserved for may preempt these at any time).

The scan stops early when nothing is free and nobody further down the order could
preempt anything, failed preemption searches are remembered for the cycle, and a job
that cannot fit is rejected in O(1) through the free-block index.
"""

from __future__ import annotations

import gc
import heapq
import math
import threading
from collections.abc import Callable, Iterable, Sequence
from functools import partial
from itertools import compress, count, repeat
from operator import attrgetter

from scheduler.engine.fairshare import compute_fair_share
from scheduler.engine.placement import FreeIndex, Shape, block_info, mask_of
from scheduler.engine.types import (
    CyclePlan,
    Host,
    HostReady,
    Placement,
    Policy,
    QueueEntry,
    Reservation,
    RunningWorkload,
    Snapshot,
    Start,
    Stop,
    StopReason,
    Workload,
)

__all__ = ["MODES", "plan"]

MODES = ("fairshare", "fifo", "priority", "static")
# When a project's jobs can start only on reserved hosts (by taking free GPUs or
# preempting unallocated backfill there), how many of its waiting jobs, in its order
# (priority first), are looked at per cycle; bounds the work on long queues.
RES_SCAN = 64
RES_SCAN_CYCLE = 512  # the same, for all projects together
INF = math.inf

# QueueEntry is a NamedTuple: entries are built in bulk with tuple.__new__ (C speed).
_QE_NEW = tuple.__new__
_GPUS = attrgetter("gpus")
_LOST = attrgetter("lost")
_ALLOC = attrgetter("alloc")


def _queue_entry(wid: str, project: str, pos: int, rank: int, metric: float, reason: str):
    return _QE_NEW(QueueEntry, (wid, project, pos, rank, metric, reason))


def _hours(s: float) -> str:
    if s < 3600:
        return f"{s / 60:.0f} min"
    return f"{s / 3600:.1f} h"


_NO_ROOM: dict[int, str] = {}
# Per running workload: (it, ((host index, GPU mask), ...), all its hosts healthy,
# protected until (-INF when unallocated), and for allocated ones (project, priority,
# id, host indices) as the reservation scan reads them, else None).
_Derived = tuple[
    RunningWorkload,
    tuple[tuple[int, int], ...],
    bool,
    float,
    tuple[str, int, str, tuple[int, ...]] | None,
]
_GOOD: dict[tuple[int, ...], set[int]] = {}  # host sizes -> job sizes that can run
_RUN_CACHE: dict[int, _Derived] = {}
_RUN_CACHE_KEY: tuple[object, float, list[bool], dict[str, int]] | None = None
# (ids of the last cycle's running workloads, their used-GPU mask per host, the free
# mask per host (0 on unhealthy ones) and the free GPUs in all)
_RUN_STATE: tuple[set[int], list[int], list[int], int] | None = None
# Objects that a cycle mutates (the _Run of each running workload) are reused across
# cycles only by the thread holding this lock; a concurrent plan() builds its own.
_LOCK = threading.Lock()
_RUNS: dict[int, _Run] = {}


_HostInfo = tuple[
    dict[str, int],
    list[int],
    list[bool],
    list[int],
    int,
    list[int],
    set[int],
    dict[int, Shape],
    dict[int, list[int]],
]
_HOSTS: tuple[object, _HostInfo] | None = None


def _host_info(hosts: Sequence[Host]) -> _HostInfo:
    """Per-host arrays of a cycle (host index, GPUs, health, full masks, healthy sizes),
    the job shapes on them and the healthy hosts of each size; kept across cycles while the caller passes the same
    hosts tuple (immutable: a list may change in place, so it is never reused)."""
    global _HOSTS
    hit = _HOSTS
    if hit is not None and hit[0] is hosts:
        return hit[1]
    G = [h.gpus for h in hosts]
    healthy = [h.healthy for h in hosts]
    sizes_healthy = [g for g, ok in zip(G, healthy, strict=True) if ok]
    info: _HostInfo = (
        {h.name: i for i, h in enumerate(hosts)},
        G,
        healthy,
        [(1 << g) - 1 for g in G],
        sum(sizes_healthy),
        sizes_healthy,
        set(sizes_healthy),
        {},
        {},
    )
    by_size = info[8]
    for h, (g, ok) in enumerate(zip(G, healthy, strict=True)):
        if ok:
            by_size.setdefault(g, []).append(h)
    if isinstance(hosts, tuple):
        _HOSTS = (hosts, info)
    return info


class _Run:
    """A running workload as the cycle sees it (built only when preemption needs it)."""

    __slots__ = (
        "alive",
        "alloc",
        "base",
        "gpus",
        "hm",
        "id",
        "lost",
        "prio",
        "project",
        "prot_end",
        "rank",
        "rw",
    )

    def __init__(
        self, rw: RunningWorkload, hm: tuple[tuple[int, int], ...], now: float, cap: float
    ):
        w = rw.workload
        self.rw = rw
        self.id = w.id
        self.project = w.project
        self.gpus = w.gpus
        self.alloc = rw.allocated
        self.prio = w.priority
        self.prot_end = rw.started_s + min(w.min_runtime_s, cap) if rw.allocated else rw.started_s
        base = rw.started_s
        if w.resumable and rw.last_checkpoint_s is not None:
            base = max(base, rw.last_checkpoint_s)
        self.base = base
        self.lost = w.gpus * max(0.0, now - base)
        self.hm = hm
        self.alive = True
        self.rank = 0  # fair-share order index of its project (set by the fair-share cycle)


# Host-packing key of unallocated work (no project name can be empty).
_UNALLOCATED = ""


class _Cycle:
    def __init__(self, snap: Snapshot, policy: Policy, now: float, shared: bool = False) -> None:
        self.shared = shared  # this cycle owns the cross-cycle mutable caches (_RUNS)
        self.snap = snap
        self.policy = policy
        self.now = now
        self.cap = policy.max_min_runtime_s
        hosts = snap.hosts
        self.hosts = hosts
        (
            self.hidx,
            self.G,
            self.healthy,
            self.full,
            self.healthy_gpus,
            self.sizes_healthy,
            self.host_sizes,
            self.shapes,
            self.healthy_by_size,
        ) = _host_info(hosts)
        self.index = FreeIndex(self.G)
        self.tfree = [0] * len(hosts)  # true free mask of healthy hosts
        self.free_gpus = 0  # free GPUs on healthy hosts (reserved ones included)
        self._coverable: dict[int, int] | None = None
        self._hp: list[dict[str, int]] | None = None
        self._start_proj: dict[str, str] = {}
        self.reserved: dict[int, int] = {}  # host -> reservation number
        self.res_info: list[tuple[Workload, int, float, list[int]]] = []  # (job, rank, T, hosts)
        # reservation -> smallest block size that its hosts' free + unallocated GPUs
        # could not hold (exact for the cycle: those GPUs only get fewer)
        self.res_fail: dict[int, int] = {}
        self._rp = False
        self._rp_ver = -1
        self.res_budget = RES_SCAN_CYCLE  # jobs looked at only for reserved-host room
        self.starts: list[Start] = []
        self.stops: list[Stop] = []
        self.reservations: list[Reservation] = []
        self.ready: list[HostReady] = []
        self.started: set[str] = set()
        self.stopped: set[str] = set()
        self.touched: set[int] = set()  # hosts that got new work this cycle
        self.why: dict[str, str] = {}  # job-specific notes for the queue
        self.why_proj: set[str] = set()  # projects with such notes
        self.started_proj: set[str] = set()
        self._good: set[int] | None = None
        # (workload, ((host, GPU mask), ...), on healthy hosts only, protected until)
        self.allruns: list[_Derived] = []
        self.cands: list[_Derived] = []  # unprotected, on healthy hosts
        self._vbh: dict[int, list[tuple[_Run, int]]] | None = None  # built when needed
        self._vbhm: dict[int, list[tuple[_Run, int]]] = {}  # the same, once built
        self._vsorted: list[_Run] = []
        self._vdead = 0
        self.rank: dict[str, int] = {}
        self.ver = 0  # bumped on every change of free GPUs or reservations
        self._ru = False
        self._ru_ver = -1
        self._build()

    # -- state --------------------------------------------------------------------------

    def _build(self) -> None:
        healthy, now = self.healthy, self.now
        # Per-run derived data (host indices, GPU masks, protection end) is memoised by
        # object identity while the caller passes the same hosts object and cap (the
        # simulator does); the used-GPU masks are then updated from the previous cycle's
        # by the difference of the two running sets (a few starts and stops), so a cycle
        # costs a few C-level passes over the running list instead of Python per job.
        global _RUN_CACHE_KEY, _RUN_STATE
        ck = _RUN_CACHE_KEY
        if (
            ck is None
            or ck[0] is not self.hosts
            or ck[1] != self.cap
            or (ck[2] is not self.healthy and ck[2] != self.healthy)
            or (ck[3] is not self.hidx and ck[3] != self.hidx)
        ):
            _RUN_CACHE.clear()
            _RUN_STATE = None
            _RUN_CACHE_KEY = (self.hosts, self.cap, self.healthy, self.hidx)
        elif len(_RUN_CACHE) > 200_000:
            _RUN_CACHE.clear()
            _RUN_STATE = None
        cache = _RUN_CACHE
        running = self.snap.running
        ids = list(map(id, running))
        cur = set(ids)
        state = _RUN_STATE
        _RUN_STATE = None
        used: list[int] | None = None
        tfree: list[int] | None = None
        nfree = 0
        full = self.full
        overlap = len(cur) != len(ids)
        if state is not None and not overlap:
            old, used0, tfree0, nfree = state
            gone = old - cur
            new = cur - old
            if len(gone) + len(new) < len(ids):
                used = used0  # owned by the state, which was taken out above
                tfree = tfree0  # (the same)
                changed: set[int] = set()
                for i in gone:
                    for h, m in cache.pop(i)[1]:
                        used[h] &= ~m
                        changed.add(h)
                by_id: dict[int, RunningWorkload] | None = None
                for i in new:
                    c = cache.get(i)
                    if c is None:
                        if by_id is None:
                            by_id = dict(zip(ids, running, strict=True))
                        c = cache[i] = self._derive(by_id[i])
                    for h, m in c[1]:
                        if used[h] & m:
                            overlap = True
                        used[h] |= m
                        changed.add(h)
                # free masks: only the hosts whose used GPUs changed are recomputed
                for h in changed:
                    if healthy[h]:
                        f = full[h] & ~used[h]
                        nfree += f.bit_count() - tfree[h].bit_count()
                        tfree[h] = f
        if used is None:
            used = [0] * len(self.G)
            get = cache.get
            for rw in running:
                c = get(id(rw))
                if c is None or c[0] is not rw:
                    c = cache[id(rw)] = self._derive(rw)
                for h, m in c[1]:
                    if used[h] & m:
                        overlap = True
                    used[h] |= m
        if tfree is None:
            tfree = [0] * len(used)
            nfree = 0
            for h, ok in enumerate(healthy):
                if ok:
                    f = full[h] & ~used[h]
                    tfree[h] = f
                    nfree += f.bit_count()
        allruns = self.allruns = list(map(cache.__getitem__, ids))
        if not overlap:
            _RUN_STATE = (cur, used.copy(), tfree.copy(), nfree)
        self.cands = [c for c in allruns if c[3] <= now and c[2]]
        bad = [c for c in allruns if not c[2]] if not all(healthy) else []
        # true free masks (full & ~used on healthy hosts, else 0) and their GPU count;
        # only hosts with free GPUs (a few) are indexed, in host order
        self.tfree = tfree  # owned by this cycle: the state keeps a copy
        self.free_gpus = nfree
        iset = self.index.set
        for h in compress(range(len(tfree)), tfree):
            iset(h, tfree[h])
        self._drain(bad)

    def _derive(self, rw: RunningWorkload) -> _Derived:
        hidx, healthy = self.hidx, self.healthy
        lst = []
        ok = True
        for pl in rw.placements:
            h = hidx.get(pl.host, -1)
            if h < 0:
                raise ValueError(f"running {rw.workload.id} is on unknown host {pl.host!r}")
            lst.append((h, mask_of(pl.gpu_indices)))
            ok = ok and healthy[h]
        w = rw.workload
        if rw.allocated:
            prot_end = rw.started_s + min(w.min_runtime_s, self.cap)
            info = (w.project, w.priority, w.id, tuple(h for h, _ in lst))
            return (rw, tuple(lst), ok, prot_end, info)
        return (rw, tuple(lst), ok, -INF, None)

    def _drain(self, bad: list[_Derived]) -> None:
        healthy = self.healthy
        if not bad and all(healthy):
            return
        unhealthy = [h for h, ok in enumerate(healthy) if not ok]
        if not unhealthy:
            return
        left = dict.fromkeys(unhealthy, 0)
        for rw, hm, _, _, _ in bad:
            w = rw.workload
            prot_end = rw.started_s + min(w.min_runtime_s, self.cap) if rw.allocated else 0.0
            bad_hosts = [self.hosts[h].name for h, _ in hm if not healthy[h]]
            if prot_end <= self.now:
                if rw.allocated:
                    why = (
                        f"drained: host {', '.join(bad_hosts)} is unhealthy and the job's "
                        f"{_hours(min(w.min_runtime_s, self.cap))} protected minimum runtime is over"
                    )
                else:
                    why = (
                        f"drained: host {', '.join(bad_hosts)} is unhealthy; unallocated jobs "
                        "are stopped at once"
                    )
                self._stop(rw.workload, StopReason.DRAIN, why, None)
                for h, m in hm:
                    if healthy[h]:
                        self._free(h, m)
            else:
                for h, _ in hm:
                    if not healthy[h]:
                        left[h] += 1
        for h in unhealthy:
            if not left[h]:
                self.ready.append(
                    HostReady(
                        host=self.hosts[h].name,
                        reason=f"host {self.hosts[h].name} is unhealthy and empty: ready for repair",
                    )
                )

    def reserved_usable(self) -> bool:
        """Whether a reserved host has free GPUs that some job could still be allowed.

        Cached until the next change of free GPUs or reservations (`ver`)."""
        if not self.reserved:
            return False
        if self._ru_ver == self.ver:
            return self._ru
        tfree = self.tfree
        ru = any(T < INF and any(tfree[h] for h in hosts) for _, _, T, hosts in self.res_info)
        self._ru, self._ru_ver = ru, self.ver
        return ru

    def reserved_preemptible(self) -> bool:
        """Whether a reserved host (usable by some job before its reservation's time) runs
        unallocated work: a job that cannot delay the reservation may preempt it there.

        Cached until the next change of free GPUs or reservations (`ver`)."""
        if not self.reserved or self.res_budget <= 0:
            return False
        if self._rp_ver == self.ver:
            return self._rp
        self.victims_by_host()
        vbhm = self._vbhm
        rp = False
        for _, _, T, hosts in self.res_info:
            if T < INF and any(u.alive and not u.alloc for h in hosts for u, _ in vbhm.get(h, ())):
                rp = True
                break
        self._rp, self._rp_ver = rp, self.ver
        return rp

    def _free(self, h: int, m: int) -> None:
        self.ver += 1
        self.free_gpus += (m & ~self.tfree[h]).bit_count()
        f = self.tfree[h] | m
        self.tfree[h] = f
        if h not in self.reserved:
            self.index.set(h, f)

    def _take(self, h: int, m: int) -> None:
        self.ver += 1
        self.free_gpus -= (m & self.tfree[h]).bit_count()
        f = self.tfree[h] & ~m
        self.tfree[h] = f
        self.touched.add(h)
        self.index.set(h, 0 if h in self.reserved else f)

    def _stop(self, w: Workload, code: StopReason, why: str, for_id: str | None) -> None:
        self.stopped.add(w.id)
        self.stops.append(
            Stop(
                workload_id=w.id,
                reason_code=code,
                reason=why,
                requeue=w.resumable,
                for_workload_id=for_id,
            )
        )

    def shape(self, g: int) -> Shape:
        sh = self.shapes.get(g)
        if sh is None:
            sh = Shape(g, self.sizes_healthy or self.G)
            self.shapes[g] = sh
        return sh

    # -- placement ----------------------------------------------------------------------

    def place_free(self, w: Workload, sh: Shape) -> tuple[Placement, ...] | None:
        """Placements for `w` in free, unreserved GPUs (best fit), or None."""
        index = self.index
        if sh.block:
            h = index.find_block(sh.block)
            if h >= 0:
                if self.policy.mode == "fairshare":
                    h = self._same_project(h, sh.block, w)
                s = block_info(self.G[h], self.tfree[h])[1][sh.block]
                g = sh.gpus
                self._take(h, ((1 << g) - 1) << s)
                return (Placement(self.hosts[h].name, tuple(range(s, s + g))),)
        for size, n in sh.whole:
            d = index.whole.get(size)
            if d is not None and len(d) >= n:
                chosen = list(d)[:n]
                out = []
                for h in chosen:
                    self._take(h, self.full[h])
                    out.append(Placement(self.hosts[h].name, tuple(range(size))))
                return tuple(out)
        return None

    def _host_projects(self) -> list[dict[str, int]]:
        """Per host, the GPUs each project's jobs hold there (built when first needed in
        a cycle, this cycle's starts included; kept up to date by `_same_project`)."""
        hp = self._hp
        if hp is None:
            hp = self._hp = [{} for _ in self.G]
            for rw, hm, _, _, _ in self.allruns:
                p = rw.workload.project if rw.allocated else _UNALLOCATED
                for h, m in hm:
                    d = hp[h]
                    d[p] = d.get(p, 0) + m.bit_count()
            hidx = self.hidx
            for st in self.starts:
                p = self._start_proj[st.workload_id]
                for pl in st.placements:
                    d = hp[hidx[pl.host]]
                    d[p] = d.get(p, 0) + len(pl.gpu_indices)
        return hp

    def _same_project(self, h0: int, p: int, w: Workload) -> int:
        """Among the best-fit hosts (as few free GPUs as `h0`), the one where `w`'s project
        holds the most GPUs: hosts then hold one project's work, so that project's
        higher-priority jobs (and projects ranked above it) can assemble whole blocks
        by preemption without hitting a third project's job. Unallocated jobs count as
        one project of their own: packed together, their hosts can be emptied at once
        for any allocated job, instead of each sharing a host with protected work."""
        index = self.index
        d = index.buckets[p][index.nfree[h0]]
        proj = w.project if w.min_runtime_s > 0 else _UNALLOCATED
        if len(d) > 1:
            hp = self._host_projects()
            best, bk = h0, hp[h0].get(proj, 0)
            for n, h in enumerate(d):
                k = hp[h].get(proj, 0)
                if k > bk or (k == bk and h < best):
                    best, bk = h, k
                if n >= 31:
                    break
            h0 = best
        hp = self._hp
        if hp is not None:
            dd = hp[h0]
            dd[proj] = dd.get(proj, 0) + w.gpus
        return h0

    def place_reserved(
        self, w: Workload, sh: Shape, hosts: Iterable[int]
    ) -> tuple[Placement, ...] | None:
        """Placements for a single-host job on the free GPUs of reserved hosts."""
        if not sh.block:
            return None
        best = -1
        for h in hosts:
            f = self.tfree[h]
            if (
                f
                and block_info(self.G[h], f)[0] >= sh.block
                and (best < 0 or f.bit_count() < self.tfree[best].bit_count())
            ):
                best = h
        if best < 0:
            return None
        s = block_info(self.G[best], self.tfree[best])[1][sh.block]
        g = sh.gpus
        self._take(best, ((1 << g) - 1) << s)
        return (Placement(self.hosts[best].name, tuple(range(s, s + g))),)

    def start(self, w: Workload, pls: tuple[Placement, ...], allocated: bool, why: str) -> None:
        self._start_proj[w.id] = w.project if allocated else _UNALLOCATED
        self.started.add(w.id)
        self.started_proj.add(w.project)
        self.starts.append(Start(workload_id=w.id, placements=pls, allocated=allocated, reason=why))

    # -- preemption ---------------------------------------------------------------------

    def victims_by_host(self) -> dict[int, list[tuple[_Run, int]]]:
        """Preemption candidates (unallocated or past min runtime) per healthy host,
        each with its GPU mask there.

        Also keeps them in one list sorted cheapest first (unallocated by lost work,
        then allocated by lost work) for the best-first block search.
        """
        vbhm = self._vbh
        if vbhm is None:
            vbhm = {}
            self._vbhm = vbhm
            now, cap, stopped = self.now, self.cap, self.stopped
            rank, nrank = self.rank, len(self.rank)
            # _Run objects are kept across cycles (by running-workload identity, the
            # object is held so its id stays unique) while this thread owns the caches;
            # only their per-cycle fields (alive, lost, rank) are reset here.
            cache = _RUNS if self.shared else {}
            if len(cache) > 4 * len(self.cands) + 1024:
                cache.clear()
            get = cache.get
            runs = []
            append = runs.append
            for rw, hm, _, _, _ in self.cands:
                if stopped and rw.workload.id in stopped:
                    continue
                r = get(id(rw))
                if r is None or r.rw is not rw or r.hm is not hm:  # hm: re-derived on
                    # a change of hosts or cap, so a kept _Run never has stale host indices
                    r = cache[id(rw)] = _Run(rw, hm, now, cap)
                else:
                    r.alive = True
                    lost = now - r.base
                    r.lost = r.gpus * lost if lost > 0.0 else 0.0
                r.rank = rank.get(r.project, nrank)
                append(r)
                for h, m in hm:
                    lst = vbhm.get(h)
                    if lst is None:
                        vbhm[h] = [(r, m)]
                    else:
                        lst.append((r, m))
            # == sort by (alloc, lost), stable: two C-level key sorts
            runs.sort(key=_LOST)
            runs.sort(key=_ALLOC)
            self._vsorted = runs
            self._vdead = 0
            self._vbh = vbhm
        return vbhm

    def _coverable_hosts(self) -> dict[int, int]:
        """Hosts (-> GPUs) that free GPUs plus all preemption candidates could empty.

        Computed once per cycle; it stays a superset for the rest of the cycle: GPUs only
        become free by stopping candidates (already counted), reserved hosts are
        excluded by every user, and new work only makes hosts less coverable."""
        cov = self._coverable
        if cov is None:
            cov = {}
            self.victims_by_host()
            tfree, full, reserved, G = self.tfree, self.full, self.reserved, self.G
            for h, vs in self._vbhm.items():
                m = tfree[h]
                for _, mu in vs:
                    m |= mu
                if m == full[h] and h not in reserved:
                    cov[h] = G[h]
            for g, d in self.index.whole.items():
                for h in d:
                    cov[h] = g
            self._coverable = cov
        return cov

    def _enough_coverable(self, sh: Shape) -> bool:
        """Whether enough hosts could be emptied for a whole-host job (upper bound)."""
        cov = self._coverable_hosts()
        for size, n in sh.whole:
            if sum(1 for h, g in cov.items() if g == size and h not in self.touched) >= n:
                return True
        return False

    def preempt_search(
        self,
        sh: Shape,
        proj: str | None,
        prio: int,
        tfun: Callable[[], int],
        beats: Callable[[str], bool] | None = None,
    ) -> tuple[list[tuple[int, int]], list[_Run]] | None:
        """Cheapest (hosts, block starts) and victims that make room for a job of shape `sh`.

        Cost: GPU-seconds lost on allocated victims, then on unallocated ones, then the
        number of victims, then fewest free GPUs left (tighter fit). Reserved hosts are
        never used. Single-host jobs use a best-first search: victims are visited
        cheapest first and the search ends once the next victim alone costs at least
        the best block found (costs add up, so no later block can be cheaper).
        """
        self.victims_by_host()
        tfree, G, reserved = self.tfree, self.G, self.reserved

        tbox: list[int] = []
        # Another project's job is a victim only if that project ranks at or below the
        # threshold t *and* the preemptor still beats it after the preemption: the
        # threshold alone is not exact where adding usage moves a whole subtree of the
        # tree below another (then the order of "still beaten" is not a suffix).
        beaten: dict[str, bool] = {}

        def beat(q: str) -> bool:
            ok = beaten.get(q)
            if ok is None:
                ok = beaten[q] = beats is None or beats(q)
            return ok

        def allowed(v: _Run) -> bool:
            # unallocated; same project and lower priority; other project ranked >= t
            if not v.alloc:
                return True
            if v.project == proj:
                return v.prio < prio
            if not tbox:
                tbox.append(tfun())
            return v.rank >= tbox[0] and beat(v.project)

        if sh.block:
            p = sh.block
            pmask = (1 << p) - 1
            best_key: tuple | None = None
            best: tuple[list[tuple[int, int]], list[_Run]] | None = None
            runs = self._vsorted
            if self._vdead * 4 > len(runs):
                runs = [v for v in runs if v.alive]
                self._vsorted = runs
                self._vdead = 0
            vbhm = self._vbhm
            host_avail: dict[int, tuple[int, list[tuple[_Run, int]]]] = {}
            seen: set[tuple[int, int]] = set()
            t = -1  # victims' rank threshold, computed when first needed
            for v in runs:
                if not v.alive:
                    continue
                if v.alloc:
                    if best_key is not None and (v.lost, 0.0) >= best_key[:2]:
                        break  # victims come cheapest first: nothing later can be cheaper
                    if v.project == proj:
                        if v.prio >= prio:
                            continue
                    else:
                        if t < 0:
                            t = tfun()
                        if v.rank < t or not beat(v.project):
                            continue
                elif best_key is not None and (0.0, v.lost) >= best_key[:2]:
                    break
                for h, m in v.hm:
                    if h in reserved or G[h] < p:
                        continue
                    ha = host_avail.get(h)
                    if ha is None:
                        avail = tfree[h]
                        on = []
                        for u, mu in vbhm[h]:
                            if not u.alive:
                                continue
                            if u.alloc and u is not v:
                                if u.project == proj:
                                    if u.prio >= prio:
                                        continue
                                else:
                                    if t < 0:
                                        t = tfun()
                                    if u.rank < t or not beat(u.project):
                                        continue
                            avail |= mu
                            on.append((u, mu))
                        ha = (avail, on)
                        host_avail[h] = ha
                    avail, on = ha
                    gh = G[h]
                    if block_info(gh, avail)[0] < p:
                        continue
                    fr = None
                    for s in range(0, gh - p + 1, p):
                        bm = pmask << s
                        if not bm & m or avail & bm != bm or (h, s) in seen:
                            continue
                        seen.add((h, s))
                        ca = cu = 0.0
                        chosen = []
                        for u, mu in on:
                            if mu & bm:
                                chosen.append(u)
                                if u.alloc:
                                    ca += u.lost
                                else:
                                    cu += u.lost
                        if fr is None:
                            fr = tfree[h].bit_count()
                        key = (ca, cu, len(chosen), fr, h, s)
                        if best_key is None or key < best_key:
                            best_key = key
                            best = ([(h, s)], chosen)
            return best
        # Only hosts that all candidates together could empty can be emptied by the
        # allowed ones (a subset): the per-cycle coverable map prunes the rest.
        cov = self._coverable_hosts()
        vbhm, full = self._vbhm, self.full
        for size, n in sh.whole:
            cand = []
            for h in self.index.whole.get(size, {}):
                cand.append(((0.0, 0.0, 0, h), h, []))
            for h in cov:
                if h in reserved or G[h] != size:
                    continue
                vs = vbhm.get(h)
                if vs is None:
                    continue
                vm = tfree[h]
                live = []
                for v, mu in vs:
                    if v.alive and allowed(v):
                        live.append(v)
                        vm |= mu
                if not live or vm != full[h]:
                    continue
                ca = sum(v.lost for v in live if v.alloc)
                cu = sum(v.lost for v in live if not v.alloc)
                on = [v for v in live if _mask_on(v, h)]
                cand.append(((ca, cu, len(on), h), h, on))
            if len(cand) < n:
                continue
            cand.sort(key=lambda c: c[0])
            hosts = []
            victims: dict[str, _Run] = {}
            for _, h, on in cand[:n]:
                hosts.append((h, 0))
                for v in on:
                    victims[v.id] = v
            return hosts, list(victims.values())
        return None

    def apply_preemption(
        self,
        w: Workload,
        sh: Shape,
        hosts: list[tuple[int, int]],
        victims: list[_Run],
        reason_of: Callable[[_Run], tuple[StopReason, str]],
    ) -> tuple[Placement, ...]:
        self._vdead += len(victims)
        for v in victims:
            v.alive = False
            code, why = reason_of(v)
            self._stop(v.rw.workload, code, why, w.id)
            for h, m in v.hm:
                if self.healthy[h]:
                    self._free(h, m)
        out = []
        if sh.block:
            h, s = hosts[0]
            g = sh.gpus
            self._take(h, ((1 << g) - 1) << s)
            out.append(Placement(self.hosts[h].name, tuple(range(s, s + g))))
        else:
            for h, _ in hosts:
                self._take(h, self.full[h])
                out.append(Placement(self.hosts[h].name, tuple(range(self.G[h]))))
        return tuple(out)

    def plan(self, queue: list[QueueEntry], order: tuple[tuple[str, float], ...] = ()) -> CyclePlan:
        return CyclePlan(
            starts=tuple(self.starts),
            stops=tuple(self.stops),
            reservations=tuple(self.reservations),
            hosts_ready=tuple(self.ready),
            queue=tuple(queue),
            project_order=order,
        )


def _mask_on(v: _Run, h: int) -> int:
    for hh, m in v.hm:
        if hh == h:
            return m
    return 0


def _lost_text(v: _Run) -> str:
    return f"{v.lost / 3600:.1f} GPU-h of work since its last checkpoint is lost"


# ---------------------------------------------------------------------------------------
# fair share (ours)
# ---------------------------------------------------------------------------------------


class _FairShareCycle(_Cycle):
    def run(self) -> CyclePlan:
        snap, policy, cap, now = self.snap, self.policy, self.cap, self.now
        pending = snap.pending
        fs = compute_fair_share(snap.tree, snap.usage, policy.seed)
        self.fs = fs
        order = list(fs.order)
        known = fs.tree.leaf_index
        extra = sorted(p for p in pending if p not in known)
        order.extend(extra)
        self.order = order
        rank = {p: i for i, p in enumerate(order)}
        self.rank = rank
        ct = fs.tree
        ent = {ct.names[i]: ct.entitled[i] for i in ct.leaves}
        self.ent = ent
        nproj = len(order)

        # What may still be preempted, kept exact as victims are stopped.
        self.unalloc_gpus = 0
        self.pre_cnt = [0] * (nproj + 1)  # alive past-min-runtime allocated jobs per rank
        self.pre_gpus = [0] * (nproj + 1)  # and their GPUs
        self.own_gpus: dict[str, int] = {}
        self.pre_max_rank = -1
        self.own_cnt: dict[str, int] = {}
        own_min_prio: dict[str, int] = {}  # lowest priority among them (a lower bound)
        own_gpus, own_cnt, stopped = self.own_gpus, self.own_cnt, self.stopped
        unalloc = 0
        for rw, _, _, _, _ in self.cands:
            w = rw.workload
            if stopped and w.id in stopped:
                continue
            if not rw.allocated:
                unalloc += w.gpus
                continue
            p = w.project
            g = own_gpus.get(p)
            if g is None:
                own_gpus[p] = w.gpus
                own_cnt[p] = 1
                own_min_prio[p] = w.priority
            else:
                own_gpus[p] = g + w.gpus
                own_cnt[p] += 1
                if w.priority < own_min_prio[p]:
                    own_min_prio[p] = w.priority
        self.unalloc_gpus = unalloc
        pre_cnt, pre_gpus = self.pre_cnt, self.pre_gpus
        for p, c in own_cnt.items():
            r = rank.get(p, nproj)
            pre_cnt[r] += c
            pre_gpus[r] += own_gpus[p]
            if r > self.pre_max_rank:
                self.pre_max_rank = r
        self.own_min_prio = own_min_prio

        delta: dict[str, float] = {}
        last_t: dict[str, int] = {}
        fails: list[tuple[int, int]] = []  # (threshold, size) of failed preemption searches
        own_fails: dict[str, list[tuple[int, int, int]]] = {}  # same, with own victims
        index = self.index
        shape = self.shape
        why = self.why
        res_left = max(0, policy.max_reservations)
        searches_left = policy.max_failed_preemption_searches
        stop_phase1 = False

        for r, proj in enumerate(order):
            lst = pending.get(proj)
            if not lst or ent.get(proj, 0.0) <= 0.0:
                continue
            omp = own_min_prio.get(proj)
            if (
                not index.any_free()
                and self.unalloc_gpus <= 0
                and self.pre_max_rank <= r
                and omp is None
                and not self.reserved_usable()
            ):
                continue  # nothing free and nothing this project may preempt
            # Fast path: while nothing is free, no reserved host is usable and no job of
            # this project may preempt its own jobs, a job can only start by preempting,
            # and a failed search at threshold <= r + 1 for a size <= its own proves it
            # cannot (victims only get fewer). Such jobs are skipped with one lookup; the
            # flags are recomputed after every job that takes the full path.
            top_prio = lst[0].priority  # lists come in priority order
            need = True
            fast = False
            res_pre = False
            res_t, res_blk = -INF, 0
            res_scan = -1  # > 0: jobs left to look at for room on reserved hosts only
            dead = INF
            for w in lst:
                if w.min_runtime_s <= 0:
                    continue
                if need:
                    need = fast = False
                    res_scan = -1
                    if not index.any_free() and not self.reserved_usable():
                        omp = own_min_prio.get(proj)
                        if omp is None or omp >= top_prio:
                            if self.unalloc_gpus <= 0 and self.pre_max_rank <= r:
                                break  # nothing free and nothing this project may preempt
                            fast = True
                            dead = INF
                            if searches_left <= 0:
                                dead = 0
                            else:
                                lo = r + 1 if self.pre_max_rank > r else INF
                                for ft, fsz in fails:
                                    if ft <= lo and fsz < dead:
                                        dead = fsz
                            res_pre = self.reserved_preemptible()
                            if res_pre:
                                res_t, res_blk = self._res_bound(r, proj)
                                res_pre = res_blk > 1
                            if dead <= 1 and not res_left:
                                if not res_pre:
                                    break  # every job of this project would fail
                                # only room on a reserved host is left: look for it
                                # among the project's first (highest-priority) jobs
                                res_scan = RES_SCAN
                if fast:
                    sh = shape(w.gpus)
                    if (
                        (sh.block or sh.gpus) >= dead
                        and not (res_left and (sh.whole or sh.block in self.host_sizes))
                        and not (
                            res_pre
                            and 0 < sh.block < res_blk
                            and now + min(w.min_runtime_s, cap) <= res_t
                        )
                    ):
                        if res_pre:
                            self.res_budget -= 1
                            res_scan -= 1
                            if not res_scan or self.res_budget <= 0:
                                need = True  # re-check: reserved room may be spent
                                if not res_scan:
                                    break
                        continue
                need = True
                omp = own_min_prio.get(proj)
                can_own = omp is not None and omp < w.priority
                if (
                    not index.any_free()
                    and self.unalloc_gpus <= 0
                    and self.pre_max_rank <= r
                    and not can_own
                    and not self.reserved_usable()
                ):
                    break  # list is in priority order: later jobs can preempt even less
                sh = shape(w.gpus)
                if sh.reason:
                    why[w.id] = sh.reason
                    self.why_proj.add(w.project)
                    continue
                d_job = w.gpus * min(w.min_runtime_s, cap)
                pls = self.place_free(w, sh)
                if pls is not None:
                    delta[proj] = delta.get(proj, 0.0) + d_job
                    self.start(w, pls, True, self._start_text(w, r, pls, "free GPUs"))
                    continue
                if (
                    self.reserved
                    and sh.block
                    and (self.reserved_usable() or self.reserved_preemptible())
                ):
                    got = self._place_on_reservations(w, r)
                    if got is not None:
                        pls, victims = got
                        how = "GPUs of a reserved host it cannot delay"
                        if victims:
                            self._forget(victims)
                            n = len(victims)
                            how += (
                                f", freed by preempting {n} unallocated job{'s' if n > 1 else ''}"
                            )
                        delta[proj] = delta.get(proj, 0.0) + d_job
                        self.start(w, pls, True, self._start_text(w, r, pls, how))
                        continue
                # Preemption: victims' projects must rank at order index t or below, where
                # t is where this project would land with its usage grown by the new jobs.
                size = sh.block or sh.gpus
                tc = [nproj if self.pre_max_rank <= r or proj not in known else -1]
                d = delta.get(proj, 0.0) + d_job

                def tfun(proj: str = proj, d: float = d, r: int = r, tc: list[int] = tc) -> int:
                    """Computed only when an allocated victim of another project is seen."""
                    if tc[0] < 0:
                        # t only grows with added usage: search from the last one
                        lo = max(r, last_t.get(proj, r + 1) - 1)
                        tc[0] = last_t[proj] = fs.position_after(proj, d, lo)
                    return tc[0]

                possible = (
                    self.unalloc_gpus > 0
                    or can_own
                    or (self.pre_max_rank > r and self.pre_max_rank >= tfun())
                )
                if possible and not can_own:
                    for ft, fsz in fails:
                        if fsz <= size and (ft <= r + 1 or ft <= tfun()):
                            possible = False
                            break
                elif possible:
                    for ft, fsz, fp in own_fails.get(proj, ()):
                        if fsz <= size and fp >= w.priority and (ft <= r + 1 or ft <= tfun()):
                            possible = False
                            break
                if possible and searches_left <= 0:
                    possible = False  # bounded work per cycle; later cycles retry
                if possible:
                    # Necessary conditions, O(projects): enough GPUs among free and allowed
                    # victims; for whole hosts, enough hosts that could be emptied at all.
                    room = self.free_gpus + self.unalloc_gpus
                    if can_own:
                        room += self.own_gpus.get(proj, 0)
                    if room < w.gpus and self.pre_max_rank > r:
                        room += sum(self.pre_gpus[tfun() :])
                    if room < w.gpus or not sh.block and not self._enough_coverable(sh):
                        possible = False
                if possible:
                    searches_left -= 1
                    pidx = known.get(proj)
                    found = self.preempt_search(
                        sh,
                        proj,
                        w.priority,
                        tfun,
                        None if pidx is None else partial(fs.beats_after, pidx, d),
                    )
                    if found is None:
                        # The failure also holds for any threshold down to the next rank
                        # that still has preemptible jobs (counts only ever shrink).
                        t = tfun()
                        pc = self.pre_cnt
                        while t > 0 and not pc[t - 1]:
                            t -= 1
                        if can_own:
                            own_fails.setdefault(proj, []).append((t, size, w.priority))
                        else:
                            fails.append((t, size))
                    else:
                        hosts, victims = found
                        pls = self.apply_preemption(
                            w, sh, hosts, victims, lambda v, w=w, r=r: self._victim_text(v, w, r)
                        )
                        self._forget(victims)
                        searches_left += 1  # only failed searches count
                        delta[proj] = delta.get(proj, 0.0) + d_job
                        n = len(victims)
                        self.start(
                            w,
                            pls,
                            True,
                            self._start_text(
                                w, r, pls, f"GPUs freed by preempting {n} job{'s' if n > 1 else ''}"
                            ),
                        )
                        continue
                # Cannot start now.
                if res_left and (sh.whole or sh.block in self.host_sizes):
                    res_left -= 1
                    self._reserve(w, sh, r, d)
                elif index.any_free() or possible:
                    why[w.id] = _NO_ROOM.get(size) or _NO_ROOM.setdefault(
                        size, f"no free aligned block of {size} GPUs and no job it may preempt"
                    )
                    self.why_proj.add(w.project)
                if (
                    searches_left <= 0
                    and not res_left
                    and not index.any_free()
                    and not self.reserved_usable()
                    and not self.reserved_preemptible()
                ):
                    stop_phase1 = True  # no more work this cycle can do for allocated jobs
                    break
            if stop_phase1:
                break

        # Phase 2: unallocated work fills what is left, reserved hosts included.
        for h in list(self.reserved):
            del self.reserved[h]
            self.index.set(h, self.tfree[h])
        cnt, shapes = index.cnt, self.shapes
        for proj in order:
            if not index.any_free():
                break
            lst = pending.get(proj)
            if not lst:
                continue
            r = rank[proj]
            for w in lst:
                if w.min_runtime_s > 0:
                    continue
                sh = shapes.get(w.gpus) or shape(w.gpus)
                if sh.reason:
                    why[w.id] = sh.reason
                    self.why_proj.add(w.project)
                    continue
                if sh.block and not sh.whole and cnt[sh.block] <= 0:
                    if cnt[1] <= 0:
                        break  # nothing free (place_free would fail, as below)
                    continue  # no free aligned block of its size: place_free would fail
                pls = self.place_free(w, sh)
                if pls is not None:
                    self.start(
                        w, pls, False, self._start_text(w, r, pls, "free GPUs (unallocated)")
                    )
                elif not index.any_free():
                    break
        queue = self._explain() if policy.explain_queue else []
        return self.plan(queue, tuple((p, fs.factor.get(p, 0.0)) for p in order))

    def _forget(self, victims: list[_Run]) -> None:
        """Keep the preemptible-work counters exact after victims are stopped."""
        for v in victims:
            if not v.alloc:
                self.unalloc_gpus -= v.gpus
                continue
            self.pre_cnt[v.rank] -= 1
            self.pre_gpus[v.rank] -= v.gpus
            self.own_gpus[v.project] -= v.gpus
            left = self.own_cnt[v.project] - 1
            if left:
                self.own_cnt[v.project] = left
            else:
                del self.own_cnt[v.project]
                self.own_min_prio.pop(v.project, None)
        m = self.pre_max_rank
        while m >= 0 and not self.pre_cnt[m]:
            m -= 1
        self.pre_max_rank = m

    # -- reservations -------------------------------------------------------------------

    def _res_bound(self, r: int, proj: str) -> tuple[float, int]:
        """For jobs of `proj` (rank index `r`): the latest protection end and the block
        size bound (exclusive) with which one may still find room on a reserved host;
        an upper bound that lets the fast path skip the others with two comparisons."""
        t, blk = -INF, 0
        fail = self.res_fail
        for k, (rj, rr, T, _) in enumerate(self.res_info):
            if T == INF or not (r > rr or proj == rj.project):
                continue
            t = max(t, T)
            blk = max(blk, fail.get(k, 1 << 30))
        return t, blk

    def _place_on_reservations(
        self, w: Workload, r: int
    ) -> tuple[tuple[Placement, ...], list[_Run]] | None:
        """A job may use a reserved host only if it cannot delay the job the host is
        reserved for: its protection ends by the time the host would be usable for that
        job, which may then preempt it. It takes free GPUs there, else an aligned block of
        free GPUs and unallocated jobs (preempted; they run there only as backfill), the
        one losing the least work. Returns the placements and the victims to stop."""
        end = self.now + min(w.min_runtime_s, self.cap)
        sh = self.shape(w.gpus)
        fail = self.res_fail
        for k, (rj, rr, T, hosts) in enumerate(self.res_info):
            if T == INF or end > T:
                continue
            if not (r > rr or (w.project == rj.project and w.priority < rj.priority)):
                continue
            mine = [h for h in hosts if self.reserved.get(h) == k]
            pls = self.place_reserved(w, sh, mine)
            if pls is not None:
                return pls, []
            if not sh.block or sh.block >= fail.get(k, 1 << 30):
                continue
            found = self._reserved_block(sh.block, mine)
            if found is None:
                fail[k] = sh.block
                continue
            h, s, victims = found
            pls = self.apply_preemption(
                w, sh, [(h, s)], victims, lambda v, w=w, r=r: self._victim_text(v, w, r)
            )
            return pls, victims
        return None

    def _reserved_block(self, p: int, hosts: list[int]) -> tuple[int, int, list[_Run]] | None:
        """Cheapest aligned p-block of free GPUs and unallocated jobs on `hosts`: least
        lost work, then fewest victims, then fewest free GPUs left (tighter fit)."""
        self.victims_by_host()
        vbhm, tfree, G = self._vbhm, self.tfree, self.G
        pmask = (1 << p) - 1
        best_key: tuple[float, int, int, int, int] | None = None
        best: tuple[int, int, list[_Run]] | None = None
        for h in hosts:
            if G[h] < p:
                continue
            on = [(u, mu) for u, mu in vbhm.get(h, ()) if u.alive and not u.alloc]
            if not on:
                continue
            avail = tfree[h]
            for _, mu in on:
                avail |= mu
            if block_info(G[h], avail)[0] < p:
                continue
            fr = tfree[h].bit_count()
            for s in range(0, G[h] - p + 1, p):
                bm = pmask << s
                if avail & bm != bm:
                    continue
                chosen = [u for u, mu in on if mu & bm]
                key = (sum(u.lost for u in chosen), len(chosen), fr, h, s)
                if best_key is None or key < best_key:
                    best_key, best = key, (h, s, chosen)
        return best

    def _reserve(self, w: Workload, sh: Shape, r: int, d: float) -> None:
        """Reserve the whole hosts that become usable for `w` soonest.

        `d` is the usage `w`'s project would be charged with `w` started (its other
        starts this cycle included): another project's job is usable for `w` only if
        `w`'s project still beats it then, exactly as the preemption search requires
        (no preemption cycles). Otherwise a reservation would expect hosts to be usable
        when `w` may in fact never preempt them, and block them for nothing.
        """
        now = self.now
        avail: dict[int, float] = {}
        stopped, proj, prio = self.stopped, w.project, w.priority
        pidx = self.fs.tree.leaf_index.get(proj)
        # whether w's project still beats each other project after starting w (all
        # at once: one walk of the tree; unknown projects are beaten)
        bget = ({} if pidx is None else self.fs.beaten_all(pidx, d)).get
        get = avail.get

        # A host is usable for w once every job on it may be preempted by w: unallocated
        # ones at once, allocated ones of projects w's still beats after starting (or
        # lower priority in w's project) when their protection ends (`pe`, cached),
        # others never (INF). The loop is inlined: it runs over every allocated job.
        for _, _, _, pe, info in self.allruns:
            if info is None:
                continue  # unallocated: preemptible now
            p, x_prio, x_id, hs = info
            if x_prio < prio if p == proj else bget(p, True):
                if pe <= now:
                    continue
                t = pe
            else:
                t = INF
            if stopped and x_id in stopped:
                continue
            for h in hs:
                if t > get(h, now):
                    avail[h] = t
        for h in self.touched:
            avail[h] = INF  # new work of projects ranked above
        tfree, reserved = self.tfree, self.reserved
        get = avail.get
        for size, n in sh.whole or [(sh.block, 1)]:
            # Hosts usable soonest; among those usable at a known time the emptiest
            # (less to wait for), among the others the fullest (fewest GPUs held idle).
            hs = self.healthy_by_size.get(size, ())
            if reserved:
                hs = [h for h in hs if h not in reserved]
            keys = [
                (a, f if a == INF else -f, h)
                for a, f, h in zip(
                    map(get, hs, repeat(now)),
                    map(int.bit_count, map(tfree.__getitem__, hs)),
                    hs,
                    strict=True,
                )
            ]
            if len(keys) < n:
                continue
            hosts = [k[2] for k in heapq.nsmallest(n, keys)]
            chosen = hosts[:n]
            T = max(avail.get(h, now) for h in chosen)
            k = len(self.res_info)
            self.res_info.append((w, r, T, chosen))
            self.ver += 1
            for h in chosen:
                self.reserved[h] = k
                self.index.set(h, 0)
            names = [self.hosts[h].name for h in chosen]
            when = (
                f"expected usable in {_hours(T - now)} when the jobs on them pass their protection"
                if T < INF
                else "usable when jobs on them that it may not preempt finish"
            )
            text = (
                f"reserved {len(names)} host{'s' if len(names) > 1 else ''} "
                f"({', '.join(names)}) for {w.id} ({w.gpus} GPUs, project {w.project}, "
                f"first in the fair-share order that needs whole hosts): {when}; until then only "
                "unallocated jobs and jobs it may preempt by then can use them"
            )
            self.reservations.append(Reservation(workload_id=w.id, hosts=tuple(names), reason=text))
            self.why[w.id] = "next in line: " + text
            self.why_proj.add(w.project)
            return
        self.why[w.id] = f"needs {sh.gpus} GPUs of whole hosts; not enough healthy hosts"
        self.why_proj.add(w.project)

    # -- reasons ------------------------------------------------------------------------

    def _pct(self, proj: str) -> float:
        ent = self.ent.get(proj, 0.0)
        window = self.policy.lookback_s
        if self.policy.half_life_s:
            window = self.policy.half_life_s / math.log(2)
        denom = ent * self.healthy_gpus * window
        return 100.0 * self.snap.usage.get(proj, 0.0) / denom if denom > 0 else INF

    def _window(self) -> str:
        if self.policy.half_life_s:
            return f"decayed (half-life {_hours(self.policy.half_life_s)})"
        return f"{self.policy.lookback_s / 86400:g}-day"

    def _project_text(self, proj: str, r: int) -> str:
        return (
            f"project {proj} is at {self._pct(proj):.0f}% of its {self._window()} entitlement "
            f"(fair-share rank {r + 1} of {len(self.order)})"
        )

    def _start_text(self, w: Workload, r: int, pls: tuple[Placement, ...], how: str) -> str:
        where = ", ".join(f"{p.host}[{p.gpu_indices[0]}-{p.gpu_indices[-1]}]" for p in pls)
        if w.min_runtime_s > 0:
            prot = f"protected for {_hours(min(w.min_runtime_s, self.cap))}"
        else:
            prot = "unallocated: free of charge, preemptible at any time"
        return f"started on {where} using {how}; {self._project_text(w.project, r)}; {prot}"

    def _victim_text(self, v: _Run, w: Workload, r: int) -> tuple[StopReason, str]:
        lost = _lost_text(v)
        if not v.alloc:
            return StopReason.UNALLOCATED, (
                f"preempted: unallocated job (min runtime 0) gives way to allocated job {w.id} "
                f"of project {w.project}; {lost}"
            )
        if v.project == w.project:
            return StopReason.PRIORITY, (
                f"preempted after its protected minimum runtime by higher-priority job {w.id} "
                f"(priority {w.priority} > {v.prio}) of the same project {w.project}; {lost}"
            )
        rq = self.rank.get(v.project, len(self.order))
        return StopReason.FAIR_SHARE, (
            f"preempted after its protected minimum runtime: {self._project_text(v.project, rq)} "
            f"and ranks below project {w.project} (rank {r + 1}), which it would still do "
            f"with {w.id} running; {lost}"
        )

    def _explain(self) -> list[QueueEntry]:
        """The waiting queue, built per project: one shared reason string for all of a
        project's waiting jobs (positions are consecutive), entries made in bulk; only
        projects with a job-specific note (reservation, no room, invalid size) or a job
        started this cycle take the per-job path."""
        out: list[QueueEntry] = []
        pending, started, why = self.snap.pending, self.started, self.why
        touched = self.why_proj | self.started_proj
        factor = self.fs.factor
        n = len(self.order)
        full_note = "" if self.index.any_free() else "; no free GPUs"
        good = self._good_sizes()
        extend = out.extend
        for alloc_phase in (True, False):
            for r, proj in enumerate(self.order):
                lst = pending.get(proj)
                if not lst:
                    continue
                if alloc_phase:
                    ids = [w.id for w in lst if w.min_runtime_s > 0]
                    if not ids:
                        continue
                    if self.ent.get(proj, 0.0) <= 0.0:
                        base = (
                            f"waiting: project {proj} has no budget (weight 0): it may run only "
                            "unallocated jobs (min runtime 0)"
                        )
                    else:
                        base = (
                            f"waiting: {self._project_text(proj, r)}; "
                            f"{r} project{'s' if r != 1 else ''} ahead of it{full_note}"
                        )
                else:
                    ids = [w.id for w in lst if w.min_runtime_s <= 0]
                    if not ids:
                        continue
                    base = (
                        "waiting: unallocated job (min runtime 0) runs only on GPUs no allocated "
                        f"job wants; queued after all allocated jobs (project rank {r + 1} of {n})"
                        f"{full_note}"
                    )
                reasons: Iterable[str] = repeat(base)
                if proj in touched or not good.issuperset(map(_GPUS, lst)):
                    ids, reasons = self._explain_jobs(lst, alloc_phase, base, started, why)
                extend(
                    map(
                        _QE_NEW,
                        repeat(QueueEntry),
                        zip(
                            ids,
                            repeat(proj),
                            count(len(out) + 1),
                            repeat(r + 1),
                            repeat(factor.get(proj, 0.0)),
                            reasons,
                        ),
                    )
                )
        return out

    def _explain_jobs(
        self,
        lst: Sequence[Workload],
        alloc_phase: bool,
        base: str,
        started: set[str],
        why: dict[str, str],
    ) -> tuple[list[str], list[str]]:
        ids: list[str] = []
        reasons: list[str] = []
        for w in lst:
            if (w.min_runtime_s > 0) is not alloc_phase or w.id in started:
                continue
            extra = why.get(w.id)
            if extra is None:
                sh = self.shape(w.gpus)
                extra = sh.reason or None
            ids.append(w.id)
            reasons.append(f"{base}; {extra}" if extra else base)
        return ids, reasons

    def _good_sizes(self) -> set[int]:
        """Job sizes (GPUs) that can run on this cluster at all."""
        good = self._good
        if good is None:
            key = tuple(self.sizes_healthy or self.G)
            good = _GOOD.get(key)
            if good is not None:
                self._good = good
                return good
            if len(_GOOD) > 64:
                _GOOD.clear()
            good = self._good = _GOOD[key] = set()
            g = 1
            top = max(self.sizes_healthy or self.G or [0])
            while g <= top:  # single-host sizes; larger ones are checked per job
                if not self.shape(g).reason:
                    good.add(g)
                g += 1
            for g in set(self.sizes_healthy or self.G):
                k = 2
                while not self.shape(g * k).reason:
                    good.add(g * k)
                    k += 1
        return good


# ---------------------------------------------------------------------------------------
# baselines
# ---------------------------------------------------------------------------------------


def _merge_priority(pending: dict[str, Sequence[Workload]]) -> Iterable[Workload]:
    lists = [pending[p] for p in sorted(pending) if pending[p]]
    return heapq.merge(*lists, key=lambda w: (-w.priority, w.submit_s, w.id))


def _merge_fifo(pending: dict[str, Sequence[Workload]]) -> Iterable[Workload]:
    lists = []
    for p in sorted(pending):
        lst = pending[p]
        if not lst:
            continue
        if lst[0].priority != lst[-1].priority:
            lst = sorted(lst, key=lambda w: (w.submit_s, w.id))
        lists.append(lst)
    return heapq.merge(*lists, key=lambda w: (w.submit_s, w.id))


class _BaselineCycle(_Cycle):
    def run(self) -> CyclePlan:
        mode = self.policy.mode
        from scheduler.engine.fairshare import entitled_shares

        self.ent = entitled_shares(self.snap.tree)
        pending = dict(self.snap.pending)
        if mode == "fifo":
            self._fifo(pending)
        elif mode == "static":
            self._static(pending)
        else:
            self._priority(pending)
        return self.plan(self._explain(pending, mode) if self.policy.explain_queue else [])

    def _try(self, w: Workload) -> tuple[Placement, ...] | None:
        sh = self.shape(w.gpus)
        if sh.reason:
            self.why[w.id] = sh.reason
            return None
        return self.place_free(w, sh)

    def _fifo(self, pending: dict[str, Sequence[Workload]]) -> None:
        for w in _merge_fifo(pending):
            if not self.index.any_free():
                break
            pls = self._try(w)
            if pls is not None:
                self.start(
                    w,
                    pls,
                    w.allocated,
                    f"started on free GPUs in arrival order (fifo); submitted at {w.submit_s:.0f}",
                )

    def _static(self, pending: dict[str, Sequence[Workload]]) -> None:
        caps = {p: math.floor(s * self.healthy_gpus + 1e-9) for p, s in self.ent.items()}
        self.caps = caps
        used: dict[str, int] = {}
        for rw, _, _, _, _ in self.allruns:
            if rw.workload.id not in self.stopped:
                p = rw.workload.project
                used[p] = used.get(p, 0) + rw.workload.gpus
        self.used = used
        for w in _merge_priority(pending):
            if not self.index.any_free():
                break
            c = caps.get(w.project, 0)
            if used.get(w.project, 0) + w.gpus > c:
                self.why[w.id] = f"project {w.project} is at its static limit of {c} GPUs"
                continue
            pls = self._try(w)
            if pls is not None:
                used[w.project] = used.get(w.project, 0) + w.gpus
                self.start(
                    w,
                    pls,
                    w.allocated,
                    f"started inside project {w.project}'s static limit of {c} GPUs",
                )

    def _priority(self, pending: dict[str, Sequence[Workload]]) -> None:
        limit = {p: s * self.healthy_gpus for p, s in self.ent.items()}
        by_proj: dict[
            str, list[tuple[float, str, int, RunningWorkload, tuple[tuple[int, int], ...]]]
        ] = {}
        for rw, hm, _, _, _ in self.allruns:
            w = rw.workload
            if w.id in self.stopped:
                continue
            by_proj.setdefault(w.project, []).append((rw.started_s, w.id, w.gpus, rw, hm))
        in_use: dict[str, float] = {}
        opp: set[str] = set()
        for p, runs in by_proj.items():
            runs.sort(key=lambda x: (x[0], x[1]))
            acc = 0
            lim = limit.get(p, 0.0)
            for _, wid, g, _, _ in runs:
                if acc + g <= lim + 1e-9:
                    acc += g
                else:
                    opp.add(wid)
            in_use[p] = acc
        # Only opportunistic jobs (beyond their project's limit) may be preempted.
        self.cands = [
            c
            for c in self.allruns
            if c[0].workload.id in opp and c[0].workload.id not in self.stopped and c[2]
        ]
        self._vbh = None
        self._coverable = None
        opp_gpus = sum(c[0].workload.gpus for c in self.cands)
        deferred = False
        for w in _merge_priority(pending):
            free = self.index.any_free()
            if not free and opp_gpus <= 0:
                deferred = True
                break
            lim = limit.get(w.project, 0.0)
            if in_use.get(w.project, 0.0) + w.gpus > lim + 1e-9:
                deferred = True
                continue
            sh = self.shape(w.gpus)
            if sh.reason:
                self.why[w.id] = sh.reason
                continue
            pls = self.place_free(w, sh) if free else None
            how = "free GPUs"
            if pls is None and opp_gpus > 0:
                found = self.preempt_search(sh, None, 0, lambda: 0)
                if found is not None:
                    hosts, victims = found
                    pls = self.apply_preemption(
                        w,
                        sh,
                        hosts,
                        victims,
                        lambda v, w=w: (
                            StopReason.PRIORITY,
                            f"preempted: opportunistic job beyond project {v.project}'s GPU limit "
                            f"gives way to {w.id}, which is inside project {w.project}'s limit; "
                            + _lost_text(v),
                        ),
                    )
                    opp_gpus -= sum(v.gpus for v in victims)
                    how = f"GPUs freed by preempting {len(victims)} opportunistic job(s)"
            if pls is not None:
                in_use[w.project] = in_use.get(w.project, 0.0) + w.gpus
                self.start(
                    w,
                    pls,
                    w.allocated,
                    f"started inside project {w.project}'s limit of {lim:.0f} GPUs on {how}; never preempted",
                )
        if not deferred:
            return
        for w in _merge_priority(pending):
            if not self.index.any_free():
                break
            if w.id in self.started:
                continue
            pls = self._try(w)
            if pls is not None:
                self.start(
                    w,
                    pls,
                    w.allocated,
                    f"started opportunistically beyond project {w.project}'s limit; preemptible by jobs inside their limit",
                )

    def _explain(self, pending: dict[str, Sequence[Workload]], mode: str) -> list[QueueEntry]:
        out: list[QueueEntry] = []
        it = _merge_fifo(pending) if mode == "fifo" else _merge_priority(pending)
        pos = 0
        full = "" if self.index.any_free() else "; no free GPUs"
        for w in it:
            if w.id in self.started:
                continue
            pos += 1
            extra = self.why.get(w.id)
            if mode == "fifo":
                base = f"waiting ({mode}): {pos - 1} jobs ahead of it in arrival order{full}"
            elif mode == "static":
                base = f"waiting (static): project {w.project} is confined to {self.caps.get(w.project, 0)} GPUs{full}"
            else:
                base = f"waiting (priority {w.priority}): {pos - 1} jobs ahead of it{full}"
            out.append(
                _queue_entry(
                    w.id,
                    w.project,
                    pos,
                    0,
                    float(w.priority),
                    f"{base}; {extra}" if extra else base,
                )
            )
        return out


def plan(snapshot: Snapshot, policy: Policy, now: float) -> CyclePlan:
    """One scheduling cycle: the starts, stops, reservations, ready hosts and queue.

    `policy.mode` selects our fair-share scheduler ("fairshare") or a baseline
    ("fifo", "priority", "static"). Pure and deterministic; apply stops before starts.
    """
    mode = policy.mode
    if mode == "fairshare":
        cls: type[_Cycle] = _FairShareCycle
    elif mode in ("fifo", "priority", "static"):
        cls = _BaselineCycle
    else:
        raise ValueError(f"unknown policy mode {mode!r}; expected one of {', '.join(MODES)}")
    shared = _LOCK.acquire(blocking=False)
    # A cycle allocates many short-lived objects and no reference cycles: the cyclic
    # collector would only add pauses (tens of ms on a large heap) to its tail latency.
    gc_was_on = gc.isenabled()
    if gc_was_on:
        gc.disable()
    try:
        return cls(snapshot, policy, now, shared).run()
    finally:
        if gc_was_on:
            gc.enable()
        if shared:
            _LOCK.release()
