"""The scheduling engine: pure Python, no Django, no clock, no I/O, deterministic.

`plan(snapshot, policy, now, state)` runs one scheduling cycle and returns a
`CyclePlan`; `state` is an `EngineState` the caller creates and owns (warm caches
across cycles; optional). `budget_tree` holds the budget arithmetic, project keys and
the tree file format; `fairshare` the Slurm Fair Tree order.

Modules, each deciding one thing: `cluster` (free GPUs, running work), `drain`,
`fairshare_cycle` (our pass), `placement`, `reservations`, `preemption`, `explain`
(reasons and the queue), `baselines` (fifo, priority, static), `cycle` (`plan`).
"""

from scheduler.core.engine.budget_tree import entitled_shares
from scheduler.core.engine.cycle import MODES, plan
from scheduler.core.engine.explain import project_standing
from scheduler.core.engine.fairshare import compute_fair_share, fair_tree
from scheduler.core.engine.state import EngineState
from scheduler.core.engine.types import (
    DAYS,
    HOURS,
    RULE_LABELS,
    STOP_RULES,
    BudgetNode,
    CyclePlan,
    ExplainedQueue,
    Host,
    HostReady,
    Placement,
    Policy,
    QueueBlock,
    QueueEntry,
    Reservation,
    RunningWorkload,
    Snapshot,
    Start,
    Stop,
    StopReason,
    Workload,
    rule_label,
    stop_rule,
)

__all__ = [
    "DAYS",
    "HOURS",
    "MODES",
    "RULE_LABELS",
    "STOP_RULES",
    "BudgetNode",
    "CyclePlan",
    "ExplainedQueue",
    "EngineState",
    "Host",
    "HostReady",
    "Placement",
    "Policy",
    "QueueBlock",
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
    "project_standing",
    "rule_label",
    "stop_rule",
]
