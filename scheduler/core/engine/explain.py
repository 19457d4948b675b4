"""Plain-language reasons: why a job started, why one was preempted, why each waits.

Decides nothing; turns the cycle's decisions into text a person can read ("waiting:
project a1 is at 142% of its entitled share over 7 days (fair-share rank 3 of 12); 2
projects rank above it"). The percentage is the glossary's *usage relative to entitled share*
(docs/concepts.md), not the delivery dashboard's delivery ratio, and is named apart from it. The queue (`fair_share_queue`, `baseline_queue`) lists every waiting
job with its position, its project's rank and fair-share factor and the reason.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence

from allot_common.figures import hours_text, level_fs_text, runtime_text, usage_window_text
from allot_common.placements import host_gpus_text
from scheduler.core.engine.blocks import Shape
from scheduler.core.engine.cluster import ClusterState, Decisions
from scheduler.core.engine.fairshare import FairShare
from scheduler.core.engine.runs import protection_s
from scheduler.core.engine.short_reserve import PendingIds
from scheduler.core.engine.types import (
    ExplainedQueue,
    Placement,
    Policy,
    QueueBlock,
    QueueEntry,
    StopReason,
    Workload,
    queue_block,
)
from scheduler.core.engine.victims import IDLE, Victim

__all__ = [
    "FOR_GPUS",
    "STANDING",
    "FairShareReasons",
    "baseline_queue",
    "fair_share_queue",
    "hours_text",
    "project_standing",
    "queue_ranks",
]

INF = math.inf
# The words of a project's standing in every reason that quotes it ("project a1 is at
# 142% of its entitled share over 7 days"): readers (the job page's blockers) find the
# budget part of a reason by them.
STANDING = "of its entitled share"
# How the reason of a job that only capacity holds back begins (its project ranks first:
# no better-ranked project's jobs go before it); the job page's capacity blocker leads
# with the words after it.
FOR_GPUS = "waiting for GPUs: "


def limit_text(s: float) -> str:
    """A configured duration limit: whole seconds below a minute (a demo's compressed
    short-job limit is '15 s', not '0 min'), else as `hours_text`."""
    return f"{s:.0f} s" if s < 59.5 else hours_text(s)


def queue_ranks(order: Sequence[str], entitled: Mapping[str, float]) -> tuple[dict[str, int], int]:
    """The rank people see (glossary: rank) of every project of the engine's `order`
    (best first), and how many projects are ranked (the "of M"): the place in the order
    among the projects with an entitlement; a project with none (weight 0 on its path)
    is not counted and gets, as the queue's `project_rank`, a place after all ranked
    projects, in the engine's order."""
    ranked = [p for p in order if entitled.get(p, 0.0) > 0.0]
    ranks = {p: k for k, p in enumerate(ranked, 1)}
    n = len(ranked)
    for p in order:
        if p not in ranks:
            n += 1
            ranks[p] = n
    return ranks, len(ranked)


def project_standing(
    project_order: Sequence[tuple[str, float]], entitled: Mapping[str, float]
) -> dict[str, tuple[int, float]]:
    """Project -> (queue rank, fair-share factor) as the explained queue shows them,
    from a plan's `project_order` (the engine's order with its factors): the rank of
    `queue_ranks`, and the factor 0 for a project without entitlement (it has none;
    glossary: fair-share factor). For every surface that shows a project's standing
    outside the engine's queue blocks (jobs waiting for their victims, a job the last
    cycle has not placed, the dry run)."""
    ranks, ranked = queue_ranks([p for p, _ in project_order], entitled)
    return {p: (ranks[p], f if ranks[p] <= ranked else 0.0) for p, f in project_order}


