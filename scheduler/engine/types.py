"""Plain data that goes into and comes out of one scheduling cycle.

The engine is pure Python: no Django, no clock, no I/O. The live service, the
simulator and the what-if previews all build a `Snapshot`, call
`scheduler.engine.plan(snapshot, policy, now)` and apply the returned `CyclePlan`.

Times are seconds (float) on whatever clock the caller uses; `now` is passed in.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import NamedTuple

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
    everything since `started_s` would be lost on preemption).
    """

    workload: Workload
    placements: tuple[Placement, ...]
    started_s: float
    allocated: bool
    last_checkpoint_s: float | None = None


@dataclass(frozen=True, slots=True)
class BudgetNode:
    """A node of the budget tree. Leaves are projects.

    A leaf's project key (how snapshots, usage and plans name the project) is `key`
    when set, else its name when no other leaf has that name, else its path below the
    root ("prog-a/a1"); see `scheduler.engine.budget_tree`.
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
    """

    hosts: Sequence[Host]
    running: Sequence[RunningWorkload]
    pending: Mapping[str, Sequence[Workload]]
    tree: BudgetNode
    usage: Mapping[str, float] = field(default_factory=dict)


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
    max_failed_preemption_searches: int = 16  # per cycle; bounds work, later cycles retry
    # Short-job reserve (fair-share mode, opt-in): at least this many of the largest
    # healthy hosts (more while the short jobs running and waiting need them) take no new
    # allocated job protected for longer than `short_job_max_s`; short jobs
    # start there on free GPUs or by preempting unallocated backfill, which fills them
    # when idle. Keeps quick debug turnaround for teams ranked low during pushes.
    short_reserve_hosts: int = 0
    short_job_max_s: float = 15 * 60.0


class StopReason(StrEnum):
    """Why a running workload is stopped."""

    FAIR_SHARE = "fair_share"  # its project ranks below the preemptor's
    UNALLOCATED = "unallocated"  # free (unallocated) work gives way to allocated work
    PRIORITY = "priority"  # a higher-priority job of the same project
    DRAIN = "drain"  # its host is unhealthy and its protection is over
    HOST_DOWN = "host_down"


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
    """One waiting workload in the queue (a NamedTuple: the queue holds one per pending
    job and is built every cycle, so entries must be cheap to make)."""

    workload_id: str
    project: str
    position: int  # 1-based position in the global queue order
    project_rank: int  # 1-based rank of the project in the fair-share order
    metric: float  # the project's sort metric (Slurm-style fair-share factor, 0..1)
    reason: str  # why it waits, in plain language


@dataclass(frozen=True, slots=True)
class CyclePlan:
    starts: tuple[Start, ...] = ()
    stops: tuple[Stop, ...] = ()
    reservations: tuple[Reservation, ...] = ()
    hosts_ready: tuple[HostReady, ...] = ()
    queue: tuple[QueueEntry, ...] = ()  # empty unless policy.explain_queue
    project_order: tuple[tuple[str, float], ...] = ()  # (project, fair-share factor), best first
