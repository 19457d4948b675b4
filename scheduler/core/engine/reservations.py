"""Reservations: whole hosts held for the first large job that can start neither on free
GPUs nor by preemption, so that it does not starve behind smaller work.

Decides which hosts to hold (those that become usable for the job soonest: every job
on them is one it may preempt, at once or when its protection ends), and which other
jobs may still use a held host: only a job that cannot delay the reserved one, i.e.
whose own protection ends by the time the host would be usable for it (the reserved
job may then preempt it; while that time is not foreseeable, a job it may preempt,
protected for at most `Policy.reservation_admit_s`: `hold_times`). Such a job takes
free GPUs there, or an aligned block of free GPUs and unallocated backfill (preempted).
Unallocated work may use held hosts in phase 2 of the cycle: the reserved job may
preempt it at any time.
"""

from __future__ import annotations

import math
from bisect import insort
from collections.abc import Callable, Mapping, Sequence
from functools import partial
from typing import NamedTuple

from scheduler.core.engine.blocks import Shape
from scheduler.core.engine.cluster import ClusterState, Decisions
from scheduler.core.engine.explain import FairShareReasons, hosts_text, hours_text, limit_text
from scheduler.core.engine.fairshare import FairShare
from scheduler.core.engine.hold_times import MayTake, admit_until, usable_times
from scheduler.core.engine.placement import Placer
from scheduler.core.engine.preemption import Victim, VictimIndex, apply_preemption
from scheduler.core.engine.reserve_room import FreeHosts, HostRooms, TakeRule
from scheduler.core.engine.runs import protection_end
from scheduler.core.engine.short_reserve import (
    PendingIds,
    ShortReserveRule,
    host_loads,
    hosts_with_room,
    pending_short,
    under_served_budget,
)
from scheduler.core.engine.types import Placement, Reservation, Workload

__all__ = ["HeldHosts", "Reservations"]

INF = math.inf
# When a project's jobs can start only on reserved hosts (by taking free GPUs or
# preempting unallocated backfill there), how many of its waiting jobs, in its order
# (priority first), are looked at per cycle; bounds the work on long queues.
SCAN_PER_PROJECT = 64
SCAN_PER_CYCLE = 512  # the same, for all projects together
_NO_BOUND = 1 << 30
# The job the short-job reserve is held for: of no project, ranked above every job.
_SHORT_JOBS = Workload(id="", project="", gpus=0, submit_s=0.0)


class HeldHosts(NamedTuple):
    """One reservation: the job, its order index, when its hosts become usable for it
    (inf: not foreseeable), the hosts, the latest protection end of another allocated
    job they admit (-inf: none; `hold_times.admit_until`) and whether the job may
    preempt each other project's allocated work once its protection ends
    (`hold_times.MayTake`, read while `usable_at` is inf)."""

    job: Workload
    rank: int
    usable_at: float
    hosts: list[int]
    admit_until: float
    may_take: MayTake


class _ShortLoads(NamedTuple):
    """What the short-job reserve reads of a cycle: the largest host size, the short
    limit, GPUs of short work running and waiting, GPUs of the widest waiting job; per
    host of that size, GPUs of allocated work protected beyond the short limit
    (`long_gpus`) and beyond the release time (`late_gpus`); hosts running long work;
    those hosts, fewest long GPUs first (then the highest index)."""

    size: int
    short_limit: float
    short_gpus: int
    widest: int
    long_gpus: dict[int, int]
    late_gpus: dict[int, int]
    has_longer: set[int]
    by_long: list[int]
    blocked: dict[int, int]


