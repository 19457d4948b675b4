"""When the hosts a reservation may hold become usable for its job, and which other
allocated jobs its held hosts admit meanwhile (`Reservations`).

A host is usable for the reserved job once every job on it may be preempted by that job:
unallocated work at once, work it may preempt when its protection ends, other work only
when it ends (inf: not foreseeable). A held host admits an allocated job that cannot
delay the reserved one (`admit_until`): one whose protection ends by the time the hosts
are usable; while that time is not foreseeable, one the reserved job may preempt whose
protection ends within `Policy.reservation_admit_s`, so the reserved job starts at most
that much later than its hosts free up (`MayTake`: with the share floor on, only a
job of a project the reserved job may take floor work from, so an admitted job that
lands on its project's floor never holds the host), and their GPUs run allocated work
meanwhile instead of unallocated backfill (docs/concepts.md#reservation-admission).
"""

from __future__ import annotations

import math

from scheduler.core.engine.cluster import ClusterState, Decisions
from scheduler.core.engine.explain import FairShareReasons
from scheduler.core.engine.fairshare import FairShare
from scheduler.core.engine.preemption import victim_allowed
from scheduler.core.engine.runs import idle_reclaimable
from scheduler.core.engine.share_floor import FloorRule
from scheduler.core.engine.types import Workload

__all__ = ["MayTake", "admit_until", "usable_times"]

INF = math.inf


def admit_until(usable_at: float, now: float, admit_s: float) -> float:
    """The latest protection end of an allocated job that a hold whose hosts are usable
    at `usable_at` admits (-inf: none): `usable_at` when it is foreseeable, else
    `admit_s` from `now` (none with `admit_s` <= 0, the rule before)."""
    if usable_at < INF:
        return usable_at
    return now + admit_s if admit_s > 0 else -INF


class MayTake:
    """Whether a hold whose release is not foreseeable admits an allocated job of a
    project (`Reservations.place`): the reserved job's project still beats it once
    charged (`beaten`; unknown projects are beaten) and, with the share floor on
    (`floor_rule`; None: off), the floor rule lets the reserved job take its floor
    jobs (`FloorRule`), since a job admitted now may land on its project's floor. For
    the reserved job's own project (not in `beaten`) the floor rule reads: its charge
    moves the project's usage relative to its entitled share by less than `MARGIN_PCT`
    points."""

    __slots__ = ("beaten", "floor_rule")

    def __init__(self, beaten: dict[str, bool], floor_rule: FloorRule | None) -> None:
        self.beaten = beaten
        self.floor_rule = floor_rule

    def __call__(self, other: str) -> bool:
        if not self.beaten.get(other, True):
            return False
        rule = self.floor_rule
        return rule is None or rule(other)


def usable_times(
    cluster: ClusterState,
    decisions: Decisions,
    fair_share: FairShare,
    reasons: FairShareReasons,
    floor: frozenset[str],
    now: float,
    w: Workload,
    charge: float,
) -> tuple[dict[int, float], MayTake]:
    """When each host becomes usable for `w` (charged `charge`): once every job on it
    may be preempted by `w` (unallocated ones at once, allowed ones when their
    protection ends, others never: inf; hosts not in the map are usable now), and
    whether `w` may preempt each other project's allocated work once its protection
    ends (`MayTake`). The loop runs over every allocated job, so the rule's verdict is
    memoised."""
    usable_at: dict[int, float] = {}
    stopped, proj, prio = decisions.stopped, w.project, w.priority
    floor_rule = FloorRule(reasons, reasons.usage_relative_to_entitled_share(proj, charge))
    pidx = fair_share.tree.leaf_index.get(proj)
    # whether w's project still beats each other project after starting w (all at
    # once: one walk of the tree; unknown projects are beaten)
    beaten = {} if pidx is None else fair_share.beaten_all(pidx, charge)

    def outranks(other: str) -> bool:
        return beaten.get(other, True)

    # the rule never reads another project's priority: its verdict is kept per project
    verdicts: dict[object, bool] = {}
    policy = reasons.policy
    idle_after = policy.idle_reclaim_after_s if policy.idle_reclaim else None
    for run, _, _, protected_until, info in cluster.runs:
        if info is None:
            continue  # unallocated: preemptible now
        if idle_after is not None and idle_reclaimable(run, now, idle_after):
            # idle: any allocated job may take it once its protection ends
            if protected_until <= now:
                continue
            t = protected_until
            for h in info[3]:
                if t > usable_at.get(h, now):
                    usable_at[h] = t
            continue
        project, priority, workload_id, hosts, key = info
        ok = verdicts.get(key if project == proj else project)
        if project != proj and workload_id in floor and not floor_rule(project):
            ok = False
        elif ok is None:
            ok = verdicts[key if project == proj else project] = victim_allowed(
                True, project, priority, proj, prio, outranks
            )
        if ok:
            if protected_until <= now:
                continue
            t = protected_until
        else:
            t = INF
        if stopped and workload_id in stopped:
            continue
        for h in hosts:
            if t > usable_at.get(h, now):
                usable_at[h] = t
    return usable_at, MayTake(beaten, floor_rule if policy.share_floor else None)
