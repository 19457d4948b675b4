"""One scheduling cycle of a cluster: reconcile with the adapter, plan, apply.

`cycle_run(cluster_id=)` runs under a PostgreSQL advisory lock per cluster (a second
concurrent cycle of the same cluster returns None at once) and writes a `CycleRecord`.

1. Read the cluster through its adapter (`hosts()`, `jobs()`). If it cannot be reached
   the cycle records the error and changes nothing.
2. Reconcile (one transaction): hosts mirrored into `Host` rows (with `HostEvent`s);
   open attempts brought in line with what the cluster reports: confirmed starts
   become RUNNING, ended runs ENDED with their end reason and the job's next state,
   STARTING attempts the cluster never got fail back to PENDING, running attempts it
   no longer knows are lost. Then, after commit, stops are resent for every STOPPING
   attempt (with no grace left once its deadline passed) and Allot's drains are pushed.
3. Snapshot (`scheduler.selectors.snapshot`) and `plan()`.
4. Apply (one transaction, then the adapter): stops first (attempt STOPPING with its
   intent and deadline, a job event naming the preempting job, its project and the
   rule), then starts (the Attempt is committed STARTING *before* `adapter.start`, so
   a crash leaves a record that the next reconcile heals: adopted if the cluster has
   it, else failed and requeued; never started twice). A start that needs GPUs of a
   job being stopped waits: GPUs are free only when the cluster reports the end.
   Hosts the engine reports empty and unhealthy get `ready_for_repair_at`.
5. The explained queue is stored in the cluster's `QueueSnapshot`.

Crash safety: every database step commits before the adapter call that depends on
it, and every adapter call is repeated or checked by the next reconcile.
"""

from __future__ import annotations

import datetime as dt
import gc
import json
import logging
import secrets
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from itertools import repeat

from django.conf import settings
from django.db import connection, transaction
from django.db.models import Exists, F, OuterRef, Subquery
from django.db.models.expressions import RawSQL
from django.utils import timezone

from config.logs import cycle_scope
from ops.metrics import observe_cycle
from scheduler import adapters
from scheduler.adapters import (
    ClusterAdapter,
    ClusterHost,
    ClusterJob,
    ClusterJobState,
    HostHealthState,
    StartRequest,
)
from scheduler.core.engine import CyclePlan, EngineState, Placement, QueueBlock, StopReason, plan
from scheduler.models import (
    Attempt,
    AttemptEnd,
    AttemptState,
    Cluster,
    CycleRecord,
    Host,
    HostEvent,
    HostHealth,
    Job,
    JobEvent,
    JobState,
    QueueSnapshot,
)
from scheduler.selectors.snapshot import (
    OPEN_ATTEMPT_STATES,
    ClusterSnapshot,
    SnapshotCache,
    cluster_snapshot,
    fetch_rows,
    foreign_holder,
    placements_from_json,
    placements_to_json,
    saved_work_s,
)
from scheduler.services.transitions import is_legal, job_transition

log = logging.getLogger(__name__)

# First key of pg_try_advisory_lock(int, int); the second is the cluster id.
CYCLE_LOCK_KEY = 0x416C6F74  # "Alot"
# Drains Allot pushes to the cluster carry this reason prefix, so that a drain the
# cluster reports is told apart from one made on the cluster itself (which is mirrored).
ALLOT_REASON_PREFIX = "allot: "
# The engine's stop reasons as the rule a job event names.
STOP_RULES: dict[str, str] = {
    StopReason.FAIR_SHARE: "fair_share",
    StopReason.UNALLOCATED: "unallocated_work",
    StopReason.PRIORITY: "project_priority",
    StopReason.DRAIN: "host_drain",
    StopReason.HOST_DOWN: "host_down",
}
STOP_RESEND_S = 30.0
# `QueueSnapshot.entries` holds each column as comma-separated text (position = index
# + 1) and "reasons", the distinct reason texts that the "reason" column indexes.
QUEUE_COLUMNS = ("job", "project", "project_position", "project_rank", "metric", "reason")
_START_REFUSED = "start refused: "
_START_ERROR = "start error: "


_LOCAL = threading.local()  # the clusters whose cycle this thread is running


def start_confirm_s() -> float:
    """How long a STARTING attempt the cluster does not list may still show up there
    (a start in flight when a worker died) before it counts as failed."""
    return float(getattr(settings, "ALLOT_START_CONFIRM_S", 15.0))


