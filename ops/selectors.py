"""Reads of the operations app: is the scheduler cycling, and if not, what is stale.

`scheduling_health()` is the one answer `/healthz`, the page banner and the operators'
metrics share. A cluster is stale when it had no cycle that read it for
ALLOT_STALE_CYCLES (3) cycle periods; the cause named is the first of:
- `paused`: scheduling is paused on this database (after a restore: ops.services);
- `beat`: beat's heartbeat is older than 3 heartbeat periods (nothing asks for cycles);
  the period follows the shortest cycle period (`heartbeat_interval_s`), so a dead beat
  is named before any cluster it stops can go stale;
- `worker`: no heartbeat that fresh of a worker of the cycles' queue (nothing runs them;
  a worker of the background queue only does not count);
- `cluster adapter`: the cluster's recent cycles could not read it (the error is shown);
- `cycles`: beat and a worker are alive, yet no cycle ran (failing or queued behind
  other work: see the worker's log).

`queue_health(queue)` reads the same heartbeats for one queue: `/healthz` names
`background worker` (and stays 200, "degraded": cycles go on) when no worker of the
background queue beat that recently (previews, ETAs, utilization and rollups wait).
`SchedulingHealth.queue(queue)` answers the same from the heartbeats `scheduling_health`
already read (the page banner: one heartbeat query for both).
"""

from __future__ import annotations

import datetime as dt
import hashlib
from dataclasses import dataclass, field

from django.conf import settings
from django.db import connection
from django.db.models import Max, Min
from django.utils import timezone

from ops.models import Heartbeat, ProcessKind, SchedulingGate
from scheduler.models import Cluster, CycleRecord

# Errors of a cycle that did not schedule its cluster (scheduler.cycle).
UNREAD_PREFIXES = ("cluster unreachable", "cycle failed")
IDENTITY_SQL = (
    "SELECT s.system_identifier, substr(pg_walfile_name(pg_current_wal_lsn()), 1, 8), d.oid "
    "FROM pg_control_system() s, pg_database d WHERE d.datname = current_database()"
)


def database_identity() -> str:
    """This database's identity: the server's system identifier, its WAL timeline and
    the database's oid. A restore into a new database, a copy, a point-in-time recovery
    and a promoted replica each give another one. Read once per database connection
    (it cannot change under an open connection; a cycle's gate check and its high-water
    record share it)."""
    connection.ensure_connection()
    raw = connection.connection
    known = getattr(connection, "allot_identity", None)
    if known is not None and known[0] is raw:
        return known[1]
    with connection.cursor() as cursor:
        cursor.execute(IDENTITY_SQL)
        system_id, timeline, oid = cursor.fetchone()
    identity = f"system {system_id} timeline {timeline} database {oid}"
    connection.allot_identity = (raw, identity)
    return identity


def cycle_sequence_value() -> int:
    """The last cycle id this database gave (its sequence: deleting cycle records does
    not lower it; only a restore does)."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT last_value FROM pg_sequences "
            "WHERE format('%%I.%%I', schemaname, sequencename) = pg_get_serial_sequence(%s, 'id')",
            [CycleRecord._meta.db_table],
        )
        row = cursor.fetchone()
    return int(row[0]) if row and row[0] is not None else 0


def high_water_key(identity: str) -> str:
    """The Redis key of the highest cycle id a database (by its identity) gave."""
    return "allot:cycle-high-water:" + hashlib.sha1(identity.encode()).hexdigest()[:16]


def scheduling_paused() -> str:
    """Why scheduling is paused, "" if not (read only: the gate row is paused when a
    cycle first sees another database, `ops.services.scheduling_gate_check`)."""
    gate = SchedulingGate.objects.filter(pk=1).first()
    if gate is None:
        return ""
    if gate.paused_reason:
        return gate.paused_reason
    if gate.database != database_identity():
        return (
            "this database was restored or copied from another one: run "
            "`manage.py reconcile_restore` to reconcile every cluster and resume scheduling"
        )
    return ""


HEARTBEAT_MISSES = 3  # heartbeats missed before a process counts as stale
MIN_HEARTBEAT_S = 0.25


def cycle_period_s(cycle_s: float) -> float:
    """A cluster's cycle period as beat keeps it: beat looks every ALLOT_CYCLE_TICK_S."""
    return max(float(cycle_s), float(settings.ALLOT_CYCLE_TICK_S))


def stale_after_s(cycle_s: float) -> float:
    """How old a cluster's last cycle may be before it counts as stale."""
    return float(settings.ALLOT_STALE_CYCLES) * cycle_period_s(cycle_s)


