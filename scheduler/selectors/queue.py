"""The explained queue of a cluster, as its last cycle stored it (`QueueSnapshot`).

The cycle stores the entries in columns (each field as comma-separated text,
positions implicit, reason texts deduplicated) because a queue of 10,000 jobs written
as one JSON object per job costs more than the rest of the cycle. Read it through these functions, which
give one dict per waiting job:

    {"job": id, "project": node id, "position": n, "project_position": n,
     "project_rank": n, "metric": f, "reason": "..."}

(`project_rank` and `metric`, the fair-share factor, are None for a project without
entitlement: it has neither.)

in start order (position 1 starts next).

A request that needs a few entries of a long queue (a job's place, a page of 50) reads
it through `stored_queue`: each process keeps the parsed queue of the row version it
last read (PostgreSQL's `xmin`/`ctid`, which every write of the row changes), so a
request reads four small columns and the 10,000-entry text is fetched and split once
per cycle per process instead of once per request.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from django.db import connection

from budgets.models import BudgetEvent, EventKind
from config.plainsql import fetch_one
from scheduler.models import Cluster, CycleRecord, QueueSnapshot
from scheduler.process_state import process_state

COLUMNS = ("job", "project", "project_position", "project_rank", "metric", "reason")
_INTS = ("job", "project_position", "reason")


def queue_snapshot(*, cluster_id: int) -> QueueSnapshot | None:
    """The cluster's stored queue (None before its first successful cycle)."""
    return QueueSnapshot.objects.filter(cluster_id=cluster_id).first()


@dataclass(frozen=True)
class CycleStamp:
    """When a cluster's last scheduling cycle ran (`at`, its queue's `computed_at`) and
    its record's id (None once the record is pruned)."""

    at: dt.datetime
    cycle_id: int | None


def last_cycle(*, cluster_id: int) -> CycleStamp | None:
    """The time every scheduling figure of the cluster is as of (docs/concepts.md,
    "Windows"): the queue, its reasons, the fair-share dashboard, API `fairshare/` and
    `allot shares`. None before the cluster's first successful cycle. (A plain
    statement, config.plainsql: the fair-share figures and the queue pages ask on
    every request.)"""
    meta = QueueSnapshot._meta
    sql = _LAST_CYCLE_SQL.format(
        at=meta.get_field("computed_at").column,
        cycle=meta.get_field("cycle").column,
        table=meta.db_table,
        cluster=meta.get_field("cluster").column,
    )
    row = fetch_one(sql, [cluster_id])
    return CycleStamp(at=row[0], cycle_id=row[1]) if row else None


_LAST_CYCLE_SQL = 'SELECT "{at}", "{cycle}" FROM "{table}" WHERE "{cluster}" = %s'  # one at most


def _column(entries: Mapping[str, Any], name: str, start: int = 0, stop: int | None = None) -> list:
    """Values `start` .. `stop` of a column; only those are converted (a page of a
    10,000-job queue needs 50 of each column, not 10,000)."""
    values = (entries.get(name) or "").split(",")[start:stop]  # "" is one empty project
    if name in _INTS:
        return list(map(int, values))
    if name == "metric":
        return [float(v) if v else None for v in values]
    if name == "project_rank":
        return [int(v) if v else None for v in values]
    return [int(v) if v else None for v in values]  # project node ids


def queue_length(entries: Mapping[str, Any]) -> int:
    text = (entries or {}).get("job") or ""
    return text.count(",") + 1 if text else 0


def iter_entries(
    entries: Mapping[str, Any], start: int = 0, stop: int | None = None
) -> Iterator[dict]:
    """Entries `start` .. `stop` (0-based, like a slice) of a stored queue as dicts."""
    if not entries or not entries.get("job"):
        return
    length = queue_length(entries)
    start = max(0, start)
    stop = length if stop is None else min(stop, length)
    if start >= stop:
        return
    cols = [_column(entries, name, start, stop) for name in COLUMNS]
    reasons = entries["reasons"]
    for i, row in enumerate(zip(*cols, strict=True), start):
        job, project, project_position, project_rank, metric, reason = row
        yield {
            "job": job,
            "project": project,
            "position": i + 1,
            "project_position": project_position,
            "project_rank": project_rank,
            "metric": metric,
            "reason": reasons[reason],
        }