@contextmanager
def cluster_cycle_lock(cluster_id: int) -> Iterator[bool]:
    """A session-level PostgreSQL advisory lock on the cluster's cycle; yields whether
    it was taken (never waits). A worker that dies loses its connection and the lock."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_try_advisory_lock(%s, %s)", [CYCLE_LOCK_KEY, cluster_id])
        taken = bool(cursor.fetchone()[0])
    try:
        yield taken
    finally:
        if taken:
            try:
                with connection.cursor() as cursor:
                    cursor.execute(
                        "SELECT pg_advisory_unlock(%s, %s)", [CYCLE_LOCK_KEY, cluster_id]
                    )
            except Exception:  # the connection is gone: so is the lock
                log.warning("could not release the cycle lock of cluster %s", cluster_id)


def cycle_run(
    *,
    cluster_id: int,
    now: dt.datetime | None = None,
    adapter: ClusterAdapter | None = None,
    reconcile_only: bool = False,
) -> CycleRecord | None:
    """Run one scheduling cycle of a cluster (see the module docstring).

    Returns its `CycleRecord`, or None when another cycle of the cluster is running.
    `now` fixes the cycle's clock (tests); `adapter` replaces the cluster's own;
    `reconcile_only` stops after step 2 (the reconcile after a restore,
    scheduler.services.restore: nothing is planned, started or stopped)."""
    running = _LOCAL.__dict__.setdefault("clusters", set())
    if cluster_id in running:
        # A cycle asked for from inside a cycle of the same thread (Celery eager mode, a
        # budget change applied by the snapshot): advisory locks are re-entrant for the
        # session, so only this guard keeps it from running nested.
        return None
    running.add(cluster_id)
    try:
        with cluster_cycle_lock(cluster_id) as taken:
            if not taken:
                return None
            cluster = Cluster.objects.get(pk=cluster_id)
            return _CycleRun(cluster, now, adapter, reconcile_only=reconcile_only).run()
    finally:
        running.discard(cluster_id)


# ------------------------------------------------------------------ warm engine state


@dataclass
class _Warm:
    """What a worker keeps per cluster between cycles: the engine objects it can reuse
    while nothing they depend on changed (dropped after an error)."""

    hosts: tuple = ()
    engine: EngineState = field(default_factory=EngineState)
    engine_key: tuple | None = None
    # attempt id -> (when this worker last sent its stop, whether with no grace left):
    # a stop is resent when this worker has not sent it yet (a crash may have lost
    # it), once its grace is over (forced), and every STOP_RESEND_S.
    stops_sent: dict[str, tuple[dt.datetime, bool]] = field(default_factory=dict)
    queue_json: str = ""  # the queue entries this worker stored last
    snapshot_cache: SnapshotCache = field(default_factory=SnapshotCache)


_WARM: dict[int, _Warm] = {}


def engine_state_reset(cluster_id: int | None = None) -> None:
    """Drop the warm engine state of one cluster (or all): the next plan is cold."""
    if cluster_id is None:
        _WARM.clear()
    else:
        _WARM.pop(cluster_id, None)


def _plan(cs: ClusterSnapshot, warm: _Warm) -> CyclePlan:
    """plan() with the worker's warm `EngineState` of the cluster, reset whenever the
    tree version, the hosts or the policy changed (its caches would only hold objects
    that no longer come back). The hosts tuple is reused while unchanged, so the
    engine's layout cache hits (the snapshot cache keeps the tree and running work)."""
    snap = cs.snapshot
    if warm.hosts != snap.hosts:
        warm.hosts = tuple(snap.hosts)
    key = (cs.tree_version, warm.hosts, cs.policy)
    if warm.engine_key != key:
        warm.engine.reset()
        warm.engine_key = key
    return plan(replace(snap, hosts=warm.hosts), cs.policy, cs.now, state=warm.engine)


# ------------------------------------------------------------------ the cycle


@dataclass
class _ClusterReport:
    hosts: Sequence[ClusterHost]
    jobs: Sequence[ClusterJob]


@dataclass
class _Counts:
    reconciled: int = 0
    starts: int = 0
    stops: int = 0
    errors: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    # (action, rule) of every start and stop, for the operators' metrics
    actions: list[tuple[str, str]] = field(default_factory=list)