class FairShareReasons:
    """The reasons of fair-share mode, from the project order and entitlement."""

    def __init__(
        self,
        order: Sequence[str],
        rank: Mapping[str, int],
        entitled: Mapping[str, float],
        usage: Mapping[str, float],
        policy: Policy,
        healthy_gpus: int,
        fair_share: FairShare,
    ) -> None:
        self.order = order
        self.fair_share = fair_share
        self.rank = rank
        self.entitled = entitled
        self.usage = usage
        self.policy = policy
        self.cap = policy.max_min_runtime_s
        self.healthy_gpus = healthy_gpus
        self._project_texts: dict[tuple[str, int], str] = {}
        # the usage window in words: the same for the whole cycle, quoted by every
        # project's standing (2,000 projects on a large cluster)
        self._window = usage_window_text(policy.lookback_s, policy.half_life_s)
        # The rank people see (glossary: rank); the engine's own order (`rank`) is
        # unchanged.
        self.queue_ranks, self.ranked = queue_ranks(order, entitled)
        self.standing_rank = {p: k for p, k in self.queue_ranks.items() if k <= self.ranked}
        # the ranked projects best first: the one of rank k at k - 1
        self.by_rank = [p for p in order if p in self.standing_rank]

    def rank_text(self, proj: str) -> str:
        """ "fair-share rank 3 of 12" among the projects with an entitlement, or "no
        entitlement" for a project without one."""
        k = self.standing_rank.get(proj)
        if k is None:
            return "no entitlement"
        return f"fair-share rank {k} of {self.ranked}"

    def queue_rank(self, proj: str) -> int:
        """The queue's `project_rank`: the rank among the projects with an entitlement;
        a project without one comes after all of them, in the engine's order."""
        return self.queue_ranks[proj]

    def usage_relative_to_entitled_share(self, proj: str, extra: float = 0.0) -> float:
        """The project's window usage (plus `extra` GPU-seconds) as a percentage of its
        entitled share of the healthy GPUs over the window (glossary: usage relative to
        entitled share)."""
        ent = self.entitled.get(proj, 0.0)
        window = self.policy.lookback_s
        if self.policy.half_life_s:
            window = self.policy.half_life_s / math.log(2)
        denom = ent * self.healthy_gpus * window
        return 100.0 * (self.usage.get(proj, 0.0) + extra) / denom if denom > 0 else INF

    def window(self) -> str:
        """The usage window in words ("over 7 days"), as every surface says it."""
        return self._window

    def project(self, proj: str, r: int) -> str:
        """Where a project stands (order index `r`); the same for the whole cycle, so
        written once per project (every start and preemption says it)."""
        text = self._project_texts.get((proj, r))
        if text is None:
            if proj not in self.standing_rank:
                text = f"project {proj} has no entitlement (weight 0 on its path)"
            else:
                # the percentage formatted on its own: compiled, an f-string with a
                # format spec formats every one of its parts through str.format
                pct = f"{self.usage_relative_to_entitled_share(proj):.0f}"
                text = (
                    f"project {proj} is at {pct}% {STANDING} {self.window()} "
                    f"({self.rank_text(proj)})"
                )
            self._project_texts[proj, r] = text
        return text

    def deciding_level(self, proj: str) -> str:
        """ "; behind project b2 at the deciding level: prog-a used more relative to its
        share than prog-b (level FS 0.71 vs 1.40)": where the Fair Tree put the project
        ranked just above `proj` before it (glossary: deciding level), with the level
        fair-shares the walk compared (`FairShare.deciding_nodes`). "" for the first-ranked
        project, and where the two projects themselves were compared (their standing
        says it) or a tie was broken by the seeded hash."""
        k = self.standing_rank.get(proj, 1)
        if k <= 1:
            return ""
        ahead = self.by_rank[k - 2]
        nodes = self.fair_share.deciding_nodes(proj, ahead)
        if nodes is None:
            return ""
        ct, lf = self.fair_share.tree, self.fair_share.lf
        a, b = nodes
        if ct.is_leaf[a] and ct.is_leaf[b]:
            return ""
        # as many places as tell the two apart (a 0.714 against a 0.716 is not "0.71 vs 0.71")
        shown_a, shown_b = level_fs_text(lf[a]), level_fs_text(lf[b])
        places = 2
        while shown_a == shown_b and places < 6:
            places += 1
            shown_a, shown_b = level_fs_text(lf[a], places), level_fs_text(lf[b], places)
        name_a = f"project {proj}" if ct.is_leaf[a] else ct.names[a]
        name_b = f"project {ahead}" if ct.is_leaf[b] else ct.names[b]
        return (
            f"; behind project {ahead} at the deciding level: {name_a} used more relative to "
            f"its share than {name_b} (level FS {shown_a} vs {shown_b})"
        )

    def start(self, w: Workload, r: int, pls: tuple[Placement, ...], how: str) -> str:
        """Why `w` started, where, and what protects it."""
        where = ", ".join(placement_text(p) for p in pls)
        if w.min_runtime_s > 0:
            prot = f"protected for {runtime_text(protection_s(w, self.cap))}"
        else:
            prot = "unallocated: free of charge, preemptible at any time"
        return f"started on {where} using {how}; {self.project(w.project, r)}; {prot}"

    def victim(self, v: Victim, w: Workload, r: int) -> tuple[StopReason, str]:
        """Why `v` is preempted for `w` (of order index `r`)."""
        lost = v.lost_text()
        if v.tier == IDLE:
            idle = hours_text(self.policy.idle_reclaim_after_s)
            return StopReason.IDLE, (
                f"preempted after its protected minimum runtime: its GPUs were idle for "
                f"at least {idle} "
                f"(idle GPUs reclaimed) and allocated job {w.id} of project {w.project} "
                f"needed them; {lost}"
            )
        if not v.allocated:
            return StopReason.UNALLOCATED, (
                f"preempted: unallocated job (min runtime 0) gives way to allocated job {w.id} "
                f"of project {w.project}; {lost}"
            )
        if v.project == w.project:
            return StopReason.PRIORITY, (
                f"preempted after its protected minimum runtime by higher-priority job {w.id} "
                f"(priority {w.priority} > {v.priority}) of the same project {w.project}; {lost}"
            )
        rq = self.rank.get(v.project, len(self.order))
        return StopReason.FAIR_SHARE, (
            f"preempted after its protected minimum runtime: {self.project(v.project, rq)} "
            f"and ranks below project {w.project} ({self.rank_text(w.project)}), which it "
            "would still do "
            f"with job {w.id} running; {lost}"
        )

    def reserve_victim(self, v: Victim, w: Workload, r: int) -> tuple[StopReason, str]:
        """Why `v` is preempted for short job `w` on a host the short-job reserve holds:
        allocated work past its protection gives way whatever the projects' ranks (the
        reserve ranks above every job); other work, and lower-priority work of `w`'s own
        project, as `victim` says (the rule that allows it anyway)."""
        if (
            v.tier == IDLE
            or not v.allocated
            or (v.project == w.project and v.priority < w.priority)
        ):
            return self.victim(v, w, r)
        return StopReason.SHORT_RESERVE, (
            f"preempted after its protected minimum runtime: its host is held by the "
            f"short-job reserve and short job {w.id} of project {w.project} needed the GPUs; "
            f"{v.lost_text()}"
        )

    def own_short_victim(self, v: Victim, w: Workload, r: int) -> tuple[StopReason, str]:
        """Why `v` is preempted for short job `w` of its own project: a project's short
        jobs go before its longer work past its protection (the short-job trade); other
        work as `victim` says."""
        if v.tier == IDLE or not v.allocated or v.priority < w.priority:
            return self.victim(v, w, r)
        return StopReason.SHORT_RESERVE, (
            f"preempted after its protected minimum runtime: short job {w.id} of the same "
            f"project {w.project} needed the GPUs (a project's short jobs go before its "
            f"longer work); {v.lost_text()}"
        )

    def waiting_allocated(self, proj: str, r: int, notes: str) -> str:
        """Why a project's allocated jobs wait (`notes`: "; ..." about the cluster)."""
        if self.entitled.get(proj, 0.0) <= 0.0:
            return (
                f"waiting: project {proj} has no entitlement (weight 0 on its path): it may "
                "run only unallocated jobs (min runtime 0)"
            )
        ahead = self.standing_rank[proj] - 1
        if not ahead:
            # the first-ranked project: no better-ranked project's jobs go before its
            # own, so its budget holds it back behind nothing; its standing is not the
            # cause and the reason does not quote it (readers find a budget cause by
            # STANDING: the job page lists capacity alone, led by these words)
            return (
                f"{FOR_GPUS}no project ranks above project {proj} ({self.rank_text(proj)}){notes}"
            )
        return (
            f"waiting: {self.project(proj, r)}; "
            f"{ahead} project{'s rank' if ahead != 1 else ' ranks'} above it"
            f"{self.deciding_level(proj)}{notes}"
        )


