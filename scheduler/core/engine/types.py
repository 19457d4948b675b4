"""Plain data that goes into and comes out of one scheduling cycle.

The engine is pure Python: no Django, no clock, no I/O. The live service, the
simulator and the what-if previews all build a `Snapshot`, call
`scheduler.core.engine.plan(snapshot, policy, now)` and apply the returned `CyclePlan`.

Times are seconds (float) on whatever clock the caller uses; `now` is passed in.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from itertools import count, repeat
from types import MappingProxyType
from typing import NamedTuple, overload

HOURS = 3600.0
DAYS = 86400.0


@dataclass(frozen=True, slots=True)
class Host:
    """A machine with `gpus` GPUs, indexed 0..gpus-1."""

    name: str
    gpus: int = 8
    healthy: bool = True


@dataclass(frozen=True, slots=True)
class Workload:
    """A job as submitted. `submit_s` is the original submit time, kept across requeues."""

    id: str
    project: str
    gpus: int
    submit_s: float
    min_runtime_s: float = 0.0
    resumable: bool = False
    priority: int = 0
    kind: str = ""

    @property
    def allocated(self) -> bool:
        """A job that declared a minimum runtime is charged to its project's budget."""
        return self.min_runtime_s > 0


@dataclass(frozen=True, slots=True)
class Placement:
    """The GPUs a workload holds on one host."""

    host: str
    gpu_indices: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class RunningWorkload:
    """A workload currently holding GPUs.

    `started_s` is the start of the current run (protection counts from it);
    `allocated` says whether this run is charged to the project's budget;
    `last_checkpoint_s` is when resumable work was last saved (None: never, i.e.
    everything since `started_s` would be lost on preemption);
    `protected_until_s`, when set, is when its protection ends regardless of its
    minimum runtime: a holder the engine must leave alone until then (a run already
    stopping, a job outside Allot). `scheduler.core.engine.runs.protected_until` reads it.
    `idle_since_s`, when set, is since when its GPUs have been idle (below the cluster's
    utilization threshold), as the caller measured it; None: not idle (the default).
    With `Policy.idle_reclaim` on, `scheduler.core.engine.runs.idle_reclaimable` reads it.
    """

    workload: Workload
    placements: tuple[Placement, ...]
    started_s: float
    allocated: bool
    last_checkpoint_s: float | None = None
    protected_until_s: float | None = None
    idle_since_s: float | None = None


@dataclass(frozen=True, slots=True)
class BudgetNode:
    """A node of the budget tree. Leaves are projects.

    A leaf's project key (how snapshots, usage and plans name the project) is `key`
    when set, else its name when no other leaf has that name, else its path below the
    root ("prog-a/a1"); see `scheduler.core.engine.budget_tree`.
    """

    name: str
    weight: float = 1.0
    children: tuple[BudgetNode, ...] = ()
    key: str = ""