class _CycleRun:
    def __init__(
        self,
        cluster: Cluster,
        now: dt.datetime | None,
        adapter: ClusterAdapter | None,
        *,
        reconcile_only: bool = False,
    ) -> None:
        self.cluster = cluster
        self.reconcile_only = reconcile_only
        self.at = now or timezone.now()
        self.fixed_clock = now is not None
        # when the cluster was read: times it reports are kept at or before it
        self.read_at = self.at
        self.adapter = adapter
        self.own_adapter = adapter is None
        self.counts = _Counts()
        self.record: CycleRecord | None = None
        self.warm = _WARM.setdefault(cluster.pk, _Warm())
        self.phases: dict[str, float] = {}  # milliseconds per phase of the cycle

    @contextmanager
    def _phase(self, name: str) -> Iterator[None]:
        t = time.perf_counter()
        try:
            yield
        finally:
            self.phases[name] = self.phases.get(name, 0.0) + (time.perf_counter() - t) * 1000.0

    def run(self) -> CycleRecord:
        # A cycle allocates tens of thousands of short-lived objects; the cyclic collector
        # would only add pauses over the worker's large warm state (the engine leaves the
        # collector alone; its caller decides: bench/live_cycle 148 ms CPU with it off,
        # 163-201 ms with it on).
        gc_was_on = gc.isenabled()
        gc.disable()
        try:
            with cycle_scope(self):  # log lines of the cycle carry its id (config.logs)
                return self._run()
        finally:
            if gc_was_on:
                gc.enable()

    def __str__(self) -> str:
        """The cycle's id in log lines: its record's, once stored."""
        return str(self.record.pk) if self.record is not None else ""

    def _run(self) -> CycleRecord:
        t0 = time.perf_counter()
        self.record = CycleRecord.objects.create(cluster=self.cluster, started_at=self.at)
        try:
            with self._phase("read"):
                report = self._read_cluster()
            if report is not None:
                with self._phase("reconcile"):
                    holders = self._reconcile(report)
            if report is not None and not self.reconcile_only:
                with self._phase("snapshot"):
                    cs = cluster_snapshot(
                        cluster=self.cluster,
                        now=self.at,
                        holders=holders,
                        cache=self.warm.snapshot_cache,
                    )
                with self._phase("plan"):
                    cycle_plan = _plan(cs, self.warm)
                self._apply(cs, cycle_plan)
        except Exception as exc:
            engine_state_reset(self.cluster.pk)
            self.counts.errors.append(f"cycle failed: {type(exc).__name__}: {exc}"[:1000])
            self._finish(t0)
            raise
        finally:
            if self.own_adapter and self.adapter is not None:
                try:
                    self.adapter.close()
                except Exception:
                    log.warning("closing the adapter of %s failed", self.cluster, exc_info=True)
        self._finish(t0)
        return self.record

    def _finish(self, t0: float) -> None:
        record, counts = self.record, self.counts
        record.duration_ms = (time.perf_counter() - t0) * 1000.0
        record.reconciled = counts.reconciled
        record.starts = counts.starts
        record.stops = counts.stops
        record.errors = counts.errors + counts.notes
        record.save()
        observe_cycle(
            cluster=self.cluster.name,
            duration_s=record.duration_ms / 1000.0,
            actions=counts.actions,
        )
        # not stored: for the worker's log and the benchmarks
        record.phases_ms = {k: round(v, 1) for k, v in self.phases.items()}
        log.info(
            "cycle %s of %s: %d starts, %d stops, %d errors in %.0f ms %s",
            record.pk,
            self.cluster,
            record.starts,
            record.stops,
            len(counts.errors),
            record.duration_ms,
            record.phases_ms,
        )

    def _error(self, what: str, exc: BaseException) -> None:
        text = f"{what}: {exc}" if str(exc) else f"{what}: {type(exc).__name__}"
        log.warning("cluster %s: %s", self.cluster, text)
        self.counts.errors.append(text[:1000])

    def _read_cluster(self) -> _ClusterReport | None:
        """Hosts and jobs as the cluster reports them; None (error recorded) when it
        cannot be read: the cycle then changes nothing."""
        try:
            if self.adapter is None:
                self.adapter = adapters.for_cluster(self.cluster)
            # jobs first: a node that fails between the two reads then shows down in
            # the host read as well, so a job it lost is never restarted on it
            jobs = list(self.adapter.jobs())
            report = _ClusterReport(hosts=list(self.adapter.hosts()), jobs=jobs)
        except Exception as exc:
            self._error("cluster unreachable", exc)
            return None
        if not self.fixed_clock:
            self.read_at = timezone.now()
        return report

    # -------------------------------------------------------------- reconcile

    def _reconcile(self, report: _ClusterReport) -> list:
        """Bring hosts and open attempts in line with the cluster (one transaction),
        then resend stops and push drains. Returns the extra GPU holders (jobs outside
        Allot, attempts Allot ended that still run) for the snapshot."""
        with transaction.atomic():
            pushes = self._reconcile_hosts(report.hosts)
            stopping, open_ids = self._reconcile_attempts(report.jobs)
            holders, zombies = self._outside_jobs(report.jobs, open_ids)
        for name, health, reason in pushes:
            try:
                self.adapter.set_host_health(name, health, reason)
            except Exception as exc:
                self._error(f"set_host_health({name}, {health})", exc)
        sent = self.warm.stops_sent
        for attempt_id in set(sent) - {a for a, _ in stopping}:
            del sent[attempt_id]
        for attempt_id, grace_s in stopping:
            last = sent.get(attempt_id)
            if (
                last is None
                or (grace_s <= 0 and not last[1])
                or (self.at - last[0]).total_seconds() >= STOP_RESEND_S
            ):
                self._send_stop(attempt_id, grace_s)
        for attempt_id, grace_s in zombies:
            self._send_stop(attempt_id, grace_s)
        return holders

    def _send_stop(self, attempt_id: str, grace_s: float) -> None:
        try:
            self.adapter.stop(attempt_id, grace_s)
        except Exception as exc:
            self._error(f"stop {attempt_id}", exc)
        else:
            self.warm.stops_sent[attempt_id] = (self.at, grace_s <= 0)

    def _host_event(self, host: Host, to: str, reason: str) -> None:
        HostEvent.objects.create(
            host=host,
            at=self.at,
            from_health=host.health,
            to_health=to,
            reason=reason[:500],
            actor_name="cluster",
        )
        host.health = to
        host.health_reason = reason[:500]
        host.health_changed_at = self.at
        if to == HostHealth.HEALTHY:
            host.ready_for_repair_at = None

    def _reconcile_hosts(
        self, reported: Sequence[ClusterHost]
    ) -> list[tuple[str, HostHealthState, str]]:
        """Mirror the cluster's hosts; returns the drains/resumes to push to it."""
        rows = {h.name: h for h in Host.objects.select_for_update().filter(cluster=self.cluster)}
        pushes: list[tuple[str, HostHealthState, str]] = []
        seen = set()
        for ch in reported:
            seen.add(ch.name)
            host = rows.get(ch.name)
            if host is None:
                Host.objects.create(
                    cluster=self.cluster,
                    name=ch.name,
                    gpus=ch.gpus,
                    health=str(ch.health),
                    health_reason=ch.reason[:500],
                    health_changed_at=self.at,
                )
                continue
            before = (host.health, host.gpus, host.ready_for_repair_at)
            push = self._host_change(host, ch)
            if push is not None:
                pushes.append(push)
            if ch.gpus != host.gpus:
                host.gpus = ch.gpus
            if host.health == HostHealth.HEALTHY:
                host.ready_for_repair_at = None
            if (host.health, host.gpus, host.ready_for_repair_at) != before:
                host.save()
        for name, host in rows.items():
            if name not in seen and host.health != HostHealth.DOWN:
                self._host_event(host, HostHealth.DOWN, "no longer reported by the cluster")
                host.save()
        return pushes

    def _host_change(self, host: Host, ch: ClusterHost) -> tuple[str, HostHealthState, str] | None:
        """Apply the cluster's view of one host; a push when Allot's view must win."""
        theirs, ours = str(ch.health), host.health
        if theirs == ours:
            return None
        ours_allot = ch.reason.startswith(ALLOT_REASON_PREFIX)
        if theirs == HostHealth.DOWN or ours == HostHealth.DOWN:
            what = "reported down by the cluster" if theirs == HostHealth.DOWN else "back up"
            self._host_event(host, theirs, f"{what}{': ' + ch.reason if ch.reason else ''}")
            return None
        if ours == HostHealth.DRAINING:  # an Allot drain the cluster has not applied yet
            reason = ALLOT_REASON_PREFIX + (host.health_reason or "drained in Allot")
            return (host.name, HostHealthState.DRAINING, reason)
        if ours_allot:  # healthy in Allot, still drained by Allot on the cluster
            return (host.name, HostHealthState.HEALTHY, ALLOT_REASON_PREFIX + "drain ended")
        self._host_event(host, theirs, f"drained on the cluster: {ch.reason or 'no reason'}")
        return None

    def _reconcile_attempts(
        self, reported: Sequence[ClusterJob]
    ) -> tuple[list[tuple[str, float]], set[str]]:
        """Apply what the cluster reports to every open attempt. Open attempts are read
        without locks first; only those the report changes are locked and updated.
        Returns the stops to (re)send as (attempt id, grace seconds left) and the ids
        of the attempts open before the reconcile."""
        by_id = {cj.attempt_id: cj for cj in reported if cj.attempt_id}
        rows = Attempt.objects.filter(cluster=self.cluster, state__in=OPEN_ATTEMPT_STATES)
        todo: list[int] = []
        stopping: list[tuple[str, dt.datetime | None]] = []
        open_ids: set[str] = set()
        for pk, attempt_id, state, external_id, started_at, deadline in fetch_rows(
            rows.values_list(
                "pk", "attempt_id", "state", "external_id", "started_at", "stop_deadline"
            )
        ):
            open_ids.add(attempt_id)
            if _needs_reconcile(state, external_id, started_at, by_id.get(attempt_id)):
                todo.append(pk)
            elif state == AttemptState.STOPPING:
                stopping.append((attempt_id, deadline))
        if todo:
            attempts = (
                Attempt.objects.select_for_update(of=("self", "job"))
                .select_related("job")
                .filter(pk__in=todo, state__in=OPEN_ATTEMPT_STATES)
                .order_by("pk")
            )
            for attempt in attempts:
                self.counts.reconciled += self._reconcile_one(
                    attempt, by_id.get(attempt.attempt_id)
                )
                if attempt.state == AttemptState.STOPPING:
                    stopping.append((attempt.attempt_id, attempt.stop_deadline))
        stops = []
        for attempt_id, deadline in stopping:
            left = (deadline - self.at).total_seconds() if deadline else self.cluster.grace_s
            stops.append((attempt_id, max(0.0, left)))
        return stops, open_ids

    def _reconcile_one(self, attempt: Attempt, cj: ClusterJob | None) -> bool:
        """One open attempt against the cluster's report of it; True when changed."""
        if cj is None:
            if attempt.state == AttemptState.STARTING:
                if not self._start_failed(attempt):
                    return False
                detail = attempt.end_detail or "the cluster has no record of the start"
                self._end(attempt, AttemptEnd.START_FAILED, detail)
            elif attempt.state == AttemptState.STOPPING:
                if attempt.started_at is None and not self._start_failed(attempt):
                    return False  # stopped while its start may still reach the cluster
                detail = (
                    "gone from the cluster"
                    if attempt.started_at
                    else "stopped before the cluster started it"
                )
                self._end(attempt, attempt.stop_intent or AttemptEnd.LOST, detail)
            else:
                self._end(attempt, AttemptEnd.LOST, "the cluster no longer reports it")
            return True
        if cj.ended:
            self._end(attempt, _end_reason(attempt, cj), cj.detail, cj=cj)
            return True
        if cj.external_id and attempt.external_id != cj.external_id:
            attempt.external_id = cj.external_id
            attempt.save(update_fields=["external_id"])
        if cj.state == ClusterJobState.STARTING or (
            cj.state == ClusterJobState.STOPPING and cj.started_at is None
        ):
            # not running yet; stopping without a start: stopped while the cluster was
            # still starting it, so it never ran (it ends without a start; the cycle's
            # time stands in for a start only for a job the cluster runs)
            return False
        if attempt.state == AttemptState.STARTING:
            self._confirm_running(attempt, cj)
            return True
        if attempt.started_at is None:  # stopped before Allot saw it run
            attempt.started_at = self._clamp(cj.started_at, attempt.created_at)
            attempt.save(update_fields=["started_at"])
        return False

    def _start_failed(self, attempt: Attempt) -> bool:
        if attempt.end_detail.startswith(_START_REFUSED):
            return True
        return (self.at - attempt.created_at).total_seconds() >= start_confirm_s()

    def _clamp(self, when: dt.datetime | None, floor: dt.datetime) -> dt.datetime:
        """A time the cluster reported, kept inside [floor, when it was read] (clocks
        may differ); None (not reported) is the cycle's time."""
        if when is None:
            return max(self.at, floor)
        return min(max(when, floor), max(self.read_at, floor))

    def _confirm_running(self, attempt: Attempt, cj: ClusterJob) -> None:
        """The cluster runs a STARTING attempt: RUNNING, with the GPUs it really gave."""
        attempt.state = AttemptState.RUNNING
        attempt.started_at = self._clamp(cj.started_at, attempt.created_at)
        if cj.placements:
            attempt.placements = placements_to_json(cj.placements)
        if cj.external_id:
            attempt.external_id = cj.external_id
        attempt.save(update_fields=["state", "started_at", "placements", "external_id"])
        job = attempt.job
        if job.state == JobState.STARTING:
            hosts = ", ".join(
                f"{p['host']} GPUs {','.join(map(str, p['gpu_indices']))}"
                for p in attempt.placements
            )
            job_transition(
                job=job,
                to_state=JobState.RUNNING,
                reason=f"running on {hosts} (attempt {attempt.number})",
                reason_code="started",
                at=attempt.started_at,
                attempt=attempt,
                cycle=self.record,
            )

    def _end(
        self,
        attempt: Attempt,
        reason: str,
        detail: str,
        *,
        cj: ClusterJob | None = None,
    ) -> None:
        """Close an attempt (its GPUs are free) and move its job on. A run the cluster
        never reported started keeps no start time (the ledger charges nothing)."""
        if cj is not None and attempt.started_at is None and cj.started_at is not None:
            attempt.started_at = self._clamp(cj.started_at, attempt.created_at)
        floor = attempt.started_at or attempt.created_at
        attempt.ended_at = self._clamp(cj.ended_at if cj else None, floor)
        attempt.state = AttemptState.ENDED
        attempt.end_reason = reason
        attempt.end_detail = (detail or "")[:1000]
        attempt.save()
        _move_job(attempt, reason, self.record, self.at, self.cluster)

    def _outside_jobs(
        self, reported: Sequence[ClusterJob], open_ids: set[str]
    ) -> tuple[list, list[tuple[str, float]]]:
        """Jobs the cluster runs that Allot has no open attempt for: jobs outside Allot
        (left alone, noted) and attempts Allot already ended (stopped again). Both hold
        their GPUs for the engine."""
        alive = [cj for cj in reported if not cj.ended and cj.attempt_id not in open_ids]
        if not alive:
            return [], []
        ours = set(
            Attempt.objects.filter(
                attempt_id__in=[cj.attempt_id for cj in alive if cj.attempt_id]
            ).values_list("attempt_id", flat=True)
        )
        from scheduler.selectors.snapshot import policy_for_cluster

        policy = policy_for_cluster(self.cluster)
        now = self.at.timestamp()
        holders, zombies = [], []
        for n, cj in enumerate(alive):
            pls = tuple(Placement(p.host, tuple(p.gpu_indices)) for p in cj.placements)
            gpus = sum(len(p.gpu_indices) for p in pls)
            name = cj.attempt_id or cj.external_id or f"#{n}"
            where = ", ".join(p.host for p in pls) or "no hosts yet"
            if cj.attempt_id in ours:
                zombies.append((cj.attempt_id, 0.0))
                self._error("attempt ended in Allot still runs on the cluster", Exception(name))
            else:
                self.counts.notes.append(f"job outside Allot: {name} on {where} (left alone)")
            if pls:
                holders.append(foreign_holder(f"~{name}", gpus, pls, now=now, policy=policy))
        return holders, zombies

    # -------------------------------------------------------------- apply

    def _apply(self, cs: ClusterSnapshot, cycle_plan: CyclePlan) -> None:
        """Write the plan (one transaction), then tell the cluster."""
        stops = [
            s
            for s in cycle_plan.stops
            if s.workload_id in cs.attempt_ids and s.workload_id not in cs.stopping
        ]
        busy = _gpus_of(cs, {s.workload_id for s in stops})
        starts = [s for s in cycle_plan.starts if not _overlaps(s.placements, busy)]
        deferred = {
            s.workload_id: tuple(v.workload_id for v in stops if v.for_workload_id == s.workload_id)
            for s in cycle_plan.starts
            if _overlaps(s.placements, busy)
        }
        with self._phase("write"), transaction.atomic():
            stopped = self._write_stops(cs, stops)
            started = self._write_starts(cs, starts)
            self._write_ready(cs, cycle_plan)
        with self._phase("tell"):
            for attempt in stopped:
                self._send_stop(attempt.attempt_id, float(self.cluster.grace_s))
            self._send_starts(started, cs)
        with self._phase("queue"):
            self._write_queue(cs, cycle_plan, deferred)
        record = self.record
        record.pending = sum(map(len, cs.snapshot.pending.values())) + len(cs.waiting)
        record.running = len(cs.attempt_ids)
        record.reservations = len(cycle_plan.reservations)

    def _write_stops(self, cs: ClusterSnapshot, stops) -> list[Attempt]:
        if not stops:
            return []
        attempts = (
            Attempt.objects.select_for_update(of=("self", "job"))
            .select_related("job")
            .in_bulk([cs.attempt_ids[s.workload_id] for s in stops])
        )
        preemptors = Job.objects.in_bulk(
            [cs.job_id(s.for_workload_id) for s in stops if s.for_workload_id]
        )
        grace = dt.timedelta(seconds=self.cluster.grace_s)
        done = []
        for stop in stops:
            attempt = attempts.get(cs.attempt_ids[stop.workload_id])
            if attempt is None or attempt.state not in (
                AttemptState.STARTING,
                AttemptState.RUNNING,
            ):
                continue  # cancelled or ended since the snapshot
            drain = stop.reason_code in (StopReason.DRAIN, StopReason.HOST_DOWN)
            by = preemptors.get(cs.job_id(stop.for_workload_id)) if stop.for_workload_id else None
            attempt.state = AttemptState.STOPPING
            attempt.stop_intent = AttemptEnd.DRAINED if drain else AttemptEnd.PREEMPTED
            attempt.stop_requested_at = self.at
            attempt.stop_deadline = self.at + grace
            attempt.preempted_by = by
            attempt.save(
                update_fields=[
                    "state",
                    "stop_intent",
                    "stop_requested_at",
                    "stop_deadline",
                    "preempted_by",
                ]
            )
            job_transition(
                job=attempt.job,
                to_state=JobState.STOPPING,
                reason=stop.reason,
                reason_code=str(stop.reason_code),
                at=self.at,
                attempt=attempt,
                cycle=self.record,
                preempting_job=by,
                rule=STOP_RULES.get(stop.reason_code, str(stop.reason_code)),
            )
            done.append(attempt)
            self.counts.actions.append(
                ("stop", STOP_RULES.get(stop.reason_code, str(stop.reason_code)))
            )
        self.counts.stops += len(done)
        return done

    def _write_starts(self, cs: ClusterSnapshot, starts) -> list[tuple[Attempt, object]]:
        """Attempts STARTING, committed before any adapter call."""
        if not starts:
            return []
        jobs = (
            Job.objects.select_for_update()
            .filter(pk__in=[cs.job_id(s.workload_id) for s in starts], state=JobState.PENDING)
            .in_bulk()
        )
        chosen = [
            (s, jobs[cs.job_id(s.workload_id)]) for s in starts if cs.job_id(s.workload_id) in jobs
        ]
        if not chosen:
            return []
        Job.objects.filter(pk__in=[j.pk for _, j in chosen]).update(
            attempt_count=F("attempt_count") + 1
        )
        attempts = []
        for start, job in chosen:
            job.attempt_count += 1
            attempts.append(
                Attempt(
                    job=job,
                    number=job.attempt_count,
                    attempt_id=f"allot-{job.pk}-{job.attempt_count}-{secrets.token_hex(3)}",
                    cluster=self.cluster,
                    project_id=job.project_id,
                    gpus=job.gpus,
                    placements=placements_to_json(start.placements),
                    allocated=start.allocated,
                    state=AttemptState.STARTING,
                    created_at=self.at,
                    started_by_cycle=self.record,
                )
            )
        Attempt.objects.bulk_create(attempts)
        for (start, job), attempt in zip(chosen, attempts, strict=True):
            job_transition(
                job=job,
                to_state=JobState.STARTING,
                reason=start.reason,
                reason_code="scheduled",
                at=self.at,
                attempt=attempt,
                cycle=self.record,
            )
        self.counts.starts += len(attempts)
        self.counts.actions += [
            ("start", "allocated" if a.allocated else "unallocated") for a in attempts
        ]
        return [(a, job) for a, (_, job) in zip(attempts, chosen, strict=True)]

    def _write_ready(self, cs: ClusterSnapshot, cycle_plan: CyclePlan) -> None:
        """Unhealthy hosts the engine reports empty, unless a job still holds GPUs
        there (the engine counts this cycle's stops as gone; the cluster does not yet)."""
        held = {p.host for rw in cs.snapshot.running for p in rw.placements}
        names = [r.host for r in cycle_plan.hosts_ready if r.host not in held]
        if names:
            Host.objects.filter(
                cluster=self.cluster, name__in=names, ready_for_repair_at__isnull=True
            ).exclude(health=HostHealth.HEALTHY).update(ready_for_repair_at=self.at)

    def _send_starts(self, started: list[tuple[Attempt, Job]], cs: ClusterSnapshot) -> None:
        """adapter.start for each new attempt; confirmations and errors recorded after."""
        paths = {v: k for k, v in cs.node_ids.items()}
        outcomes: list[tuple[Attempt, ClusterJob | None, str]] = []
        for attempt, job in started:
            request = StartRequest(
                attempt_id=attempt.attempt_id,
                job_name=job.name,
                gpus=attempt.gpus,
                placements=tuple(placements_from_json(attempt.placements)),
                spec=job.spec,
                run_for_s=max(0.0, job.duration_s - job.progress_s) if job.duration_s else None,
                project=paths.get(job.project_id, ""),
                grace_s=float(self.cluster.grace_s),
            )
            try:
                outcomes.append((attempt, self.adapter.start(request), ""))
            except adapters.AdapterError as exc:
                prefix = _START_ERROR if exc.retryable else _START_REFUSED
                outcomes.append((attempt, None, prefix + str(exc)))
                self._error(f"start {attempt.attempt_id}", exc)
            except Exception as exc:
                outcomes.append((attempt, None, _START_ERROR + str(exc)))
                self._error(f"start {attempt.attempt_id}", exc)
        todo = [o for o in outcomes if o[2] or (o[1] is not None and _runs(o[1]))]
        if not todo:
            return
        if not self.fixed_clock:
            self.read_at = timezone.now()  # the answers came after the first read
        with transaction.atomic():
            fresh = (
                Attempt.objects.select_for_update(of=("self", "job"))
                .select_related("job")
                .in_bulk([a.pk for a, _, _ in todo])
            )
            for attempt, cj, error in todo:
                row = fresh[attempt.pk]
                if row.state != AttemptState.STARTING:
                    continue  # a stop (cancel) came in meanwhile: reconcile takes it on
                if error:
                    row.end_detail = error[:1000]
                    row.save(update_fields=["end_detail"])
                else:
                    self._confirm_running(row, cj)

    def _write_queue(
        self, cs: ClusterSnapshot, cycle_plan: CyclePlan, deferred: Mapping[str, tuple[str, ...]]
    ) -> None:
        """Store the explained queue; the entries are rewritten only when they changed
        since this worker's last write (10,000 entries are megabytes of JSON)."""
        columns = queue_columns(cs, cycle_plan, deferred, grace_s=self.cluster.grace_s)
        text = json.dumps(columns, separators=(",", ":"))
        order = [[cs.node_id(p), round(f, 6)] for p, f in cycle_plan.project_order if cs.node_id(p)]
        fields = {"cycle": self.record, "computed_at": self.at, "project_order": order}
        if text != self.warm.queue_json:
            fields["entries"] = RawSQL("%s::jsonb", [text])
        if not QueueSnapshot.objects.filter(cluster=self.cluster).update(**fields):
            QueueSnapshot.objects.create(cluster=self.cluster, **{**fields, "entries": columns})
        self.warm.queue_json = text