def heartbeat_interval_s(shortest_cycle_s: float | None = None) -> float:
    """How often beat and the workers record their heartbeat: ALLOT_HEARTBEAT_S, or less
    on a cluster cycling faster, so that a dead beat is named before a cluster it stops
    goes stale. Beat dies at T with its last heartbeat at or before T, and the cluster's
    last cycle started after T - (cycle_s + tick) (beat would have asked for another);
    the cluster is stale STALE_CYCLES periods after that cycle, beat HEARTBEAT_MISSES
    intervals after its heartbeat: so the interval is at most ((STALE_CYCLES - 1) x
    period - tick) / HEARTBEAT_MISSES for the shortest period (2 x 2 s - 2 s) / 3 = 0.67 s
    for a 1 s cluster with the defaults; 5 s, the default, for 10 s clusters).
    `shortest_cycle_s`: the shortest `cycle_s` of the clusters (read when not given)."""
    interval = float(settings.ALLOT_HEARTBEAT_S)
    if shortest_cycle_s is None:
        shortest_cycle_s = Cluster.objects.aggregate(shortest=Min("cycle_s"))["shortest"]
    if shortest_cycle_s is not None:
        period = cycle_period_s(shortest_cycle_s)
        stale_cycles, tick = float(settings.ALLOT_STALE_CYCLES), float(settings.ALLOT_CYCLE_TICK_S)
        bound = ((stale_cycles - 1) * period - tick) / HEARTBEAT_MISSES
        interval = min(interval, max(bound, MIN_HEARTBEAT_S))
    return interval


def heartbeat_stale_after_s(shortest_cycle_s: float | None = None) -> float:
    """How old a heartbeat may be before its process counts as stale."""
    return HEARTBEAT_MISSES * heartbeat_interval_s(shortest_cycle_s)


@dataclass(frozen=True)
class WorkerBeat:
    name: str
    age_s: float  # unrounded
    queues: str  # comma-separated; "" when the worker did not say


def heartbeats(now: dt.datetime) -> tuple[dt.datetime | None, list[WorkerBeat]]:
    """When beat last beat, and every worker's last heartbeat (one read)."""
    rows = Heartbeat.objects.values_list("kind", "name", "seen_at", "queues")
    beat_at = None
    workers = []
    for kind, name, at, queues in rows:
        if kind == ProcessKind.BEAT:
            beat_at = at if beat_at is None else max(beat_at, at)
        elif kind == ProcessKind.WORKER:
            workers.append(WorkerBeat(name, max(0.0, (now - at).total_seconds()), queues))
    return beat_at, workers


def consumes(worker: WorkerBeat, queue: str) -> bool:
    """Whether `worker` takes tasks of `queue` (a row written before workers said which
    queues they consume counts for every queue)."""
    return not worker.queues or queue in worker.queues.split(",")


def queue_workers_alive(workers: list[WorkerBeat], queue: str, fresh_s: float) -> int:
    """How many workers of `queue` beat within `fresh_s` seconds."""
    return sum(1 for w in workers if w.age_s <= fresh_s and consumes(w, queue))


def queue_alive(workers: list[WorkerBeat], queue: str, fresh_s: float) -> bool:
    """Whether a worker of `queue` beat within `fresh_s` seconds."""
    return queue_workers_alive(workers, queue, fresh_s) > 0


@dataclass(frozen=True)
class QueueHealth:
    queue: str
    component: str  # what `/healthz` names when no worker of the queue is alive
    ok: bool
    worker_ages_s: dict[str, float]  # the workers of the queue, fresh or not
    heartbeat_stale_after_s: float

    def as_dict(self) -> dict:
        return {
            "ok": self.ok,
            "stale": [] if self.ok else [self.component],
            "queue": self.queue,
            "workers": self.worker_ages_s,
            "heartbeat_stale_after_s": self.heartbeat_stale_after_s,
        }


def queue_health_of(
    workers: list[WorkerBeat], queue: str, component: str, fresh_s: float
) -> QueueHealth:
    """Whether a worker of `queue` beat within `fresh_s` seconds, from heartbeats read."""
    return QueueHealth(
        queue=queue,
        component=component,
        ok=queue_alive(workers, queue, fresh_s),
        worker_ages_s={w.name: round(w.age_s, 1) for w in workers if consumes(w, queue)},
        heartbeat_stale_after_s=fresh_s,
    )


def queue_health(queue: str, component: str, *, now: dt.datetime | None = None) -> QueueHealth:
    """Whether a worker of `queue` is alive (`scheduling_health`'s heartbeats and
    freshness); `component` names it when not ("background worker")."""
    now = now or timezone.now()
    _, workers = heartbeats(now)
    return queue_health_of(workers, queue, component, heartbeat_stale_after_s())


@dataclass(frozen=True)
class ClusterHealth:
    name: str
    last_cycle_age_s: float | None  # any cycle
    last_read_age_s: float | None  # the last cycle that read the cluster
    stale_after_s: float
    stale: bool
    cause: str = ""  # what is stale, when it is
    error: str = ""