@dataclass(frozen=True, slots=True)
class Snapshot:
    """Everything one cycle may look at.

    `pending` maps a project to its pending workloads, already in within-project
    order (priority descending, then submit time, then id). Callers keep these lists
    sorted incrementally, so the engine can work from the heads of the queues and
    never has to sort or scan all pending work on the hot path.
    `usage` maps a project to its charged GPU-seconds in the look-back window
    (or the decayed equivalent); missing projects have zero usage.
    `worked` maps a workload id to the work it saved in earlier runs, seconds (a
    requeued job's, before its current run or wait); missing: none. The engine does not
    read it; the ETA's runtime forecast counts it as time already run.
    `avoid` maps a workload id to the hosts it must not be placed on (the cluster
    refused to start it there: `scheduler.core.refusals`); missing: none. The engine
    neither starts it there nor preempts or reserves there for it.
    """

    hosts: Sequence[Host]
    running: Sequence[RunningWorkload]
    pending: Mapping[str, Sequence[Workload]]
    tree: BudgetNode
    usage: Mapping[str, float] = field(default_factory=dict)
    worked: Mapping[str, float] = field(default_factory=dict)
    avoid: Mapping[str, frozenset[str]] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Policy:
    """Tunable rules of the scheduling contract."""

    max_min_runtime_s: float = 8 * HOURS
    lookback_s: float = 7 * DAYS
    half_life_s: float | None = None  # decayed usage instead of a hard window when set
    checkpoint_interval_s: float = 30 * 60.0
    restart_overhead_s: float = 120.0
    explain_queue: bool = True  # compute position/metric/reason for every pending workload
    seed: int = 0
    # "fairshare" (ours) or a baseline: "fifo", "priority" (old scheduler), "static"
    mode: str = "fairshare"
    max_reservations: int = 1  # large jobs at the head of the order that get hosts reserved
    # Reservation admission (on by default; `scheduler.core.engine.hold_times`): while a
    # reserved job's hosts are usable at no foreseeable time (it waits for work it may
    # not preempt to end), they admit allocated jobs it may preempt whose protection
    # ends within this many seconds, so their free GPUs run allocated work, not
    # unallocated backfill; the reserved job starts at most this much later than its
    # hosts free up (`hold_times.MayTake`). 0: only unallocated work uses them, the
    # rule before.
    reservation_admit_s: float = 3600.0
    max_failed_preemption_searches: int = 16  # per cycle; bounds work, later cycles retry
    # Short-job reserve (fair-share mode): hosts of the largest size that take no new
    # allocated job protected for longer than `short_job_max_s`; short jobs start there
    # on free GPUs or by preempting unallocated backfill, which fills them when idle.
    # Keeps quick debug turnaround for teams ranked low during pushes.
    # `short_reserve_auto` (on by default) sizes it from what the cycle observes: the
    # GPUs of the short jobs running and waiting, in whole hosts, no more than those
    # GPUs plus `short_reserve_idle_share` of the healthy GPUs (none while there is no
    # short work); `short_reserve_hosts` is a fixed minimum on top (0: none). It gives
    # way to the first waiting job of the fair-share order once that job has waited
    # `short_reserve_release_s`. `short_reserve_auto=False` with `short_reserve_hosts=0`
    # is the scheduler without a reserve.
    short_reserve_hosts: int = 0
    short_job_max_s: float = 15 * 60.0
    short_reserve_auto: bool = True
    short_reserve_idle_share: float = 0.02
    short_reserve_release_s: float = 30 * 60.0
    # The demand the reserve's budget for under-served projects' work is a share of
    # (`short_reserve.under_served_budget`): allocated work running and waiting, the
    # waiting part only as submitted within this many seconds (inf, the default: all of
    # it). Under overload the waiting backlog only grows and the budget falls to a few
    # GPUs; a finite window (an experiment, e.g. `short_reserve_release_s`) keeps it
    # to what arrives.
    short_reserve_demand_window_s: float = float("inf")
    # An experiment, off by default: short jobs on the reserve never take another
    # project's job on the share floor (as fair-share preemption never does).
    short_reserve_spares_floor: bool = False
    # How the reserve serves a burst of short jobs under overload (issue 24), on by
    # default (inf / False / False: the earlier rule, the budget alone). A short job that
    # has waited `short_reserve_take_after_s` (from its submit time) may take
    # under-served projects' work past its protection on the reserve beyond the budget
    # (inf: never). `short_reserve_fewest_gpus`: on the reserve, a short job takes the
    # block whose under-served victims hold the fewest GPUs (then the least lost work),
    # not the one with the fewest such victims (a 1-GPU job stopping an 8-GPU job takes
    # 8). `short_reserve_room_now`: the reserve counts as its room only GPUs a short job
    # may take now (not those whose protection ends within the short limit), so a burst
    # of short jobs finds hosts it can start on at once.
    short_reserve_take_after_s: float = 15.0
    short_reserve_fewest_gpus: bool = True
    short_reserve_room_now: bool = True
    # Idle-GPU reclaim (fair-share mode, off by default): a running job past its minimum
    # runtime whose GPUs have been idle for `idle_reclaim_after_s` (its `idle_since_s`)
    # may be preempted by any allocated job that needs GPUs, and is taken before every
    # other candidate (before unallocated work, before its project's other jobs).
    idle_reclaim: bool = False
    idle_reclaim_after_s: float = 30 * 60.0
    # Share floor (fair-share mode, on by default): a project below its entitled share
    # over the usage window keeps its oldest allocated jobs up to that share (the one
    # crossing it included) from the fair-share preemption of projects served more than
    # `share_floor.MARGIN_PCT` points better relative to their share
    # (`scheduler.core.engine.share_floor`); off: Fair Tree's rank alone decides.
    share_floor: bool = True
    # Consolidation (fair-share mode, on by default; `scheduler.core.engine.consolidate`):
    # a waiting allocated job that fits in the free GPUs in total but on no host may get
    # a block freed by moving a few resumable jobs past their protection to free pieces
    # of other hosts, restarted in the same cycle, when the work they lose is below the
    # GPU-time the move puts to work over one checkpoint interval. False: never.
    consolidate: bool = True