def _needs_reconcile(
    state: str, external_id: str, started_at: dt.datetime | None, cj: ClusterJob | None
) -> bool:
    """Whether the cluster's report changes an open attempt (see `_reconcile_one`)."""
    if cj is None or cj.ended:
        return True
    if cj.external_id and cj.external_id != external_id:
        return True
    if cj.state == ClusterJobState.STARTING:
        return False
    return state == AttemptState.STARTING or started_at is None


def _runs(cj: ClusterJob) -> bool:
    return cj.state in (ClusterJobState.RUNNING, ClusterJobState.STOPPING)


def _gpus_of(cs: ClusterSnapshot, workload_ids: set[str]) -> set[tuple[str, int]]:
    if not workload_ids:
        return set()
    return {
        (p.host, i)
        for rw in cs.snapshot.running
        if rw.workload.id in workload_ids
        for p in rw.placements
        for i in p.gpu_indices
    }


def _overlaps(placements: Sequence[Placement], busy: set[tuple[str, int]]) -> bool:
    return bool(busy) and any((p.host, i) in busy for p in placements for i in p.gpu_indices)


def _end_reason(attempt: Attempt, cj: ClusterJob) -> str:
    state = cj.state
    if state == ClusterJobState.SUCCEEDED:
        return AttemptEnd.SUCCEEDED
    if state == ClusterJobState.FAILED:
        return AttemptEnd.FAILED
    if state == ClusterJobState.CANCELLED:
        return AttemptEnd.CANCELLED
    if state == ClusterJobState.STOPPED:
        return attempt.stop_intent or AttemptEnd.LOST
    return AttemptEnd.LOST