def fair_share_queue(
    reasons: FairShareReasons,
    pending: Mapping[str, Sequence[Workload]],
    factor: Mapping[str, float],
    cluster: ClusterState,
    decisions: Decisions,
    short_reserve_note: str = "",
    pending_ids: Mapping[str, PendingIds] | None = None,
) -> ExplainedQueue:
    """The waiting queue: allocated jobs by project order, then unallocated ones
    (`short_reserve_note` tells allocated jobs which hosts the short-job reserve holds;
    `pending_ids`: the projects' ids already read, as `short_reserve.pending_short`
    reads them with the short jobs, so that 100,000 jobs are not read twice).

    Built per project: one `QueueBlock` with one shared reason string for all of a
    project's waiting jobs of a phase (positions are consecutive), their ids split out
    in bulk; only projects with a job-specific note (reservation, no room, invalid
    size) or a job started this cycle take the per-job path."""
    blocks: list[QueueBlock] = []
    order = reasons.order
    touched = decisions.noted_projects | decisions.started_projects
    full_note = "" if cluster.index.any_free() else "; no free GPUs"
    good = cluster.layout.runnable_sizes()
    # the notes every project's allocated jobs share, joined once: the short-job
    # reserve's note names each of its hosts (about 9 KB on 1,250 hosts)
    allocated_notes = full_note + short_reserve_note
    split: dict[str, PendingIds] = dict(pending_ids) if pending_ids else {}
    for allocated_phase in (True, False):
        for r, proj in enumerate(order):
            lst = pending.get(proj)
            if not lst:
                continue
            ids_of = split.get(proj)
            if ids_of is None:
                ids_of = split[proj] = _split_ids(lst, good)
            if allocated_phase:
                ids = ids_of[0]
                if not ids:
                    continue
                base = reasons.waiting_allocated(proj, r, allocated_notes)
            else:
                ids = ids_of[1]
                if not ids:
                    continue
                base = (
                    "waiting: unallocated job (min runtime 0) runs only on GPUs no allocated "
                    f"job wants; queued after all allocated jobs ({reasons.rank_text(proj)})"
                    f"{full_note}"
                )
            text: str | tuple[str, ...] = base
            if not ids_of[2]:
                ids, text = _job_reasons(lst, allocated_phase, base, decisions, cluster.shape)
            elif proj in touched:
                ids, text = _noted_reasons(ids, base, decisions)
            ranked = proj in reasons.standing_rank
            blocks.append(
                queue_block(
                    proj,
                    reasons.queue_rank(proj),
                    factor.get(proj, 0.0) if ranked else 0.0,
                    ids,
                    text,
                )
            )
    return ExplainedQueue(blocks)