@dataclass(frozen=True)
class SchedulingHealth:
    ok: bool
    stale: list[str]  # what is stale: "paused", "beat", "worker", "cluster adapter: c1", ...
    paused: str
    beat_age_s: float | None
    worker_ages_s: dict[str, float]
    heartbeat_stale_after_s: float
    clusters: list[ClusterHealth] = field(default_factory=list)
    # every worker's heartbeat as read, for `queue`: one read serves both (not in as_dict)
    worker_beats: list[WorkerBeat] = field(default_factory=list, repr=False)

    def queue(self, queue: str, component: str) -> QueueHealth:
        """`queue_health` from this read's heartbeats and freshness (no further query)."""
        return queue_health_of(self.worker_beats, queue, component, self.heartbeat_stale_after_s)

    def as_dict(self) -> dict:
        return {
            "ok": self.ok,
            "stale": self.stale,
            "paused": self.paused,
            "beat_age_s": self.beat_age_s,
            "workers": self.worker_ages_s,
            "heartbeat_stale_after_s": self.heartbeat_stale_after_s,
            "clusters": {
                c.name: {
                    "last_cycle_age_s": c.last_cycle_age_s,
                    "last_read_age_s": c.last_read_age_s,
                    "stale_after_s": c.stale_after_s,
                    "stale": c.stale,
                    **({"cause": c.cause} if c.cause else {}),
                    **({"error": c.error} if c.error else {}),
                }
                for c in self.clusters
            },
        }


def _age(now: dt.datetime, at: dt.datetime | None) -> float | None:
    return None if at is None else round(max(0.0, (now - at).total_seconds()), 1)


def _unread_error(errors: list) -> str:
    return next((e for e in errors or [] if str(e).startswith(UNREAD_PREFIXES)), "")


def _last_read(cluster: Cluster, scan: int = 50) -> dt.datetime | None:
    """When the last of the cluster's latest `scan` cycles that read it started."""
    rows = CycleRecord.objects.filter(cluster=cluster).order_by("-started_at")[:scan]
    return next(
        (
            at
            for at, errors in rows.values_list("started_at", "errors")
            if not _unread_error(errors)
        ),
        None,
    )


def _cluster_health(
    cluster: Cluster, now: dt.datetime, records: list[tuple], process_cause: str
) -> ClusterHealth:
    """`records`: the cluster's (started_at, errors) within its staleness window, newest first."""
    limit = stale_after_s(cluster.cycle_s)
    read = [at for at, errors in records if not _unread_error(errors)]
    last_read = read[0] if read else None
    stale = last_read is None
    cause = error = ""
    if stale:
        last_read = _last_read(cluster)
        error = next((_unread_error(e) for _, e in records if _unread_error(e)), "")
        if process_cause:
            cause = process_cause
        elif error.startswith("cluster unreachable"):
            cause = "cluster adapter"
        else:
            cause = "cycles"
    return ClusterHealth(
        name=cluster.name,
        last_cycle_age_s=_age(now, cluster.last),
        last_read_age_s=_age(now, last_read),
        stale_after_s=limit,
        stale=stale,
        cause=cause,
        error=error[:300],
    )


def scheduling_health(*, now: dt.datetime | None = None) -> SchedulingHealth:
    """Whether every cluster is being scheduled, and what is stale when not."""
    now = now or timezone.now()
    paused = scheduling_paused()
    beat_at, worker_beats = heartbeats(now)
    workers = {w.name: round(w.age_s, 1) for w in worker_beats}
    clusters = list(Cluster.objects.annotate(last=Max("cycles__started_at")).order_by("name"))
    fresh = heartbeat_stale_after_s(min((c.cycle_s for c in clusters), default=None))
    stale: list[str] = []
    if paused:
        stale.append("paused")
    beat_age = _age(now, beat_at)
    if beat_at is None or (now - beat_at).total_seconds() > fresh:  # unrounded, as cycles'
        stale.append("beat")
    if not queue_alive(worker_beats, settings.CELERY_TASK_DEFAULT_QUEUE, fresh):
        stale.append("worker")
    window = max((stale_after_s(c.cycle_s) for c in clusters), default=0.0)
    recent: dict[int, list[tuple]] = {}
    rows = CycleRecord.objects.filter(started_at__gte=now - dt.timedelta(seconds=window))
    for cluster_id, at, errors in rows.order_by("-started_at").values_list(
        "cluster_id", "started_at", "errors"
    ):
        recent.setdefault(cluster_id, []).append((at, errors))
    health = []
    for cluster in clusters:
        limit = dt.timedelta(seconds=stale_after_s(cluster.cycle_s))
        mine = [(at, e) for at, e in recent.get(cluster.pk, []) if now - at <= limit]
        health.append(_cluster_health(cluster, now, mine, stale[0] if stale else ""))
    for c in health:
        if c.stale and c.cause in ("cluster adapter", "cycles"):
            stale.append(f"{c.cause}: {c.name}")
    if not clusters:
        stale.append("no cluster")
    return SchedulingHealth(
        ok=not stale,
        stale=stale,
        paused=paused,
        beat_age_s=beat_age,
        worker_ages_s=workers,
        heartbeat_stale_after_s=fresh,
        clusters=health,
        worker_beats=worker_beats,
    )