def _job_target(attempt: Attempt, end: str) -> str:
    """The state a job goes to when its attempt ended with `end` (docs/architecture.md)."""
    intent = attempt.stop_intent
    # a run the cluster never reported started lost no work: it simply goes back
    requeue = attempt.job.resumable or attempt.started_at is None
    if end == AttemptEnd.SUCCEEDED:
        return JobState.SUCCEEDED
    if end == AttemptEnd.FAILED:
        return JobState.FAILED
    if end == AttemptEnd.START_FAILED:
        return JobState.CANCELLED if intent == AttemptEnd.CANCELLED else JobState.PENDING
    if end == AttemptEnd.LOST and intent:
        end = intent  # it was being stopped anyway
    if end == AttemptEnd.CANCELLED:
        return JobState.CANCELLED
    if end in (AttemptEnd.PREEMPTED, AttemptEnd.DRAINED):
        return JobState.PENDING if requeue else JobState.PREEMPTED
    return JobState.PENDING if requeue else JobState.FAILED  # lost


_END_TEXT = {
    AttemptEnd.SUCCEEDED: "finished successfully",
    AttemptEnd.FAILED: "failed",
    AttemptEnd.PREEMPTED: "stopped (preempted)",
    AttemptEnd.DRAINED: "stopped (host drained)",
    AttemptEnd.CANCELLED: "cancelled",
    AttemptEnd.LOST: "lost",
    AttemptEnd.START_FAILED: "could not be started",
}