def _split_ids(lst: Sequence[Workload], good: set[int]) -> PendingIds:
    """The ids of a project's allocated and of its unallocated waiting jobs, in order,
    and whether every job has a size the cluster can run. One pass that reads each job
    once: the queue of a large cluster holds 100,000 jobs, and reading them is what
    costs (three C-level passes took 1.7x as long)."""
    allocated: list[str] = []
    unallocated: list[str] = []
    add_allocated, add_unallocated = allocated.append, unallocated.append
    runnable = True
    for w in lst:
        if w.min_runtime_s > 0:
            add_allocated(w.id)
        else:
            add_unallocated(w.id)
        if w.gpus not in good:
            runnable = False
    return tuple(allocated), tuple(unallocated), runnable


def _job_reasons(
    lst: Sequence[Workload],
    allocated_phase: bool,
    base: str,
    decisions: Decisions,
    shape: Callable[[int], Shape],
) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """Ids and reasons of a project's waiting jobs, each with its own note if any."""
    ids: list[str] = []
    texts: list[str] = []
    started, notes = decisions.started, decisions.notes
    for w in lst:
        if (w.min_runtime_s > 0) is not allocated_phase or w.id in started:
            continue
        extra = notes.get(w.id)
        if extra is None:
            extra = shape(w.gpus).reason or None
        ids.append(w.id)
        texts.append(f"{base}; {extra}" if extra else base)
    return tuple(ids), tuple(texts)