class Reservations:
    """The cycle's reservations and the questions the fair-share pass asks about them."""

    def __init__(
        self,
        cluster: ClusterState,
        decisions: Decisions,
        placer: Placer,
        victims: Callable[[], VictimIndex],
        fair_share: FairShare,
        reasons: FairShareReasons,
        now: float,
        cap: float,
        floor: frozenset[str] = frozenset(),
    ) -> None:
        """`floor`: the ids of the jobs on the share floor (no other project's job may
        take them: hosts they hold are not usable for it)."""
        self.cluster = cluster
        self.floor = floor
        self.decisions = decisions
        self.placer = placer
        self.victims = victims
        self.fair_share = fair_share
        self.reasons = reasons
        self.now = now
        self.cap = cap
        self.held: list[HeldHosts] = []
        # reservation -> smallest block size that its hosts' free + unallocated GPUs
        # could not hold (exact for the cycle: those GPUs only get fewer)
        self.failed_block: dict[int, int] = {}
        self.scan_budget = SCAN_PER_CYCLE  # jobs looked at only for reserved-host room
        self._usable = (False, -1)  # (answer, cluster version it holds for)
        self._preemptible = (False, -1)
        # why allocated jobs cannot use the short-job reserve's hosts ("" without one)
        self.short_reserve_note = ""
        self.short_k = -1  # the short-job reserve's index in `held` (-1: none)
        # the waiting short jobs that fit a held host, per project (in its order)
        self.short_waiting: dict[str, list[Workload]] = {}
        # the explained queue's ids per project, read with the short jobs (empty when
        # the queue is not explained or the reserve did not read the pending jobs)
        self.pending_ids: dict[str, PendingIds] = {}
        # GPUs of under-served projects' work past its protection that short jobs may
        # still take on the reserve this cycle
        self.under_budget = 0
        # the reserve's rule this cycle: whether short jobs on it leave other projects'
        # floor jobs alone, the wait past which one takes under-served work beyond the
        # budget, its block order
        self.short_rule = ShortReserveRule()
        # min runtimes up to this make a job short: the reserve never takes such a job
        # (set with the reserve, `_short_loads`)
        self.short_limit = INF
        self._rooms: HostRooms | None = None  # the reserved hosts' blocks, kept per host
        # reservation -> its hosts still held for it (one list while `reserved` is
        # unchanged), and those of them with free GPUs
        self._mine: dict[int, tuple[list[int], FreeHosts]] = {}
        self._held_free: list[FreeHosts] = []  # per reservation, its hosts with free GPUs

    def usable(self) -> bool:
        """Whether a reserved host has free GPUs that some job could still be allowed."""
        c = self.cluster
        if not c.reserved:
            return False
        if self._usable[1] == c.version:
            return self._usable[0]
        held_free = self._held_free
        for k in range(len(held_free), len(self.held)):
            held_free.append(FreeHosts(c, self.held[k].hosts))
        ok = any(r.admit_until > -INF and held_free[k].has_free() for k, r in enumerate(self.held))
        self._usable = (ok, c.version)
        return ok

    def preemptible(self) -> bool:
        """Whether a reserved host (usable by some job before its reservation's time)
        runs unallocated work: a job that cannot delay the reservation may preempt it."""
        c = self.cluster
        if not c.reserved or self.scan_budget <= 0:
            return False
        if self._preemptible[1] == c.version:
            return self._preemptible[0]
        by_host = self.victims().by_host
        ok = False
        for r in self.held:
            short = r.job is _SHORT_JOBS  # there, allocated work past its protection too
            if r.admit_until > -INF and any(
                u.alive and (short or not u.allocated)
                for h in r.hosts
                for u, _ in by_host.get(h, ())
            ):
                ok = True
                break
        self._preemptible = (ok, c.version)
        return ok

    def bound(self, r: int, proj: str) -> tuple[float, int]:
        """For jobs of `proj` (order index `r`): the latest protection end and the block
        size bound (exclusive) with which one may still find room on a reserved host;
        an upper bound that lets the fast path skip the others with two comparisons."""
        t, blk = -INF, 0
        for k, held in enumerate(self.held):
            if held.admit_until == -INF or not (r > held.rank or proj == held.job.project):
                continue
            t = max(t, held.admit_until)
            blk = max(blk, self.failed_block.get(k, _NO_BOUND))
        return t, blk

    def place(
        self, w: Workload, r: int, only: int = -1
    ) -> tuple[tuple[Placement, ...], list[Victim]] | None:
        """Room for `w` (order index `r`) on a reserved host it cannot delay (`only` >= 0:
        of that reservation only): free GPUs, else the cheapest block `_backfill_block`
        finds (its victims returned, already stopped). None when there is none."""
        end = protection_end(w, self.now, self.cap)
        sh = self.cluster.shape(w.gpus)
        for k, held in enumerate(self.held):
            if 0 <= only != k or end > held.admit_until:
                continue
            rj = held.job
            if not (r > held.rank or (w.project == rj.project and w.priority < rj.priority)):
                continue
            if held.usable_at == INF and not held.may_take(w.project):
                continue  # the reserved job could not preempt it: it would hold the host
            got = self._mine.get(k)
            if got is None:
                mine = [h for h in held.hosts if self.cluster.reserved.get(h) == k]
                got = self._mine[k] = (mine, FreeHosts(self.cluster, mine))
            mine, with_free = got
            pls = self.placer.place_reserved(w, sh, with_free.now())
            if pls is not None:
                return pls, []
            if not sh.block or sh.block >= self.failed_block.get(k, _NO_BOUND):
                continue
            # the short-job reserve ranks above every job: on its hosts a short job may
            # also take allocated work past its protection (else a reserve whose hosts
            # run long work that no one may preempt there holds nothing)
            short = rj is _SHORT_JOBS
            found, skipped_own = self._backfill_block(sh.block, mine, w if short else None)
            if found is None:
                if not skipped_own:  # else another project's job may still find room
                    self.failed_block[k] = sh.block
                continue
            h, s, victims = found
            if short and self._takes_under_served(victims):
                self.under_budget -= w.gpus
            reason = self.reasons.reserve_victim if short else self.reasons.victim
            pls = apply_preemption(
                self.cluster,
                self.victims(),
                self.decisions,
                w,
                sh,
                [(h, s)],
                victims,
                partial(reason, w=w, r=r),
            )
            return pls, victims
        return None

    def _backfill_block(
        self, p: int, hosts: list[int], short: Workload | None = None
    ) -> tuple[tuple[int, int, list[Victim]] | None, bool]:
        """Cheapest aligned p-block of free GPUs and unallocated jobs (for a `short` job
        on the short-job reserve, also allocated jobs past their protection that run on
        `hosts` alone, but none of its own project at its priority or above:
        `reserve_room.open_victims`) on `hosts`: fewest victims of under-served projects
        (`fewest_gpus`: fewest GPUs of them, then straight to lost work), then fewest
        allocated victims, then those of the lowest ranked projects, then least lost
        work, then fewest victims, then fewest free GPUs left (tighter fit). Without
        one, also whether work of the short job's own project, or under-served work a
        job that waited longer may take, was passed over (then the block may exist for
        another job); False when one is found."""
        rule = self.short_rule
        take = TakeRule(
            short,
            short is not None
            and self.under_budget < p
            and self.now - short.submit_s < rule.take_after_s,
            rule.spares_floor,
            rule.take_after_s,
            self.short_limit,
            self.fair_share.lf,
            self.fair_share.tree.leaf_index,
        )
        rooms = self._host_rooms()
        found = rooms.cheapest(hosts, p, take)
        return found, found is None and rooms.passed_over(hosts, p, take)

    def _host_rooms(self) -> HostRooms:
        """The cycle's kept blocks of reserved hosts (new when the candidates, the
        rule's order or the level fair shares change)."""
        by_host = self.victims().by_host
        fewest = self.short_rule.fewest_gpus
        fs = self.fair_share
        rooms = self._rooms
        if (
            rooms is None
            or rooms.by_host is not by_host
            or rooms.fewest_gpus != fewest
            or rooms.lf is not fs.lf
        ):
            rooms = self._rooms = HostRooms(
                self.cluster, by_host, fewest, fs.lf, fs.tree.leaf_index
            )
        return rooms

    def _takes_under_served(self, victims: Sequence[Victim]) -> bool:
        """Whether `victims` hold allocated work of an under-served project."""
        fs = self.fair_share
        leaf, lf = fs.tree.leaf_index, fs.lf
        return any(u.allocated and lf[leaf.get(u.project, 0)] > 1.0 for u in victims)

    def reserve(self, w: Workload, sh: Shape, r: int, charge: float) -> None:
        """Reserve the whole hosts that become usable for `w` soonest.

        `charge` is the usage `w`'s project would be charged with `w` started (its other
        starts this cycle included): another project's job is usable for `w` only if
        `w` may preempt it then (`victim_allowed`, exactly as the preemption search
        asks), else a reservation would wait for hosts `w` may never take."""
        usable_at, may_take = usable_times(
            self.cluster,
            self.decisions,
            self.fair_share,
            self.reasons,
            self.floor,
            self.now,
            w,
            charge,
        )
        for h in self.cluster.touched:
            usable_at[h] = INF  # new work of projects ranked above
        avoided = self.placer.avoided(w)  # the cluster refused `w` there: never held
        for size, n in sh.whole or [(sh.block, 1)]:
            chosen = self._soonest_hosts(size, n, usable_at, avoided)
            if chosen is not None:
                when = max(usable_at.get(h, self.now) for h in chosen)
                self._hold(w, r, chosen, when, may_take)
                return
        self.decisions.note(w, f"needs {sh.gpus} GPUs of whole hosts; not enough healthy hosts")

    def _soonest_hosts(
        self, size: int, n: int, usable_at: dict[int, float], avoided: list[int]
    ) -> list[int] | None:
        """`n` unreserved healthy hosts of `size` GPUs, none of `avoided`, usable soonest;
        among those usable at a known time the emptiest (less to wait for), among the
        others the fullest (fewest GPUs held idle). None if there are not enough."""
        if n <= 0:
            return []
        c = self.cluster
        free, reserved, now = c.free, c.reserved, self.now
        # the n smallest keys (usable at, -free or free, host), sorted; every key is
        # distinct (the host), so they are those of a full sort
        best: list[tuple[float, int, int]] = []
        eligible = 0
        for h in c.healthy_by_size.get(size, ()):
            if h in reserved or (avoided and h in avoided):
                continue
            eligible += 1
            a = usable_at.get(h, now)
            if len(best) == n and a > best[-1][0]:
                continue  # later than the n-th best: the common case, decided at once
            f = free[h].bit_count()
            key = (a, f if a == INF else -f, h)
            if len(best) == n:
                if key > best[-1]:
                    continue
                best.pop()
            insort(best, key)
        if eligible < n:
            return None
        return [h for _, _, h in best]

    def _hold_hosts(
        self,
        w: Workload,
        r: int,
        chosen: list[int],
        usable_at: float,
        may_take: MayTake | None = None,
    ) -> list[str]:
        """Take `chosen` out of the free-block index, held for `w` (order index `r`)
        until `usable_at` (`may_take`: `HeldHosts.may_take`); their names."""
        c = self.cluster
        k = len(self.held)
        admit = admit_until(usable_at, self.now, self.reasons.policy.reservation_admit_s)
        if may_take is None:
            may_take = MayTake({}, None)
        self.held.append(HeldHosts(w, r, usable_at, chosen, admit, may_take))
        c.version += 1
        self._mine.clear()
        for h in chosen:
            c.reserved[h] = k
            c.index.set(h, 0)
        return [c.hosts[h].name for h in chosen]

    def _hold(
        self, w: Workload, r: int, chosen: list[int], usable_at: float, may_take: MayTake
    ) -> None:
        now = self.now
        names = self._hold_hosts(w, r, chosen, usable_at, may_take)
        when = (
            f"expected usable {within_text(usable_at - now)} when the jobs on them pass "
            "their protection"
            if usable_at < INF
            else "usable when jobs on them that it may not preempt finish"
        )
        text = (
            f"reserved {len(names)} host{'s' if len(names) > 1 else ''} "
            f"({hosts_text(names)}) for job {w.id} ({w.gpus} GPUs, project {w.project}, "
            f"first in the fair-share order that needs whole hosts): {when}; until then only "
            "unallocated jobs and jobs it may preempt by then can use them"
        )
        self.decisions.reservations.append(
            Reservation(workload_id=w.id, hosts=tuple(names), reason=text)
        )
        self.decisions.note(w, "next in line: " + text)

    def hold_for_short_jobs(
        self,
        count: int,
        short_s: float,
        pending: Mapping[str, Sequence[Workload]],
        rule: ShortReserveRule,
    ) -> None:
        """The short-job reserve (`Policy.short_reserve_*`): hold hosts of the largest
        size for jobs protected for at most `short_s`. A held host of its own, ranked
        above every job, usable in `short_s`: `place` then admits exactly the jobs whose
        protection ends by then (they may take free GPUs, unallocated backfill and
        allocated work past its protection there), and phase 2 fills it with
        unallocated work.

        Its size: `count` hosts (the fixed minimum), or with `rule.auto` the hosts that
        the short jobs running and waiting fill (their GPUs that fit one host, over the
        host size, rounded up; at least one host), no more than those GPUs plus
        `rule.idle_share` of the healthy GPUs of that size: the reserve holds at most
        that share beyond what short work uses. A large cluster keeps one host ready for
        the next short job; a small one, where a host is a large share, reserves only
        while its short work nearly fills a host. While it holds any, it holds as many
        of the hosts with the fewest GPUs a short job may not take (long work under
        longer protection, gangs spanning hosts) as it takes for their other GPUs to
        hold the short work (hosts with none end the count): under overload every host
        runs long work, and the reserve's room is what of it has passed its protection.
        Short jobs take under-served projects' work there only up to their share of
        the allocated demand (`short_reserve.under_served_budget`).

        The reserve follows the short work: while the short jobs running and waiting
        need more whole hosts than its size, it holds that many, and it shrinks back as
        they end. The base hosts are those with the fewest GPUs a short job may not
        take (then the fewest under longer protection, then the highest index), so the
        reserve stays where it was while it keeps to its rule. A host is added for short
        work only if short jobs can use all of it at once: it runs no allocated work but
        short jobs (free GPUs, unallocated backfill, short jobs), highest index first.

        It never makes a job impossible: at least one host stays open to long work, and
        while a job that needs more whole hosts than the reserve leaves is pending, the
        reserve shrinks to leave it room. With `rule.auto` it delays the first waiting
        job of the fair-share order (`rule.head`) by at most twice `rule.release_s`
        (without, it is the fixed reserve of before, which has no such bound): once that
        job has waited so long, if it has room neither outside the reserve within
        another `rule.release_s` (where long work it is first in line for passes its
        protection) nor without the reserve's hosts, the reserve gives up those it
        lacks, and the job starts there at once or when the short jobs on them pass
        their protection (at most `short_s` later)."""
        c = self.cluster
        if (count <= 0 and not rule.auto) or not c.healthy_by_size:
            return
        self.short_rule = rule
        loads = self._short_loads(short_s, pending, rule)
        chosen = self._short_hosts(count, loads, rule.auto, rule.idle_share)
        if chosen and rule.auto:
            chosen = self._give_way(chosen, loads, rule)
        if not chosen:
            return
        self.short_k = len(self.held)
        self._hold_hosts(_SHORT_JOBS, -1, chosen, self.now + short_s)
        self.decisions.short_reserve = tuple(c.hosts[h].name for h in sorted(chosen))
        self.short_reserve_note = (
            f"; {hosts_text(self.decisions.short_reserve)} held for jobs with a min runtime"
            f" of at most {limit_text(short_s)} (short-job reserve)"
        )

    def _short_loads(
        self, short_s: float, pending: Mapping[str, Sequence[Workload]], rule: ShortReserveRule
    ) -> _ShortLoads:
        """What the short-job reserve reads of the cycle (and the waiting short jobs, kept
        in `short_waiting` for the fair-share pass)."""
        c = self.cluster
        size = max(c.healthy_by_size)
        hosts = c.healthy_by_size[size]
        # a short job: allocated, protected for at most `short_s` once capped (every
        # allocated job when the cap itself is that short); read per job, so as a bound
        # on its min runtime
        short_limit = INF if self.cap <= short_s else short_s
        self.short_limit = short_limit
        widest, waiting_gpus, self.short_waiting, waiting_allocated, self.pending_ids = (
            pending_short(
                short_limit,
                size,
                pending,
                self.now - rule.demand_window_s,
                c.layout.runnable_sizes() if self.reasons.policy.explain_queue else None,
            )
        )
        late = self.now + max(short_s, rule.release_s if rule.release_s < INF else 0.0)
        running_gpus, long_gpus, late_gpus, has_longer, blocked, running_allocated = host_loads(
            self.cluster.runs,
            hosts,
            short_limit,
            size,
            (self.now + short_s, late),
            self.now if rule.room_now else None,
        )
        by_long = sorted(hosts, key=lambda h: (blocked[h], long_gpus[h], -h))
        self.under_budget = under_served_budget(
            sum(self.cluster.gpus),
            waiting_gpus + running_gpus,
            running_gpus,
            running_allocated + waiting_allocated,
        )
        return _ShortLoads(
            size,
            short_limit,
            waiting_gpus + running_gpus,
            widest,
            long_gpus,
            late_gpus,
            has_longer,
            by_long,
            blocked,
        )

    @staticmethod
    def _short_hosts(count: int, ld: _ShortLoads, auto: bool, idle_share: float) -> list[int]:
        """The reserve's hosts before it gives way (see `hold_for_short_jobs`)."""
        size, short_gpus, by_long = ld.size, ld.short_gpus, ld.by_long
        if auto:
            afford = int((idle_share * size * len(by_long) + short_gpus) // size)
            count = max(count, min(max(1, -(-short_gpus // size)), afford))
            if count > 0:
                count = max(count, hosts_with_room(short_gpus, size, ld.blocked, by_long))
        widest_hosts = -(-ld.widest // size)  # whole hosts the widest pending job needs
        most = len(by_long) - max(1, widest_hosts)
        count = min(count, most)
        if count <= 0 and auto:
            return []
        wanted = min(max(count, -(-short_gpus // size)), most)
        chosen = by_long[:count]
        if wanted > count:
            chosen += [h for h in by_long[count:] if h not in ld.has_longer][: wanted - count]
        return chosen

    def _give_way(self, chosen: list[int], ld: _ShortLoads, rule: ShortReserveRule) -> list[int]:
        """`chosen` less the hosts the first job in line (`rule.head`) gets once it has
        waited `rule.release_s` (see `hold_for_short_jobs`)."""
        head = rule.head
        if (
            head is None
            or head.min_runtime_s <= ld.short_limit
            or self.now - head.submit_s < rule.release_s
        ):
            return chosen
        # the hosts that could hold it: outside the reserve, those where long work leaves
        # it room within `release_s` (it is first in line: what it may take there is its
        # own once protection ends); on the reserve, those where it has room once short
        # work there passes its protection. For a job within one host, room beside the
        # long work; for a larger one, a host without. If there are enough only with the
        # reserve's, the reserve gives it the first of those it lacks.
        size, gpus = ld.size, head.gpus
        need = -(-gpus // size)
        held = set(chosen)
        fits = []
        for h in ld.by_long:
            busy = ld.long_gpus[h] if h in held else ld.late_gpus[h]
            if (size - busy >= gpus) if gpus <= size else not busy:
                fits.append(h)
        lack = need - sum(1 for h in fits if h not in held)
        if lack > 0 and len(fits) >= need:
            give = set([h for h in fits if h in held][:lack])
            chosen = [h for h in chosen if h not in give]
        return chosen

    def release_all(self) -> None:
        """Open the reserved hosts to unallocated work (phase 2 of the cycle)."""
        c = self.cluster
        self._mine.clear()
        for h in list(c.reserved):
            del c.reserved[h]
            c.index.set(h, c.free[h])


def within_text(seconds: float) -> str:
    """`in 2 h 5 min`, or `within a minute` where the rounded wait would read `in 0 min`."""
    return "within a minute" if seconds < 60 else f"in {hours_text(seconds)}"