def _move_job(
    attempt: Attempt, end: str, record: CycleRecord, at: dt.datetime, cluster: Cluster
) -> None:
    """Move the job of an attempt that just ended to its next state (through STOPPING
    when the state machine asks for it), saving checkpointed work of requeued runs."""
    job = attempt.job
    target = _job_target(attempt, end)
    detail = f": {attempt.end_detail}" if attempt.end_detail else ""
    reason = f"attempt {attempt.number} {_END_TEXT.get(end, end)}{detail}"
    if target == JobState.PENDING and attempt.started_at is not None and job.resumable:
        from scheduler.selectors.snapshot import policy_for_cluster

        ran = (attempt.ended_at - attempt.started_at).total_seconds()
        saved = saved_work_s(ran, policy_for_cluster(cluster).checkpoint_interval_s)
        if saved > 0:
            job.progress_s += saved
            job.save(update_fields=["progress_s"])
            reason += f"; {saved / 60:.0f} min of work saved at checkpoints, requeued"
    if job.state == target:
        return
    steps = [target]
    if not is_legal(job.state, target) and is_legal(job.state, JobState.STOPPING):
        steps = [JobState.STOPPING, target]
    for step in steps:
        if not is_legal(job.state, step):
            log.error("job %s: cannot go from %s to %s after %s", job.pk, job.state, step, end)
            return
        job_transition(
            job=job,
            to_state=step,
            reason=reason,
            reason_code=end,
            at=at,
            attempt=attempt,
            cycle=record,
        )