def _noted_reasons(
    phase_ids: Sequence[str], base: str, decisions: Decisions
) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """`_job_reasons` for a project whose every job has a size the cluster can run (no
    job has a size's reason): read from its ids alone, not from its jobs."""
    ids: list[str] = []
    texts: list[str] = []
    started, notes = decisions.started, decisions.notes
    for i in phase_ids:
        if i in started:
            continue
        extra = notes.get(i)
        ids.append(i)
        texts.append(f"{base}; {extra}" if extra else base)
    return tuple(ids), tuple(texts)


def baseline_queue(
    ordered: Iterable[Workload],
    mode: str,
    cluster: ClusterState,
    decisions: Decisions,
    static_limits: Mapping[str, int],
) -> ExplainedQueue:
    """The waiting queue of a baseline, in its own order (arrival or priority)."""
    out: list[QueueEntry] = []
    pos = 0
    full = "" if cluster.index.any_free() else "; no free GPUs"
    started, notes = decisions.started, decisions.notes
    for w in ordered:
        if w.id in started:
            continue
        pos += 1
        extra = notes.get(w.id)
        if mode == "fifo":
            base = f"waiting ({mode}): {pos - 1} jobs ahead of it in arrival order{full}"
        elif mode == "static":
            base = (
                f"waiting (static): project {w.project} is confined to "
                f"{static_limits.get(w.project, 0)} GPUs{full}"
            )
        else:
            base = f"waiting (priority {w.priority}): {pos - 1} jobs ahead of it{full}"
        out.append(
            QueueEntry(
                w.id, w.project, pos, 0, float(w.priority), f"{base}; {extra}" if extra else base
            )
        )
    return ExplainedQueue.of(out)


# A reason names at most this many hosts (every waiting job's reason carries the note:
# 1,246 names on a 1,250-host cluster made each reason ~9 KB).
NAMED_HOSTS = 6


def placement_text(p: Placement) -> str:
    """A placement's host and GPUs (see host_gpus_text)."""
    return host_gpus_text(p.host, p.gpu_indices)


def hosts_text(names: Sequence[str]) -> str:
    """`h1, h2` or, past NAMED_HOSTS, `h1, ..., h5 and 1,241 more hosts`."""
    if len(names) <= NAMED_HOSTS:
        return ", ".join(names)
    shown = NAMED_HOSTS - 1
    return f"{', '.join(names[:shown])} and {len(names) - shown:,} more hosts"


def no_block_note(size: int) -> str:
    """A waiting job's note when neither free GPUs nor victims give it a block."""
    return (
        f"no free aligned block of {size} GPU{'s' if size != 1 else ''} and no job it may preempt"
    )
