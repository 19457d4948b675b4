"""The simulator's inputs and outputs, shared by the replay loop, the file readers,
the report and `ledger.accounting`.

Inputs: a `ClusterSpec`, a budget tree (`scheduler.core.engine.types.BudgetNode`), a
list of `TraceJob` and a `SimConfig`. Output: a `SimResult`, from which
`scheduler.core.sim.report` computes REPORT.json and the intervals CSV.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from ledger.accounting import EndReason, RunInterval

__all__ = [
    "ClusterSpec",
    "DrainRecord",
    "EndReason",
    "HealthEvent",
    "HostSpec",
    "JobOutcome",
    "JobState",
    "PreemptionRecord",
    "ReplayError",
    "RunInterval",
    "RunningAtStart",
    "SimConfig",
    "SimResult",
    "TraceJob",
]

POLICIES = ("fairshare", "fifo", "priority", "static")


class ReplayError(RuntimeError):
    """The engine returned a plan the replay cannot apply (a bug in the engine)."""


@dataclass(frozen=True, slots=True)
class HostSpec:
    name: str
    gpus: int = 8


@dataclass(frozen=True, slots=True)
class HealthEvent:
    at_s: float
    host: str
    healthy: bool


@dataclass(frozen=True, slots=True)
class ClusterSpec:
    name: str
    hosts: tuple[HostSpec, ...]
    events: tuple[HealthEvent, ...] = ()

    @property
    def total_gpus(self) -> int:
        return sum(h.gpus for h in self.hosts)


@dataclass(frozen=True, slots=True)
class RunningAtStart:
    """How a job was running when the replay starts (a what-if window opening on a live
    cluster): its run began at `started_s` (at or before the replay's start) on
    `placements` ((host, GPU indices) pairs; where they are empty, unknown or taken the
    replay places it where the engine would place a new job: `place_on_free`), charged to its project when
    `allocated`, and protected until `protected_until_s` (None: its minimum runtime from
    `started_s`, `scheduler.core.engine.runs.protected_until`)."""

    started_s: float
    placements: tuple[tuple[str, tuple[int, ...]], ...] = ()
    allocated: bool = True
    protected_until_s: float | None = None


@dataclass(frozen=True, slots=True)
class TraceJob:
    """One row of TRACE.csv. `duration_s` is the running time needed if never preempted.

    `idle_after_s`, when set, is the job's idle pattern: each run's GPUs go idle once
    the run has lasted that long (a session left open, a hung job); it still holds them
    until it ends or is stopped. None: never idle.

    `running`, when set, says the job is already running when the replay starts: it
    goes on running from then (its `submit_s`, the replay's start) as that run, with
    `duration_s` the work it had left then, instead of arriving to wait; its
    `idle_after_s` counts from that run's start."""

    job_id: str
    project: str
    user: str
    submit_s: float
    gpus: int
    duration_s: float
    min_runtime_s: float
    resumable: bool
    priority: int
    kind: str
    idle_after_s: float | None = None
    running: RunningAtStart | None = None


@dataclass(frozen=True, slots=True)
class SimConfig:
    policy: str = "fairshare"
    lookback_s: float = 7 * 86400.0
    half_life_s: float | None = None
    max_min_runtime_s: float = 8 * 3600.0
    checkpoint_interval_s: float = 1800.0
    restart_overhead_s: float = 120.0
    cycle_period_s: float = 60.0
    until_s: float | None = None  # None: until the last job ends
    # Like Slurm's sched_min_interval: event-driven cycles run at least this far apart
    # (events are still applied at their own times). 0: a cycle at every event instant.
    min_cycle_gap_s: float = 0.0
    seed: int = 0
    short_reserve_hosts: int = 0  # Policy.short_reserve_hosts (fairshare only)
    short_job_max_s: float = 15 * 60.0
    # Charged runs before the replay starts, (project, start_s, end_s, gpus) with
    # start_s < end_s <= 0: they count in the fair-share usage from the first cycle, so a
    # replay of a window of a live cluster starts with the usage the cluster had (the
    # what-if preview), not with none.
    prior_usage: tuple[tuple[str, float, float, int], ...] = ()
    short_reserve_auto: bool = True  # Policy.short_reserve_auto (fairshare only)
    # Policy.idle_reclaim and its idle duration (fairshare only): runs idle that long
    # (`TraceJob.idle_after_s`) past their min runtime are preempted first
    idle_reclaim: bool = False
    idle_reclaim_after_s: float = 1800.0
    share_floor: bool = True  # Policy.share_floor (fairshare only)
    # Policy.short_reserve_demand_window_s (fairshare only; inf: the default)
    short_reserve_demand_window_s: float = math.inf
    short_reserve_spares_floor: bool = False  # Policy.short_reserve_spares_floor
    short_reserve_take_after_s: float = 15.0  # Policy.short_reserve_take_after_s
    short_reserve_fewest_gpus: bool = True  # Policy.short_reserve_fewest_gpus
    short_reserve_room_now: bool = True  # Policy.short_reserve_room_now
    consolidate: bool = True  # Policy.consolidate
    reservation_admit_s: float = 3600.0  # Policy.reservation_admit_s (fairshare only)


class JobState:
    COMPLETED = "completed"
    TERMINATED = "terminated"  # preempted or stopped and not resumable
    PENDING = "pending"  # still waiting at the end of the run
    RUNNING = "running"  # still running at the end of the run


@dataclass(slots=True)
class JobOutcome:
    """What happened to one trace job.

    `waits_s` has one entry per start: time from submit (or requeue) to that start.
    A job still pending at the end contributes no wait entry (its open wait is
    `pending_since_s` .. end). `end_s` is when it completed or was terminated.
    """

    job_id: str
    project: str
    kind: str
    gpus: int
    min_runtime_s: float  # after the policy cap
    submit_s: float
    state: str = JobState.PENDING
    end_s: float | None = None
    waits_s: list[float] = field(default_factory=list)
    preemptions: int = 0
    pending_since_s: float | None = None
    # why the job was never queued (a shape no host set can ever hold); state TERMINATED
    rejected: str | None = None
    # running time it needs if never preempted (the trace's duration); None when unknown,
    # which leaves the report without an occupancy bound
    duration_s: float | None = None


@dataclass(frozen=True, slots=True)
class PreemptionRecord:
    at_s: float
    job_id: str
    project: str
    reason_code: str  # a scheduler.core.engine.types.StopReason value
    lost_gpu_s: float  # work lost since the last checkpoint, GPU-seconds


@dataclass(frozen=True, slots=True)
class DrainRecord:
    host: str
    start_s: float  # when the host became unhealthy
    ready_s: float | None  # when it was empty and reported ready for repair


@dataclass(slots=True)
class SimResult:
    policy: str
    cluster: ClusterSpec
    start_s: float
    end_s: float
    intervals: list[RunInterval]
    jobs: list[JobOutcome]
    preemptions: list[PreemptionRecord]
    drains: list[DrainRecord]
    # (time, healthy GPUs from then on), sorted by time, first entry at start_s
    capacity: list[tuple[float, int]]
    wall_s: float = 0.0
    cycles: int = 0  # engine cycles run
    skipped_cycles: int = 0  # instants with events where a cycle provably could not act
    events: int = 0  # arrivals, finishes, protection expiries and health changes applied