def queue_columns(
    cs: ClusterSnapshot,
    cycle_plan: CyclePlan,
    deferred: Mapping[str, tuple[str, ...]],
    *,
    grace_s: float,
) -> dict[str, object]:
    """The explained queue with job and node ids, in start order, as stored in
    `QueueSnapshot.entries` (columns; `scheduler.selectors.queue` reads it back): first
    the jobs that wait for the jobs they preempted to exit (they start next), then the
    engine's queue. `deferred` are this cycle's starts held back for that reason."""
    order = {p: (i + 1, f) for i, (p, f) in enumerate(cycle_plan.project_order)}
    running = {rw.workload.id: rw for rw in cs.snapshot.running}
    head: list[tuple[str, tuple[str, ...], float]] = []
    for wid, victims in cs.waiting.items():
        # a stopping victim is protected by the engine until its stop deadline
        ends = [running[v] for v in victims if v in running]
        until = max((rw.started_s + rw.workload.min_runtime_s for rw in ends), default=cs.now)
        head.append((wid, victims, until))
    head.extend((wid, victims, cs.now + grace_s) for wid, victims in deferred.items())
    projects = _projects_of(cs, [wid for wid, _, _ in head])
    blocks: list[QueueBlock] = []
    for wid, victims, until in head:
        project = projects.get(wid, "")
        rank, metric = order.get(project, (len(order) + 1, 0.0))
        names = ", ".join(victims) or "the jobs it preempted"
        ends_at = dt.datetime.fromtimestamp(until, dt.UTC).strftime("%H:%M:%S UTC")
        reason = (
            f"starting next: waiting for job {names} to exit (stop grace period ends at "
            f"{ends_at}); their GPUs are free only once the cluster reports the end"
        )
        blocks.append(QueueBlock(project, rank, metric, (wid,), reason))
    blocks.extend(cycle_plan.queue.blocks)
    if not blocks:
        return {**dict.fromkeys(QUEUE_COLUMNS, ""), "reasons": []}

    # Each column as comma-separated text: PostgreSQL parses one JSON string far faster
    # than tens of thousands of JSON numbers. Built a block (a project's consecutive
    # waiting jobs) at a time with C-level repeats and joins.
    columns: dict[str, list[str]] = {name: [] for name in QUEUE_COLUMNS}
    jobs, nodes, positions = columns["job"], columns["project"], columns["project_position"]
    ranks, metrics, reason_ids = columns["project_rank"], columns["metric"], columns["reason"]
    reasons: dict[str, str] = {}  # reason -> its index as text
    seen: dict[str, int] = {}  # project -> its jobs so far
    for b in blocks:
        n = len(b.workload_ids)
        jobs.extend(b.workload_ids)
        nodes.extend(repeat(str(cs.node_ids.get(b.project, "")), n))
        first = seen.get(b.project, 0)
        seen[b.project] = first + n
        positions.extend(map(str, range(first + 1, first + n + 1)))
        ranks.extend(repeat(str(b.project_rank), n))
        metrics.extend(repeat(str(round(b.metric, 6)), n))
        texts = (b.reason,) if isinstance(b.reason, str) else b.reason
        ids = [reasons.setdefault(t, str(len(reasons))) for t in texts]
        reason_ids.extend(repeat(ids[0], n) if isinstance(b.reason, str) else ids)
    return {
        **{name: ",".join(values) for name, values in columns.items()},
        "reasons": list(reasons),
    }