def queue_entry(entries: Mapping[str, Any], *, job_id: int) -> dict | None:
    """The entry of one job (None when it is not waiting in this queue)."""
    if not entries or not entries.get("job"):
        return None
    try:
        i = entries["job"].split(",").index(str(job_id))
    except ValueError:
        return None
    return next(iter_entries(entries, i, i + 1))


# ---------------------------------------------------------------- one process's copy


@dataclasses.dataclass(frozen=True)
class StoredQueue:
    """A cluster's stored queue as one process read it: the columns split once, the
    jobs' indexes at hand. `entry`/`entries` give the dicts `iter_entries` gives."""

    version: tuple[str, str]  # the row's (xmin, ctid): any write of it changes them
    cycle_id: int | None
    computed_at: dt.datetime
    project_order: list
    columns: dict[str, list[str]]
    reasons: list[str]
    index: dict[int, int]  # job id -> 0-based place
    # The cluster's last cycle (its CycleRecord id, 0 before the first) when this copy
    # was handed out: read in the same statement, for the ETA's freshness check
    # (`scheduler.selectors.eta.current_job_etas`) of a request that reads both.
    last_cycle_id: int = 0
    # Whether an applied budget change's effective time falls in the usage window of
    # this queue (from `computed_at` - the cluster's look-back on): read in the same
    # statement when handed out. False means no reason has a change note to add
    # (`scheduler.selectors.budget_changes.cluster_change_notes` answers nothing), so a
    # request skips that statement.
    budget_changed: bool = True

    @property
    def length(self) -> int:
        return len(self.index)

    def entry(self, job_id: int) -> dict | None:
        """The entry of one job (None when it is not waiting in this queue)."""
        i = self.index.get(job_id)
        return None if i is None else self._row(i)

    def entries(self, start: int = 0, stop: int | None = None) -> Iterator[dict]:
        """Entries `start` .. `stop` (0-based, like a slice)."""
        stop = self.length if stop is None else min(stop, self.length)
        for i in range(max(0, start), stop):
            yield self._row(i)

    def entries_of(self, job_ids: Iterable[int]) -> list[dict]:
        """The entries of those of `job_ids` that wait in this queue, in start order."""
        return [self._row(i) for i in sorted(self.index[j] for j in job_ids if j in self.index)]

    def _row(self, i: int) -> dict:
        c = self.columns
        project, rank, metric = c["project"][i], c["project_rank"][i], c["metric"][i]
        return {
            "job": int(c["job"][i]),
            "project": int(project) if project else None,
            "position": i + 1,
            "project_position": int(c["project_position"][i]),
            "project_rank": int(rank) if rank else None,
            "metric": float(metric) if metric else None,
            "reason": self.reasons[int(c["reason"][i])],
        }


# The cluster's last cycle (as `scheduler.selectors.eta.last_cycle_id` reads it) and
# whether an applied budget change falls in the queue's usage window
# (`StoredQueue.budget_changed`: the change notes' statement, `cluster_change_notes`,
# looks from the same start on), of the stored queue row `q`.
_LAST_CYCLE = """(SELECT c.id FROM {cycles} c WHERE c.cluster_id = q.cluster_id
                  ORDER BY c.started_at DESC, c.id DESC LIMIT 1)"""
_BUDGET_CHANGED = """EXISTS (SELECT 1 FROM {events} e WHERE e.kind = '{applied}' AND
    e.effective_at >= q.computed_at - (SELECT k.lookback_s FROM {clusters} k
                                       WHERE k.id = q.cluster_id) * interval '1 second')"""
# One statement either way: the columns, and the queue itself only when this process
# does not hold that version of the row already.
_READ_SQL = """
    SELECT xmin::text, ctid::text, cycle_id, computed_at,
           CASE WHEN xmin::text = %s AND ctid::text = %s THEN NULL ELSE entries::text END,
           CASE WHEN xmin::text = %s AND ctid::text = %s THEN NULL ELSE project_order::text END,
           {last_cycle}, {budget_changed}
    FROM {table} q WHERE q.cluster_id = %s
"""
# What another statement reads of a cluster's stored queue (`queue_seen_sql`): its
# version, last cycle and budget-change flag, as text; NULL without a queue.
_SEEN_SQL = """(SELECT ARRAY[q.xmin::text, q.ctid::text, COALESCE({last_cycle}, 0)::text,
                      ({budget_changed})::text]
               FROM {table} q WHERE q.cluster_id = {cluster_id})"""


