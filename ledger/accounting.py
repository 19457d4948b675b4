"""Occupancy accounting, shared by the simulator and the live service (pure Python).

Run intervals -> hourly buckets, entitlement (capped hour by hour by demand) and
delivery per project.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class EndReason(StrEnum):
    COMPLETED = "completed"
    PREEMPTED = "preempted"
    DRAINED = "drained"
    HOST_DOWN = "host_down"
    RUNNING_AT_END = "running_at_end"


@dataclass(frozen=True, slots=True)
class RunInterval:
    """One run of a job: from a start to its stop. One row of INTERVALS.csv."""

    job_id: str
    project: str
    kind: str
    gpus: int
    hosts: tuple[str, ...]
    start_s: float
    end_s: float
    allocated: bool
    end_reason: EndReason