def _projects_of(cs: ClusterSnapshot, workload_ids: list[str]) -> dict[str, str]:
    if not workload_ids:
        return {}
    paths = {v: k for k, v in cs.node_ids.items()}
    rows = Job.objects.filter(pk__in=[int(w) for w in workload_ids]).values_list("pk", "project_id")
    return {str(pk): paths.get(project_id, "") for pk, project_id in rows}


# ------------------------------------------------------------------ beat helpers


def clusters_due(*, now: dt.datetime | None = None) -> list[int]:
    """Ids of the clusters whose last cycle started `cycle_s` ago or more (or never)."""
    now = now or timezone.now()
    last = (
        CycleRecord.objects.filter(cluster=OuterRef("pk"))
        .order_by("-started_at")
        .values("started_at")[:1]
    )
    rows = Cluster.objects.annotate(last=Subquery(last)).values_list("pk", "cycle_s", "last")
    return [
        pk
        for pk, cycle_s, last in rows
        if last is None or (now - last).total_seconds() >= cycle_s - 0.5
    ]


def cycle_records_prune(*, days: float = 30, now: dt.datetime | None = None) -> int:
    """Delete cycle records older than `days`. Records that a job event names (cycles
    that started or stopped something) stay with the append-only job history."""
    cutoff = (now or timezone.now()) - dt.timedelta(days=days)
    named = JobEvent.objects.filter(cycle=OuterRef("pk"))
    old = CycleRecord.objects.filter(started_at__lt=cutoff).exclude(Exists(named))
    deleted = 0
    while True:
        batch = list(old.values_list("pk", flat=True)[:5000])
        if not batch:
            return deleted
        deleted += (
            CycleRecord.objects.filter(pk__in=batch).delete()[1].get("scheduler.CycleRecord", 0)
        )
