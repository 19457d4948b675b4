"""A cluster held in the test process, speaking the `ClusterAdapter` protocol.

It keeps its own state (hosts, jobs by attempt id) apart from the scheduler's
database, on a clock the test moves, and refuses what a real cluster would refuse: a
start on GPUs that are busy or on an unknown or unhealthy host. It records every start
call so tests can prove that no attempt ran twice and no GPU was given twice.
Tests that need a separate process use the simulated cluster instead.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field

from scheduler.adapters import (
    AdapterError,
    AdapterUnavailable,
    ClusterHost,
    ClusterJob,
    ClusterJobState,
    ClusterPlacement,
    HostHealthState,
    StartRequest,
)

S = ClusterJobState


@dataclass
class _Job:
    attempt_id: str
    placements: tuple[ClusterPlacement, ...]
    run_for_s: float | None
    started_at: dt.datetime | None  # None: accepted, not running yet (STARTING)
    state: ClusterJobState = S.RUNNING
    ended_at: dt.datetime | None = None
    stop_at: dt.datetime | None = None
    detail: str = ""
    external_id: str = ""


@dataclass
class MemoryCluster:
    hosts_gpus: dict[str, int]
    now: dt.datetime
    # A stopped job exits after this many seconds (capped by the grace it was given).
    exit_after_s: float = 5.0
    kills_after_grace: bool = True  # False: only a stop with no grace left kills
    unreachable: bool = False
    fail_starts: bool = False  # start raises a retryable error after accepting nothing
    queue_starts: bool = False  # starts are accepted but wait (STARTING) and never run
    health: dict[str, tuple[HostHealthState, str]] = field(default_factory=dict)
    running: dict[str, _Job] = field(default_factory=dict)
    start_calls: list[str] = field(default_factory=list)
    stop_calls: list[tuple[str, float]] = field(default_factory=list)
    withdraw_calls: list[str] = field(default_factory=list)
    health_calls: list[tuple[str, str, str]] = field(default_factory=list)
    foreign: list[ClusterJob] = field(default_factory=list)
    _busy: dict | None = None  # GPUs held, kept between starts; None: recompute

    @classmethod
    def of(cls, hosts: int, gpus: int, now: dt.datetime) -> MemoryCluster:
        return cls({f"node{i:02d}": gpus for i in range(hosts)}, now)

    # -- the test's controls ----------------------------------------------------------

    def advance(self, seconds: float) -> dt.datetime:
        self.now += dt.timedelta(seconds=seconds)
        self._tick()
        return self.now

    def fail_host(self, name: str) -> None:
        self._busy = None
        self.health[name] = (HostHealthState.DOWN, "power supply failed")
        for job in self.running.values():
            if not _ended(job) and any(p.host == name for p in job.placements):
                job.state, job.ended_at, job.detail = S.LOST, self.now, f"host {name} failed"

    def recover_host(self, name: str) -> None:
        self.health.pop(name, None)

    def cancel_outside(self, attempt_id: str) -> None:
        """Someone cancels the job on the cluster itself (like `scancel`)."""
        job = self.running.get(attempt_id)
        if job is not None and not _ended(job):
            self._busy = None
            job.state, job.ended_at, job.detail = S.CANCELLED, self.now, "scancel by root"

    def busy_gpus(self) -> dict[tuple[str, int], str]:
        held = {
            (p.host, i): job.attempt_id
            for job in self.running.values()
            if job.ended_at is None
            for p in job.placements
            for i in p.gpu_indices
        }
        for cj in self.foreign:
            for p in cj.placements:
                for i in p.gpu_indices:
                    held[(p.host, i)] = cj.external_id
        return held

    # -- the protocol -----------------------------------------------------------------

    def _check(self) -> None:
        if self.unreachable:
            raise AdapterUnavailable("connection refused")

    def _tick(self) -> None:
        self._busy = None
        for job in self.running.values():
            if _ended(job):
                continue
            if job.stop_at is not None and job.stop_at <= self.now:
                job.state, job.ended_at = S.STOPPED, job.stop_at
            elif (
                job.run_for_s is not None
                and job.started_at is not None
                and job.started_at + dt.timedelta(seconds=job.run_for_s) <= self.now
            ):
                job.state = S.SUCCEEDED
                job.ended_at = job.started_at + dt.timedelta(seconds=job.run_for_s)

    def hosts(self) -> list[ClusterHost]:
        self._check()
        out = []
        for name, gpus in self.hosts_gpus.items():
            health, reason = self.health.get(name, (HostHealthState.HEALTHY, ""))
            out.append(ClusterHost(name=name, gpus=gpus, health=health, reason=reason))
        return out

    def jobs(self) -> list[ClusterJob]:
        self._check()
        self._tick()
        return [_report(j) for j in self.running.values()] + list(self.foreign)

    def start(self, request: StartRequest) -> ClusterJob:
        self._check()
        self.start_calls.append(request.attempt_id)
        known = self.running.get(request.attempt_id)
        if known is not None:  # adopt-before-retry
            return _report(known)
        if self.fail_starts:
            raise AdapterError("timed out talking to the controller")
        busy = self._busy
        if busy is None:
            busy = self._busy = self.busy_gpus()
        for p in request.placements:
            if p.host not in self.hosts_gpus:
                raise AdapterError(f"unknown host {p.host}", retryable=False)
            if self.health.get(p.host, (HostHealthState.HEALTHY,))[0] != HostHealthState.HEALTHY:
                raise AdapterError(f"host {p.host} takes no new work", retryable=False)
            for i in p.gpu_indices:
                if (p.host, i) in busy:
                    raise AdapterError(
                        f"GPU {p.host}:{i} is busy with {busy[(p.host, i)]}", retryable=False
                    )
        job = _Job(
            attempt_id=request.attempt_id,
            placements=tuple(
                ClusterPlacement(p.host, tuple(p.gpu_indices)) for p in request.placements
            ),
            run_for_s=request.run_for_s,
            started_at=None if self.queue_starts else self.now,
            state=S.STARTING if self.queue_starts else S.RUNNING,
            external_id=str(len(self.running) + 1000),
        )
        self.running[request.attempt_id] = job
        busy.update({(p.host, i): job.attempt_id for p in job.placements for i in p.gpu_indices})
        return _report(job)

    def stop(self, attempt_id: str, grace_s: float) -> None:
        self._check()
        self.stop_calls.append((attempt_id, grace_s))
        job = self.running.get(attempt_id)
        if job is None or _ended(job):
            return
        delay = self.exit_after_s
        if grace_s <= 0:
            delay = 0.0
        elif self.kills_after_grace:
            delay = min(grace_s, delay)
        at = self.now + dt.timedelta(seconds=delay)
        if job.stop_at is None or at < job.stop_at:
            job.stop_at = at
        job.state = S.STOPPING

    def run_queued(self, attempt_id: str) -> None:
        """The cluster runs a start it kept waiting (`queue_starts`)."""
        job = self.running[attempt_id]
        job.state, job.started_at = S.RUNNING, self.now

    def withdraw(self, attempt_id: str) -> bool:
        """Take back a waiting start (it ends stopped, never run); a running one stays."""
        self._check()
        self.withdraw_calls.append(attempt_id)
        job = self.running.get(attempt_id)
        if job is None or _ended(job):
            return True
        if job.started_at is not None:
            return False
        self._busy = None
        job.state, job.ended_at, job.detail = S.STOPPED, self.now, "withdrawn while waiting"
        return True

    def set_host_health(self, host: str, health: HostHealthState, reason: str) -> None:
        self._check()
        self.health_calls.append((host, str(health), reason))
        self.health[host] = (health, reason if health != HostHealthState.HEALTHY else "")

    def close(self) -> None:
        pass


def _ended(job: _Job) -> bool:
    return job.state in (S.SUCCEEDED, S.FAILED, S.STOPPED, S.CANCELLED, S.LOST)


def _report(job: _Job) -> ClusterJob:
    return ClusterJob(
        attempt_id=job.attempt_id,
        state=job.state,
        placements=job.placements,
        started_at=job.started_at,
        ended_at=job.ended_at,
        detail=job.detail,
        external_id=job.external_id,
    )
