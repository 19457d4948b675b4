"""One job as its API read and its page show it: the job with its submitter, cluster and
project, its attempts and its events, each in one plain statement (`config.plainsql`:
every job read and job page runs them, and compiling the ORM queries cost more than
PostgreSQL spent answering them)."""

from __future__ import annotations

import datetime as dt
import functools
from typing import Any

from django.contrib.auth import get_user_model

from budgets.selectors import slug_path
from config.plainsql import columns, fetch_all, fetch_one, instance
from scheduler.core.engine import rule_label
from scheduler.models import Attempt, Cluster, Job, JobEvent, JobState
from scheduler.selectors.queue import queue_seen_sql

__all__ = ["job_attempts", "job_detail", "job_events"]


@functools.cache
def _job_detail_sql() -> str:
    user, project = get_user_model(), Job._meta.get_field("project").related_model
    ancestors = _ANCESTORS_SQL.format(node=project._meta.db_table)
    seen = queue_seen_sql('j."cluster_id"')
    seen = f"""CASE WHEN j."state" = '{JobState.PENDING.value}' THEN {seen} END"""
    events = _EVENTS_JSON_SQL.format(event=JobEvent._meta.db_table, attempt=Attempt._meta.db_table)
    return (
        f"SELECT {columns(Job, 'j')}, {columns(user, 'u')}, {columns(Cluster, 'c')}, "
        f'{columns(project, "n")}, {ancestors}, {seen}, {events} FROM "{Job._meta.db_table}" j '
        f'INNER JOIN "{user._meta.db_table}" u ON u."{user._meta.pk.column}" = j."submitter_id" '
        f'INNER JOIN "{Cluster._meta.db_table}" c ON c."id" = j."cluster_id" '
        f'INNER JOIN "{project._meta.db_table}" n ON n."id" = j."project_id" WHERE j."id" = %s'
    )


# The project's node and those above it, [id, parent id, slug] each: its path without
# reading the whole tree in a statement of its own (`node_paths`).
_ANCESTORS_SQL = """
    (WITH RECURSIVE up(id, parent_id, slug) AS (
        SELECT b.id, b.parent_id, b.slug FROM "{node}" b WHERE b.id = j."project_id"
        UNION ALL
        SELECT b.id, b.parent_id, b.slug FROM "{node}" b JOIN up ON b.id = up.parent_id)
     SELECT json_agg(json_build_array(up.id, up.parent_id, up.slug)) FROM up)
"""


def job_detail(*, job_id: int) -> Job | None:
    """One job with its submitter, cluster and project, and its project's slug path
    (`project_path`, as `node_paths` gives it) (`job_attempts`, `job_events`: what it went
    through), in one plain statement (config.plainsql: every job read and job page runs
    it; its times through psycopg's own loader, `native_times`); for a pending job, where
    its cluster's stored queue stands (`queue_seen`, for
    `job_stored_queue`: no statement of its own while this process holds that queue)."""
    row = fetch_one(_job_detail_sql(), [job_id], native_times=True)
    if row is None:
        return None
    job, at = instance(Job, row)
    job.submitter, at = instance(get_user_model(), row, at)
    job.cluster, at = instance(Cluster, row, at)
    job.project, at = instance(Job._meta.get_field("project").related_model, row, at)
    nodes = {node_id: (parent_id, slug) for node_id, parent_id, slug in row[at] or []}
    job.project_path = slug_path(job.project_id, nodes.__getitem__) if nodes else ""
    job.queue_seen = row[at + 1]  # `stored_queue_seen`'s, for a pending job
    job.events_read = [_event(event) for event in row[at + 2] or []]  # `job_events`'
    return job


def job_attempts(job: Job) -> list[Attempt]:
    """The job's attempts, first first; no statement for a job that never started
    (`attempt_count`, raised with each attempt created: most pending jobs)."""
    if job.attempt_count == 0:
        return []
    sql = (
        f'SELECT {columns(Attempt, "a")} FROM "{Attempt._meta.db_table}" a '
        'WHERE a."job_id" = %s ORDER BY a."number"'
    )
    return [instance(Attempt, row)[0] for row in fetch_all(sql, [job.pk])]


_EVENT_KEYS = ("at", "from_state", "to_state", "reason", "reason_code", "attempt", "cycle")
_EVENT_KEYS += ("actor", "preempting_job", "preempting_project", "rule")
_EVENTS_SQL = """
    SELECT e.at, e.from_state, e.to_state, e.reason, e.reason_code, a.number, e.cycle_id,
           e.actor_name, e.preempting_job_id, e.preempting_project_id, e.rule
    FROM "{event}" e LEFT OUTER JOIN "{attempt}" a ON a.id = e.attempt_id
    WHERE e.job_id = %s ORDER BY e.at, e.id
"""


# The same, as one JSON array in the job's statement (`job_detail`): its times are
# PostgreSQL's ISO text in the session's time zone (UTC), read back by `_event`.
_EVENTS_JSON_SQL = """
    (SELECT json_agg(json_build_array(e.at, e.from_state, e.to_state, e.reason, e.reason_code,
                                      a.number, e.cycle_id, e.actor_name, e.preempting_job_id,
                                      e.preempting_project_id, e.rule) ORDER BY e.at, e.id)
     FROM "{event}" e LEFT OUTER JOIN "{attempt}" a ON a.id = e.attempt_id
     WHERE e.job_id = j."id")
"""


def _event(row: list[Any]) -> dict[str, Any]:
    """An event of `_EVENTS_JSON_SQL` as `job_events` gives it."""
    found = dict(zip(_EVENT_KEYS, row, strict=True))
    found["at"] = dt.datetime.fromisoformat(found["at"])
    found["rule_label"] = rule_label(row[-1])
    return found


def job_events(job: Job) -> list[dict[str, Any]]:
    """The job's events in order, as `JobEventOutput` describes them (columns, not model
    objects: the page and the API show them as they are): read with the job when
    `job_detail` read it (`events_read`), else in one plain statement."""
    if hasattr(job, "events_read"):
        return job.events_read
    sql = _EVENTS_SQL.format(event=JobEvent._meta.db_table, attempt=Attempt._meta.db_table)
    rows = fetch_all(sql, [job.pk])
    return [
        {**dict(zip(_EVENT_KEYS, row, strict=True)), "rule_label": rule_label(row[-1])}
        for row in rows
    ]
