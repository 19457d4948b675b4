"""The room of a cluster's healthy hosts as a pending job sees them, for its capacity
and healthy-GPU blockers (`scheduler.selectors.jobs.job_blockers`): as of the cluster's
last cycle, read once per cycle and job size in each process."""

from __future__ import annotations

import bisect
import dataclasses
import datetime as dt
import time

from django.db import connection
from django.utils import timezone

from scheduler.core.engine.runs import protection_end
from scheduler.models import Attempt, Host, HostHealth, Job
from scheduler.process_state import process_state
from scheduler.selectors.queue import kept_queue_version
from scheduler.selectors.translate import workload as stored_workload

__all__ = ["Room", "forget_rooms", "job_room"]


@dataclasses.dataclass(frozen=True)
class Room:
    """What the capacity blocker says of a cluster's healthy hosts for one job."""

    healthy_gpus: int  # on every healthy host
    hosts_that_fit: int  # healthy hosts big enough for the job, else every healthy one
    free_gpus: int  # on those hosts, not held by an open attempt
    protected_until: dt.datetime | None  # the first protected minimum runtime end there


# One statement: the healthy hosts' GPUs, the hosts that fit the job (those with at least
# its GPUs, else every healthy one), the GPUs the open attempts leave free on them and the
# distinct (start, min runtime) of the allocated open attempts there. Summed and
# deduplicated by PostgreSQL: a busy cluster has hundreds of hosts and open attempts, and
# reading each one (three statements and a loop over the hosts) cost most of a request.
_ROOM_SQL = """
    WITH h AS (SELECT name, gpus FROM {host} WHERE cluster_id = %(cluster)s AND health = %(healthy)s),
    m AS (SELECT COALESCE(SUM(gpus), 0) AS healthy,
                 CASE WHEN COALESCE(MAX(gpus), 0) >= %(gpus)s THEN %(gpus)s ELSE 0 END AS least
          FROM h),
    f AS (SELECT h.name, h.gpus FROM h, m WHERE h.gpus >= m.least),
    busy AS (SELECT p->>'host' AS host, SUM(jsonb_array_length(p->'gpu_indices')) AS used
             FROM {attempt} a, jsonb_array_elements(a.placements) p
             WHERE a.cluster_id = %(cluster)s AND a.ended_at IS NULL
               AND p->>'host' IN (SELECT name FROM f)
             GROUP BY 1),
    runs AS (SELECT DISTINCT COALESCE(a.started_at, a.created_at) AS started, j.min_runtime_s
             FROM {attempt} a JOIN {job} j ON j.id = a.job_id
             WHERE a.cluster_id = %(cluster)s AND a.ended_at IS NULL AND a.allocated
               AND EXISTS (SELECT 1 FROM jsonb_array_elements(a.placements) p
                           WHERE p->>'host' IN (SELECT name FROM f)))
    SELECT m.healthy,
           (SELECT COUNT(*) FROM f),
           (SELECT COALESCE(SUM(GREATEST(0, f.gpus - COALESCE(busy.used, 0))), 0)
            FROM f LEFT JOIN busy ON busy.host = f.name),
           (SELECT COALESCE(array_agg(started), '{{}}') FROM runs),
           (SELECT COALESCE(array_agg(min_runtime_s), '{{}}') FROM runs)
    FROM m
"""


@dataclasses.dataclass(frozen=True)
class _RoomFacts:
    """What `_ROOM_SQL` answers for a job size: `Room` but with every protected run's
    end (`protection_end`), distinct and sorted, for the request to pick the first after
    its own now."""

    healthy_gpus: int
    hosts_that_fit: int
    free_gpus: int
    protection_ends: tuple[dt.datetime, ...]


def job_room(job: Job) -> Room:
    """The cluster's healthy hosts as the pending `job` sees them (`Room`): the hosts
    that fit as of the cluster's last cycle (`_room_facts`), the first end after now of a
    protected minimum runtime on them (`protection_end`; unallocated runs are never
    protected)."""
    facts = _room_facts(job)
    now = timezone.now()
    ends = facts.protection_ends
    first = bisect.bisect_right(ends, now)
    return Room(
        healthy_gpus=facts.healthy_gpus,
        hosts_that_fit=facts.hosts_that_fit,
        free_gpus=facts.free_gpus,
        protected_until=ends[first] if first < len(ends) else None,
    )


def _room_facts(job: Job) -> _RoomFacts:
    """`_read_room` once per job size per cycle in each process: kept with the version
    of the cluster's stored queue that this process read last (`kept_queue_version`;
    every cycle that stores a queue makes a new one), and for at most the cluster's
    cycle period (cycles that store no queue: paused scheduling, a cluster that did not
    answer). Like the queue position, the room is the cluster's as of its last cycle; the
    statement cost PostgreSQL ~6 ms on 128 hosts and 570 open attempts, per request."""
    version = kept_queue_version(cluster_id=job.cluster_id)
    if version is None:  # no stored queue: no cycle to keep it for
        return _read_room(job)
    rooms = process_state().rooms
    key = (connection.settings_dict["NAME"], job.cluster_id)
    kept = rooms.get(key)
    at = time.monotonic()
    if kept is None or kept[0] != version or at - kept[1] >= job.cluster.cycle_s:
        kept = rooms[key] = (version, at, {})
    facts = kept[2].get(job.gpus)
    if facts is None:
        facts = kept[2][job.gpus] = _read_room(job)
    return facts


def forget_rooms() -> None:
    """Drop this process's kept rooms (`_room_facts`): the next read runs the statement."""
    process_state().rooms.clear()


def _read_room(job: Job) -> _RoomFacts:
    """The cluster's healthy hosts as the pending `job` sees them, in one statement."""
    sql = _ROOM_SQL.format(
        host=Host._meta.db_table, attempt=Attempt._meta.db_table, job=Job._meta.db_table
    )
    params = {"cluster": job.cluster_id, "healthy": HostHealth.HEALTHY, "gpus": job.gpus}
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        healthy, fits, free, starts, min_runtimes = cursor.fetchone()
    cap = float(job.cluster.max_min_runtime_s)
    ends: set[dt.datetime] = set()
    for started_at, min_runtime_s in zip(starts, min_runtimes, strict=True):
        start = started_at.timestamp()
        work = stored_workload(
            job_id="",
            project="",
            gpus=0,
            submit_s=start,
            min_runtime_s=min_runtime_s,
            resumable=False,
            priority=0,
            kind="",
        )
        ends.add(dt.datetime.fromtimestamp(protection_end(work, start, cap), dt.UTC))
    return _RoomFacts(
        healthy_gpus=int(healthy),
        hosts_that_fit=int(fits),
        free_gpus=int(free),
        protection_ends=tuple(sorted(ends)),
    )
