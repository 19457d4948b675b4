"""The scheduling engine: pure Python, no Django, no clock, no I/O, deterministic.

`plan(snapshot, policy, now)` runs one scheduling cycle and returns a `CyclePlan`.
`fairshare` holds the budget arithmetic (entitled shares, Slurm Fair Tree).
"""

from scheduler.engine.cycle import MODES, plan
from scheduler.engine.fairshare import compute_fair_share, entitled_shares, fair_tree
from scheduler.engine.types import (
    DAYS,
    HOURS,
    BudgetNode,
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

__all__ = [
    "DAYS",
    "HOURS",
    "MODES",
    "BudgetNode",
    "CyclePlan",
    "Host",
    "HostReady",
    "Placement",
    "Policy",
    "QueueEntry",
    "Reservation",
    "RunningWorkload",
    "Snapshot",
    "Start",
    "Stop",
    "StopReason",
    "Workload",
    "compute_fair_share",
    "entitled_shares",
    "fair_tree",
    "plan",
]
