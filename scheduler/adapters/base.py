"""The cluster adapter protocol: how a scheduling cycle talks to a real cluster.

The adapter is the truth about what runs (docs/architecture.md, the live cycle):

- `hosts()` lists the cluster's hosts with their GPUs and health as the cluster sees
  them (a host the cluster marks down or drained shows so in Allot).
- `jobs()` lists every job the cluster knows that carries an Allot attempt id and is
  running, starting, stopping, or ended recently (with how it ended), plus jobs
  without an Allot attempt id as `foreign` (reported, never touched).
- `start(request)` starts one attempt on exactly the hosts and GPU indices given, with
  the attempt id stamped on the cluster's job. It is adopt-before-retry: if a job with
  that attempt id already exists (an earlier call timed out after the cluster queued
  it), it returns that job instead of starting a second one. A start is never retried
  blindly by the caller: after an `AdapterError` the next cycle's reconcile finds the
  attempt in `jobs()` (adopt) or not (the attempt failed to start).
- `stop(attempt_id, grace_s)` asks for a graceful stop (signal, then kill after the
  grace period); idempotent; the GPUs are free only once `jobs()` reports the end.
- `set_host_health(host, health, reason)` drains a host in the cluster (or resumes it).
- `withdraw(attempt_id) -> bool` (optional): take back a start the cluster keeps
  waiting (the cycle's start timeout) so that it never runs; a job the cluster runs
  already is left running (False). Idempotent. The cycle stops (no grace) the starts
  of adapters without it.

Implementations: `scheduler.adapters.simulated` (a separate process reached over HTTP,
the default and what the demo and end-to-end tests use) and `scheduler.adapters.slurm`.
`scheduler.adapters.for_cluster(cluster)` returns the adapter of a `Cluster` row.

This module is plain Python (no Django), so adapters can be tested and benchmarked on
their own.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Protocol, runtime_checkable


def verifies_certificates(url: str) -> bool:
    """Whether an HTTP client for `url` should load a certificate store: not for plain
    HTTP, where there is nothing to verify and loading one costs ~30 ms of CPU per
    client (`httpx.get` makes a client per call)."""
    return not url.startswith("http://")


class AdapterError(Exception):
    """The cluster refused or failed a request. `retryable` when a later try may work
    (timeouts, the cluster controller restarting); the cycle records it and goes on."""

    def __init__(self, message: str, *, retryable: bool = True) -> None:
        super().__init__(message)
        self.retryable = retryable


class AdapterUnavailable(AdapterError):
    """The cluster could not be reached at all: the cycle records it and changes nothing."""


class HostHealthState(StrEnum):
    HEALTHY = "healthy"
    DRAINING = "draining"
    DOWN = "down"


class ClusterJobState(StrEnum):
    STARTING = "starting"  # accepted, not running yet (queued/held/configuring)
    RUNNING = "running"
    STOPPING = "stopping"  # a stop was sent; still holds its GPUs
    SUCCEEDED = "succeeded"  # ended: exit code 0
    FAILED = "failed"  # ended: non-zero exit, node failure, start failure
    STOPPED = "stopped"  # ended because Allot asked (stop)
    CANCELLED = "cancelled"  # ended because someone outside Allot cancelled it
    LOST = "lost"  # its host failed or it vanished


ENDED_STATES = frozenset(
    {
        ClusterJobState.SUCCEEDED,
        ClusterJobState.FAILED,
        ClusterJobState.STOPPED,
        ClusterJobState.CANCELLED,
        ClusterJobState.LOST,
    }
)


@dataclass(frozen=True, slots=True)
class ClusterPlacement:
    """GPUs on one host, as indices 0..gpus-1."""

    host: str
    gpu_indices: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class ClusterHost:
    name: str
    gpus: int
    health: HostHealthState = HostHealthState.HEALTHY
    reason: str = ""
    # the cluster's own word for a state in which it may keep new jobs waiting there
    # (Slurm: "IDLE+RESERVED", "MIXED+MAINT"); empty when it takes work as usual
    state: str = ""


@dataclass(frozen=True, slots=True)
class ClusterJob:
    """A job as the cluster reports it. `attempt_id` is empty for foreign jobs (not
    started by Allot). `placements` are the GPUs the cluster actually gave."""

    attempt_id: str
    state: ClusterJobState
    placements: tuple[ClusterPlacement, ...] = ()
    started_at: dt.datetime | None = None
    ended_at: dt.datetime | None = None
    detail: str = ""  # exit code, failure or cancellation reason, as the cluster says
    external_id: str = ""  # the cluster's own job id (Slurm job id, ...)

    @property
    def ended(self) -> bool:
        return self.state in ENDED_STATES


@dataclass(frozen=True, slots=True)
class StartRequest:
    """One attempt to start. `run_for_s` is how long a simulated cluster runs it (the
    job's duration hint minus saved progress); real clusters ignore it."""

    attempt_id: str
    job_name: str
    gpus: int
    placements: tuple[ClusterPlacement, ...]
    spec: Mapping[str, Any] = field(default_factory=dict)  # image, command, env
    run_for_s: float | None = None
    project: str = ""  # the project's path (Slurm maps it to an account)
    grace_s: float = 30.0
    kind: str = ""  # the job's kind (a simulated cluster picks its utilization profile by it)


@runtime_checkable
class ClusterAdapter(Protocol):
    """What a scheduling cycle needs from a cluster (see the module docstring)."""

    def hosts(self) -> Sequence[ClusterHost]: ...

    def jobs(self) -> Sequence[ClusterJob]: ...

    def start(self, request: StartRequest) -> ClusterJob: ...

    def stop(self, attempt_id: str, grace_s: float) -> None: ...

    def set_host_health(self, host: str, health: HostHealthState, reason: str) -> None: ...

    def close(self) -> None: ...