def _formatted(sql: str, **more: str) -> str:
    tables = {
        "table": QueueSnapshot._meta.db_table,
        "cycles": CycleRecord._meta.db_table,
        "events": BudgetEvent._meta.db_table,
        "clusters": Cluster._meta.db_table,
        "applied": EventKind.APPLIED.value,
    }
    return sql.format(
        last_cycle=_LAST_CYCLE.format(**tables),
        budget_changed=_BUDGET_CHANGED.format(**tables),
        **tables,
        **more,
    )


def queue_seen_sql(cluster_id_sql: str) -> str:
    """A select-list item for a statement that reads a job anyway (`scheduler.selectors.
    job_reads.job_detail`): where the stored queue of the cluster whose id is the SQL
    expression `cluster_id_sql` stands (version, last cycle, budget-change flag), for
    `stored_queue_seen`; NULL before the cluster's first cycle."""
    return _formatted(_SEEN_SQL, cluster_id=cluster_id_sql)


def kept_queue_version(*, cluster_id: int) -> tuple[str, str] | None:
    """The version (`StoredQueue.version`) of the cluster's stored queue as this process
    last read it (`stored_queue`), without a statement; None when it has not read one."""
    kept = process_state().queue_copies.get((connection.settings_dict["NAME"], cluster_id))
    return kept.version if kept is not None else None


def stored_queue(*, cluster_id: int) -> StoredQueue | None:
    """The cluster's stored queue (None before its first successful cycle): this
    process's copy when the row is still the version it read, else read and kept; its
    `last_cycle_id` read now."""
    state = process_state()
    key = (connection.settings_dict["NAME"], cluster_id)
    kept: StoredQueue | None = state.queue_copies.get(key)
    version = kept.version if kept is not None else ("", "")
    with connection.cursor() as cursor:
        cursor.execute(_formatted(_READ_SQL), [*version, *version, cluster_id])
        row = cursor.fetchone()
    if row is None:
        return None
    last_cycle, changed = row[6] or 0, row[7]
    if kept is not None and kept.version == (row[0], row[1]):
        if (kept.last_cycle_id, kept.budget_changed) == (last_cycle, changed):
            return kept
        return _as_read_now(kept, last_cycle, changed)
    xmin, ctid, cycle_id, computed_at, entries_text, order_text = row[:6]
    entries = json.loads(entries_text) if entries_text else {}
    entries = entries if isinstance(entries, dict) else {}
    jobs = entries.get("job") or ""
    columns = {name: ((entries.get(name) or "").split(",") if jobs else []) for name in COLUMNS}
    copy = StoredQueue(
        version=(xmin, ctid),
        cycle_id=cycle_id,
        computed_at=computed_at,
        project_order=json.loads(order_text) if order_text else [],
        columns=columns,
        reasons=list(entries.get("reasons") or []),
        index={int(j): i for i, j in enumerate(columns["job"])},
        last_cycle_id=last_cycle,
        budget_changed=changed,
    )
    with state.queue_copies_lock:
        state.queue_copies[key] = copy
    return copy


def forget_queues() -> None:
    """Drop this process's kept queues (`stored_queue`): the next read reads the row."""
    state = process_state()
    with state.queue_copies_lock:
        state.queue_copies.clear()


def stored_queue_seen(*, cluster_id: int, seen: Sequence[str] | None) -> StoredQueue | None:
    """`stored_queue` for a caller whose statement read `queue_seen_sql` (`seen`) in
    this request: this process's copy, with no statement, while it is that version of
    the row; else read (and kept) by `stored_queue`. None: the cluster has no queue."""
    if seen is None:
        return None
    kept = process_state().queue_copies.get((connection.settings_dict["NAME"], cluster_id))
    if kept is None or kept.version != (seen[0], seen[1]):
        return stored_queue(cluster_id=cluster_id)
    last_cycle, changed = int(seen[2]), seen[3] == "true"
    if (kept.last_cycle_id, kept.budget_changed) == (last_cycle, changed):
        return kept
    return _as_read_now(kept, last_cycle, changed)


def _as_read_now(kept: StoredQueue, last_cycle: int, changed: bool) -> StoredQueue:
    """`kept` with the last cycle and the budget-change flag read now (the parsed
    columns shared, not copied)."""
    return dataclasses.replace(kept, last_cycle_id=last_cycle, budget_changed=changed)
