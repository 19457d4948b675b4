"""The simulated clusters' SQLite file: the schema, the write transaction, and rows
as the API's JSON."""

from __future__ import annotations

import datetime as dt
import json
import sqlite3
from typing import Any

from scheduler.adapters.simcluster.rules import SimError

SCHEMA = """
CREATE TABLE IF NOT EXISTS clusters (
    id INTEGER PRIMARY KEY,
    name TEXT NOT NULL UNIQUE,
    host_count INTEGER NOT NULL,
    gpus_per_host INTEGER NOT NULL,
    speed REAL NOT NULL,
    start_delay_s REAL NOT NULL,
    exit_delay_s REAL NOT NULL,
    retention_s REAL NOT NULL,
    max_ended INTEGER NOT NULL,
    start_timeouts INTEGER NOT NULL DEFAULT 0,
    start_timeout_delay_s REAL NOT NULL DEFAULT 0,
    created_at REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS hosts (
    cluster_id INTEGER NOT NULL REFERENCES clusters(id) ON DELETE CASCADE,
    name TEXT NOT NULL,
    position INTEGER NOT NULL,
    gpus INTEGER NOT NULL,
    admin_health TEXT NOT NULL DEFAULT 'healthy',
    admin_reason TEXT NOT NULL DEFAULT '',
    failed INTEGER NOT NULL DEFAULT 0,
    failed_reason TEXT NOT NULL DEFAULT '',
    changed_at REAL,
    PRIMARY KEY (cluster_id, name)
);
CREATE TABLE IF NOT EXISTS jobs (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    cluster_id INTEGER NOT NULL REFERENCES clusters(id) ON DELETE CASCADE,
    attempt_id TEXT,
    name TEXT NOT NULL,
    project TEXT NOT NULL,
    gpus INTEGER NOT NULL,
    placements TEXT NOT NULL,
    spec TEXT NOT NULL,
    run_for_s REAL,
    grace_s REAL NOT NULL,
    exit_delay_s REAL,
    state TEXT NOT NULL,
    submitted_at REAL NOT NULL,
    running_at REAL NOT NULL,
    end_at REAL,
    end_state TEXT NOT NULL,
    end_detail TEXT NOT NULL,
    stop_requested_at REAL,
    ended_at REAL,
    -- when the end was first reported (a restart's downtime does not use up retention)
    ended_seen_at REAL,
    detail TEXT NOT NULL DEFAULT '',
    -- the utilization profile its GPUs report (scheduler.core.utilization)
    profile TEXT NOT NULL DEFAULT 'training',
    UNIQUE (cluster_id, attempt_id)
);
CREATE INDEX IF NOT EXISTS jobs_state ON jobs (cluster_id, state);
CREATE INDEX IF NOT EXISTS jobs_ended_seen ON jobs (cluster_id, ended_seen_at);
CREATE TABLE IF NOT EXISTS job_gpus (
    job_id INTEGER NOT NULL REFERENCES jobs(id) ON DELETE CASCADE,
    cluster_id INTEGER NOT NULL,
    host TEXT NOT NULL,
    gpu INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS job_gpus_slot ON job_gpus (cluster_id, host, gpu);
CREATE INDEX IF NOT EXISTS job_gpus_job ON job_gpus (job_id);
CREATE TABLE IF NOT EXISTS forgotten_attempts (
    cluster_id INTEGER NOT NULL REFERENCES clusters(id) ON DELETE CASCADE,
    attempt_id TEXT NOT NULL,
    state TEXT NOT NULL,
    ended_at REAL NOT NULL,
    PRIMARY KEY (cluster_id, attempt_id)
) WITHOUT ROWID;
"""
_ACTIVE_SQL = "('starting', 'running', 'stopping')"


def iso(epoch: float | None) -> str | None:
    if epoch is None:
        return None
    return dt.datetime.fromtimestamp(epoch, tz=dt.UTC).isoformat()


class _Transaction:
    def __init__(self, db: sqlite3.Connection) -> None:
        self.db = db
        self.outer = False

    def __enter__(self) -> _Transaction:
        self.outer = not self.db.in_transaction
        if self.outer:
            self.db.execute("BEGIN IMMEDIATE")
        return self

    def __exit__(self, exc_type: object, exc: object, tb: object) -> None:
        if not self.outer:
            return
        self.db.execute("ROLLBACK" if exc_type else "COMMIT")


def _host_dict(row: sqlite3.Row, used_gpus: int) -> dict[str, Any]:
    if row["failed"]:
        health, reason = "down", row["failed_reason"]
    else:
        health, reason = row["admin_health"], row["admin_reason"]
    return {
        "name": row["name"],
        "gpus": row["gpus"],
        "health": health,
        "reason": reason,
        "used_gpus": used_gpus,
        "failed": bool(row["failed"]),
        "admin_health": row["admin_health"],
        "changed_at": iso(row["changed_at"]),
    }


def _job_json(row: sqlite3.Row, now: float) -> str:
    """One job as JSON text (the placements are stored as JSON and embedded as they are:
    listing a thousand jobs is the request every scheduling cycle makes)."""
    dumps = json.dumps
    ended_at = row["ended_at"]
    # It ran if it left `starting` before it was asked to stop or ended: a job stopped
    # while starting never runs. Fixed once the job is in a state, as the cache needs.
    limit = min(t for t in (now, ended_at, row["stop_requested_at"]) if t is not None)
    ran = row["running_at"] <= limit
    return (
        f'{{"job_id":{row["id"]},"attempt_id":{dumps(row["attempt_id"] or "")},'
        f'"name":{dumps(row["name"])},"project":{dumps(row["project"])},'
        f'"gpus":{row["gpus"]},"state":"{row["state"]}","placements":{row["placements"]},'
        f'"run_for_s":{dumps(row["run_for_s"])},'
        f'"submitted_at":{dumps(iso(row["submitted_at"]))},'
        f'"started_at":{dumps(iso(row["running_at"]) if ran else None)},'
        f'"stop_requested_at":{dumps(iso(row["stop_requested_at"]))},'
        f'"ended_at":{dumps(iso(ended_at))},"detail":{dumps(row["detail"])}}}'
    )


def _job_dict(row: sqlite3.Row, now: float) -> dict[str, Any]:
    job: dict[str, Any] = json.loads(_job_json(row, now))
    return job


def _refuse_busy(
    db: sqlite3.Connection, cluster: sqlite3.Row, placements: list[dict[str, Any]]
) -> None:
    """Refuse (409 gpus_busy) placements on GPUs an active job holds, naming the holders."""
    for p in placements:
        marks = ", ".join("?" * len(p["gpu_indices"]))
        rows = db.execute(
            "SELECT g.gpu, j.id, j.attempt_id, j.state FROM job_gpus g"
            " JOIN jobs j ON j.id = g.job_id WHERE g.cluster_id = ? AND g.host = ?"
            f" AND g.gpu IN ({marks}) AND j.state IN {_ACTIVE_SQL} ORDER BY g.gpu",
            (cluster["id"], p["host"], *p["gpu_indices"]),
        ).fetchall()
        if rows:
            holders = sorted(
                {
                    f"job {r['id']} ({'attempt ' + r['attempt_id'] if r['attempt_id'] else 'foreign'}, {r['state']})"
                    for r in rows
                }
            )
            raise SimError(
                409,
                "gpus_busy",
                f"GPUs {', '.join(str(r['gpu']) for r in rows)} of host {p['host']} are "
                f"held by {'; '.join(holders)}",
            )