class StopReason(StrEnum):
    """Why a running workload is stopped."""

    FAIR_SHARE = "fair_share"  # its project ranks below the preemptor's
    UNALLOCATED = "unallocated"  # free (unallocated) work gives way to allocated work
    PRIORITY = "priority"  # a higher-priority job of the same project
    DRAIN = "drain"  # its host is unhealthy and its protection is over
    HOST_DOWN = "host_down"
    IDLE = "idle"  # its GPUs were idle past its protection (idle-GPU reclaim)
    SHORT_RESERVE = "short_reserve"  # past its protection on a host held for short jobs
    MIGRATE = "migrate"  # moved to another host at once to free a block (consolidation)


# One name per preemption rule everywhere (glossary: preemption rules): job events, the
# metric's `rule` label, the waits dashboard and the simulator report's
# `preemptions.by_reason` name a stop by its rule, and people read it in these words
# (charts' legends, the preemptions CSV, the API's `rule_label`, `allot show`).
STOP_RULES: Mapping[str, str] = MappingProxyType(
    {
        StopReason.FAIR_SHARE: "fair_share",
        StopReason.UNALLOCATED: "unallocated_work",
        StopReason.PRIORITY: "project_priority",
        StopReason.DRAIN: "host_drain",
        StopReason.HOST_DOWN: "host_down",
        StopReason.IDLE: "idle_reclaim",
        StopReason.SHORT_RESERVE: "short_reserve",
        StopReason.MIGRATE: "consolidation",
    }
)
RULE_LABELS: Mapping[str, str] = MappingProxyType(
    {
        "fair_share": "Fair share: a less-served project needed the GPUs",
        "unallocated_work": "Unallocated (free) work gave way",
        "project_priority": "A higher-priority job of the same project",
        "host_drain": "Host drained after the job's protection",
        "host_down": "Host went down",
        "idle_reclaim": "Idle GPUs reclaimed after the job's protection",
        "short_reserve": "Short-job reserve: a short job needed the GPUs after the job's protection",
        "consolidation": "Moved to another host, restarted at once, to free a block for a waiting job",
    }
)


def stop_rule(reason_code: str) -> str:
    """The rule of an engine stop reason (`StopReason` or its value); an unknown code as
    it is."""
    return STOP_RULES.get(reason_code, str(reason_code))


def rule_label(rule: str) -> str:
    """A preemption rule in people's words (an unknown rule: its words)."""
    return RULE_LABELS.get(rule, rule.replace("_", " ").capitalize()) if rule else ""


@dataclass(frozen=True, slots=True)
class Start:
    workload_id: str
    placements: tuple[Placement, ...]
    allocated: bool
    reason: str


@dataclass(frozen=True, slots=True)
class Stop:
    """A preemption or a drain stop. Resumable work is requeued by the caller."""

    workload_id: str
    reason_code: StopReason
    reason: str
    requeue: bool
    for_workload_id: str | None = None


@dataclass(frozen=True, slots=True)
class Reservation:
    workload_id: str
    hosts: tuple[str, ...]
    reason: str


@dataclass(frozen=True, slots=True)
class HostReady:
    """An unhealthy host that is now empty: ready for repair."""

    host: str
    reason: str


class QueueEntry(NamedTuple):
    """One waiting workload in the queue."""

    workload_id: str
    project: str
    position: int  # 1-based position in the global queue order
    project_rank: int  # 1-based rank of the project in the fair-share order
    metric: float  # the project's sort metric (Slurm-style fair-share factor, 0..1)
    reason: str  # why it waits, in plain language


class QueueBlock(NamedTuple):
    """Consecutive queue entries of one project: their ids in queue order and either
    one reason they all share or one reason per job."""

    project: str
    project_rank: int
    metric: float
    workload_ids: Sequence[str]
    reason: str | Sequence[str]


_new_tuple = tuple.__new__


def queue_block(
    project: str,
    project_rank: int,
    metric: float,
    workload_ids: Sequence[str],
    reason: str | Sequence[str],
) -> QueueBlock:
    """`QueueBlock(...)` without the named tuple's constructor, a Python function even
    in the compiled engine (a large cycle makes 4,000 blocks)."""
    return _new_tuple(QueueBlock, (project, project_rank, metric, workload_ids, reason))


class ExplainedQueue(Sequence[QueueEntry]):
    """The waiting queue of a cycle: a read-only sequence of `QueueEntry`, stored as
    `QueueBlock`s (a project's waiting jobs share their rank, metric and mostly their
    reason), so a cycle with 100,000 waiting jobs builds a few thousand blocks instead
    of 100,000 entries. Entries are made when read; `columns()` gives the flat columns
    in bulk, as the live worker stores them. Equal to any sequence of the same entries.
    """

    __slots__ = ("_ends", "blocks")

    def __init__(self, blocks: Iterable[QueueBlock] = ()) -> None:
        self.blocks = tuple(b for b in blocks if b.workload_ids)
        ends = []
        n = 0
        for b in self.blocks:
            if not isinstance(b.reason, str) and len(b.reason) != len(b.workload_ids):
                raise ValueError(f"queue block of {b.project}: one reason per job expected")
            n += len(b.workload_ids)
            ends.append(n)
        self._ends = ends

    @classmethod
    def of(cls, entries: Iterable[QueueEntry]) -> ExplainedQueue:
        """A queue of ready-made entries (positions must run 1, 2, ...); consecutive
        entries of one project, rank and metric share a block."""
        blocks: list[QueueBlock] = []
        ids: list[str] = []
        reasons: list[str] = []
        head: QueueEntry | None = None
        for i, e in enumerate(entries, 1):
            if e.position != i:
                raise ValueError(f"queue entry {e.workload_id}: position {e.position}, not {i}")
            if head is None or (e.project, e.project_rank, e.metric) != (
                head.project,
                head.project_rank,
                head.metric,
            ):
                if head is not None:
                    blocks.append(
                        QueueBlock(head.project, head.project_rank, head.metric, ids, reasons)
                    )
                head, ids, reasons = e, [], []
            ids.append(e.workload_id)
            reasons.append(e.reason)
        if head is not None:
            blocks.append(QueueBlock(head.project, head.project_rank, head.metric, ids, reasons))
        return cls(blocks)

    def __len__(self) -> int:
        return self._ends[-1] if self._ends else 0

    def __iter__(self) -> Iterator[QueueEntry]:
        pos = 1
        for b in self.blocks:
            reasons = repeat(b.reason) if isinstance(b.reason, str) else b.reason
            yield from map(
                _new_tuple,
                repeat(QueueEntry),
                zip(
                    b.workload_ids,
                    repeat(b.project),
                    count(pos),
                    repeat(b.project_rank),
                    repeat(b.metric),
                    reasons,
                ),
            )
            pos += len(b.workload_ids)

    @overload
    def __getitem__(self, index: int) -> QueueEntry: ...

    @overload
    def __getitem__(self, index: slice) -> tuple[QueueEntry, ...]: ...

    def __getitem__(self, index: int | slice) -> QueueEntry | tuple[QueueEntry, ...]:
        if isinstance(index, slice):
            return tuple(self)[index]
        n = len(self)
        i = index + n if index < 0 else index
        if not 0 <= i < n:
            raise IndexError("queue index out of range")
        k = bisect_right(self._ends, i)
        b = self.blocks[k]
        j = i - (self._ends[k - 1] if k else 0)
        reason = b.reason if isinstance(b.reason, str) else b.reason[j]
        return QueueEntry(b.workload_ids[j], b.project, i + 1, b.project_rank, b.metric, reason)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, ExplainedQueue) and self.blocks == other.blocks:
            return True
        if not isinstance(other, Sequence) or isinstance(other, str):
            return NotImplemented
        return len(self) == len(other) and all(a == b for a, b in zip(self, other, strict=True))

    def __hash__(self) -> int:
        return hash(tuple(self))

    def __repr__(self) -> str:
        return f"ExplainedQueue({len(self)} entries in {len(self.blocks)} blocks)"

    def columns(self) -> tuple[list[str], list[str], list[int], list[float], list[str]]:
        """Workload ids, projects, project ranks, metrics and reasons, one per entry."""
        ids: list[str] = []
        projects: list[str] = []
        ranks: list[int] = []
        metrics: list[float] = []
        reasons: list[str] = []
        for b in self.blocks:
            n = len(b.workload_ids)
            ids.extend(b.workload_ids)
            projects.extend(repeat(b.project, n))
            ranks.extend(repeat(b.project_rank, n))
            metrics.extend(repeat(b.metric, n))
            reasons.extend(repeat(b.reason, n) if isinstance(b.reason, str) else b.reason)
        return ids, projects, ranks, metrics, reasons


NO_QUEUE = ExplainedQueue()


@dataclass(frozen=True, slots=True)
class CyclePlan:
    starts: tuple[Start, ...] = ()
    stops: tuple[Stop, ...] = ()
    reservations: tuple[Reservation, ...] = ()
    hosts_ready: tuple[HostReady, ...] = ()
    queue: ExplainedQueue = NO_QUEUE  # empty unless policy.explain_queue
    project_order: tuple[tuple[str, float], ...] = ()  # (project, fair-share factor), best first
    short_reserve: tuple[str, ...] = ()  # hosts the short-job reserve held this cycle
