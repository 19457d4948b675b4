"""The simulated clusters' state: SQLite in the state directory, advanced lazily.

Every time is stored as wall-clock epoch seconds. A job's planned end (`end_at`, with
the state and detail it ends in) is computed when it starts or is stopped, from
simulated durations divided by the cluster's speed; each request first *advances* the
cluster to now (starting -> running, planned ends come true at their planned time),
so nothing depends on how often anyone polls, and a restarted process resumes where
the wall clock is. Ended jobs are reported for `retention_s` wall seconds (and at most
`max_ended` of them), then forgotten; a forgotten attempt id is remembered so that a
late start with it is refused instead of running the attempt twice.

`SimState` is not thread-safe: the server calls it from one event loop. What a request
may ask (limits, field checks, `SimError`) is in `rules`; the schema, the write
transaction and rows as JSON in `db`.
"""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from scheduler.adapters.simcluster import host_names
from scheduler.adapters.simcluster.db import (
    _ACTIVE_SQL,
    SCHEMA,
    _host_dict,
    _job_dict,
    _job_json,
    _refuse_busy,
    _Transaction,
    iso,
)
from scheduler.adapters.simcluster.rules import (
    ACTIVE_STATES,
    ADMIN_HEALTH,
    DEFAULTS,
    FORGET_EVERY_S,
    FORGOTTEN_KEPT_S,
    LIMITS,
    NAME_RE,
    SimError,
    _bad,
    _integer,
    _number,
    _placement_shape,
    _text,
)
from scheduler.core.utilization import profile_for

__all__ = ["SimError", "SimState"]


class SimState:
    """All simulated clusters of one process, stored in `<state_dir>/simcluster.sqlite3`."""

    def __init__(
        self,
        state_dir: Path,
        *,
        clock: Callable[[], float] = time.time,
        defaults: Mapping[str, Any] | None = None,
    ) -> None:
        state_dir.mkdir(parents=True, exist_ok=True)
        self.path = state_dir / "simcluster.sqlite3"
        self.clock = clock
        self.defaults = {**DEFAULTS, **(defaults or {})}
        self.db = sqlite3.connect(self.path, isolation_level=None)
        self.db.row_factory = sqlite3.Row
        self.db.execute("PRAGMA journal_mode = WAL")
        self.db.execute("PRAGMA synchronous = NORMAL")  # durable across a process crash
        self.db.execute("PRAGMA foreign_keys = ON")
        self._migrate()
        self.db.executescript(SCHEMA)
        self._last_forget: dict[int, float] = {}
        # job id -> (state, JSON text): what `jobs_json` rendered for the job's state
        self._job_texts: dict[int, tuple[str, str]] = {}

    def close(self) -> None:
        self.db.close()

    def _migrate(self) -> None:
        """Bring a state directory written by an older version up to this schema."""
        columns = {row["name"] for row in self.db.execute("PRAGMA table_info(jobs)")}
        if columns and "ended_seen_at" not in columns:
            # ends already there count as first reported now: a full retention period
            with self._write():
                self.db.execute("ALTER TABLE jobs ADD COLUMN ended_seen_at REAL")
                self.db.execute(
                    "UPDATE jobs SET ended_seen_at = ? WHERE ended_at IS NOT NULL", (self.clock(),)
                )
                self.db.execute("DROP INDEX IF EXISTS jobs_ended")
        if columns and "profile" not in columns:  # older state: every job trains
            self.db.execute("ALTER TABLE jobs ADD COLUMN profile TEXT NOT NULL DEFAULT 'training'")

    def _write(self) -> _Transaction:
        """A write transaction (BEGIN IMMEDIATE ... COMMIT, rolled back on error)."""
        return _Transaction(self.db)

    # clusters

    def _cluster(self, name: str) -> sqlite3.Row:
        row: sqlite3.Row | None = self.db.execute(
            "SELECT * FROM clusters WHERE name = ?", (name,)
        ).fetchone()
        if row is None:
            raise SimError(404, "unknown_cluster", f"there is no simulated cluster named {name!r}")
        return row

    def put_cluster(self, name: str, body: Mapping[str, Any]) -> tuple[dict[str, Any], bool]:
        """Create the cluster, or return it when it exists with the same shape (settings
        given in `body` are updated). Returns (cluster, created)."""
        if not NAME_RE.match(name):
            raise _bad("name", "letters, digits, '.', '_' or '-', at most 100 characters")
        host_count = _integer(body, "hosts", None, 1, 100_000)
        gpus_per_host = _integer(body, "gpus_per_host", None, 1, 1024)
        settings = {}
        for field, (low, high) in LIMITS.items():
            if field == "max_ended":
                value = _integer(body, field, self.defaults[field], int(low), int(high))
            else:
                value = _number(body, field, self.defaults[field], low, high)
            if field in body:
                settings[field] = value
        existing = self.db.execute("SELECT * FROM clusters WHERE name = ?", (name,)).fetchone()
        with self._write():
            if existing is not None:
                if (existing["host_count"], existing["gpus_per_host"]) != (
                    host_count,
                    gpus_per_host,
                ):
                    raise SimError(
                        409,
                        "cluster_exists",
                        f"cluster {name!r} exists with {existing['host_count']} hosts x "
                        f"{existing['gpus_per_host']} GPUs, not {host_count} x {gpus_per_host}: "
                        "delete it first or choose another name",
                    )
                for field, value in settings.items():
                    self.db.execute(
                        f"UPDATE clusters SET {field} = ? WHERE id = ?", (value, existing["id"])
                    )
                created = False
            else:
                values = {field: self.defaults[field] for field in LIMITS} | settings
                cursor = self.db.execute(
                    "INSERT INTO clusters (name, host_count, gpus_per_host, speed, start_delay_s,"
                    " exit_delay_s, retention_s, max_ended, created_at)"
                    " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    (
                        name,
                        host_count,
                        gpus_per_host,
                        values["speed"],
                        values["start_delay_s"],
                        values["exit_delay_s"],
                        values["retention_s"],
                        values["max_ended"],
                        self.clock(),
                    ),
                )
                self.db.executemany(
                    "INSERT INTO hosts (cluster_id, name, position, gpus) VALUES (?, ?, ?, ?)",
                    [
                        (cursor.lastrowid, host, i, gpus_per_host)
                        for i, host in enumerate(host_names(host_count))
                    ],
                )
                created = True
        return self.get_cluster(name), created

    def get_cluster(self, name: str) -> dict[str, Any]:
        row = self._cluster(name)
        return {
            "name": row["name"],
            "host_count": row["host_count"],
            "gpus_per_host": row["gpus_per_host"],
            "speed": row["speed"],
            "start_delay_s": row["start_delay_s"],
            "exit_delay_s": row["exit_delay_s"],
            "retention_s": row["retention_s"],
            "max_ended": row["max_ended"],
            "pending_start_timeouts": row["start_timeouts"],
            "created_at": iso(row["created_at"]),
            "now": iso(self.clock()),
            "hosts": self.hosts(name),
        }

    def list_clusters(self) -> list[str]:
        return [r["name"] for r in self.db.execute("SELECT name FROM clusters ORDER BY name")]

    def delete_cluster(self, name: str) -> None:
        row = self._cluster(name)
        with self._write():
            self.db.execute("DELETE FROM job_gpus WHERE cluster_id = ?", (row["id"],))
            self.db.execute("DELETE FROM clusters WHERE id = ?", (row["id"],))
        self._job_texts.clear()

    # the clock

    def _advance(self, cluster: sqlite3.Row, now: float) -> None:
        """Bring the cluster's jobs to `now`: planned ends come true, starts run."""
        cid = cluster["id"]
        self.db.execute(
            "UPDATE jobs SET state = end_state, ended_at = end_at, ended_seen_at = ?,"
            f" detail = end_detail WHERE cluster_id = ? AND state IN {_ACTIVE_SQL} AND end_at <= ?",
            (now, cid, now),
        )
        self.db.execute(
            "UPDATE jobs SET state = 'running'"
            " WHERE cluster_id = ? AND state = 'starting' AND running_at <= ?",
            (cid, now),
        )
        if now - self._last_forget.get(cid, 0.0) >= FORGET_EVERY_S:
            self._last_forget[cid] = now
            self._forget(cluster, now)

    def _forget(self, cluster: sqlite3.Row, now: float) -> None:
        """Forget jobs reported ended for longer than the retention period (or beyond
        the count), remembering their attempt ids."""
        cid = cluster["id"]
        horizon = now - cluster["retention_s"]
        (ended,) = self.db.execute(
            "SELECT COUNT(*) FROM jobs WHERE cluster_id = ? AND ended_seen_at IS NOT NULL", (cid,)
        ).fetchone()
        if ended > cluster["max_ended"]:  # forget the oldest beyond the count as well
            (newest_forgotten,) = self.db.execute(
                "SELECT ended_seen_at FROM jobs WHERE cluster_id = ? AND ended_seen_at IS NOT NULL"
                " ORDER BY ended_seen_at DESC LIMIT 1 OFFSET ?",
                (cid, cluster["max_ended"]),
            ).fetchone()
            horizon = max(horizon, newest_forgotten + 1e-6)
        self.db.execute(
            "INSERT OR REPLACE INTO forgotten_attempts (cluster_id, attempt_id, state, ended_at)"
            " SELECT cluster_id, attempt_id, state, ended_at FROM jobs"
            " WHERE cluster_id = ? AND ended_seen_at < ? AND attempt_id IS NOT NULL",
            (cid, horizon),
        )
        gone = self.db.execute(
            "DELETE FROM jobs WHERE cluster_id = ? AND ended_seen_at < ? RETURNING id",
            (cid, horizon),
        ).fetchall()
        for (job_id,) in gone:
            self._job_texts.pop(job_id, None)
        self.db.execute(
            "DELETE FROM forgotten_attempts WHERE cluster_id = ? AND ended_at < ?",
            (cid, now - FORGOTTEN_KEPT_S),
        )

    def _advanced(self, name: str) -> tuple[sqlite3.Row, float]:
        cluster = self._cluster(name)
        now = self.clock()
        with self._write():
            self._advance(cluster, now)
        return cluster, now

    # hosts

    def hosts(self, name: str) -> list[dict[str, Any]]:
        cluster = self._cluster(name)
        used = dict(
            self.db.execute(
                "SELECT g.host, COUNT(*) FROM job_gpus g JOIN jobs j ON j.id = g.job_id"
                f" WHERE g.cluster_id = ? AND j.state IN {_ACTIVE_SQL} GROUP BY g.host",
                (cluster["id"],),
            ).fetchall()
        )
        rows = self.db.execute(
            "SELECT * FROM hosts WHERE cluster_id = ? ORDER BY position", (cluster["id"],)
        )
        return [_host_dict(row, used.get(row["name"], 0)) for row in rows]

    def _host(self, cluster: sqlite3.Row, host: str) -> sqlite3.Row:
        row: sqlite3.Row | None = self.db.execute(
            "SELECT * FROM hosts WHERE cluster_id = ? AND name = ?", (cluster["id"], host)
        ).fetchone()
        if row is None:
            raise SimError(
                404, "unknown_host", f"cluster {cluster['name']!r} has no host named {host!r}"
            )
        return row

    def set_host_health(self, name: str, host: str, body: Mapping[str, Any]) -> dict[str, Any]:
        """Drain (`draining`), resume (`healthy`) or take down (`down`: its jobs are
        lost) a host, as `scontrol update nodename=... state=...` would."""
        health = _text(body, "health", required=True)
        if health not in ADMIN_HEALTH:
            raise _bad("health", f"must be one of {', '.join(ADMIN_HEALTH)}, got {health!r}")
        reason = _text(body, "reason")
        cluster, now = self._advanced(name)
        self._host(cluster, host)
        with self._write():
            self.db.execute(
                "UPDATE hosts SET admin_health = ?, admin_reason = ?, changed_at = ?"
                " WHERE cluster_id = ? AND name = ?",
                (health, reason, now, cluster["id"], host),
            )
            if health == "down":
                self._lose_jobs_on(cluster, host, now, f"host {host} was set down: {reason}")
        return self._host_view(cluster, host)

    def fail_host(self, name: str, host: str, reason: str) -> dict[str, Any]:
        """The host fails (control endpoint): it is down and every job on it is lost."""
        cluster, now = self._advanced(name)
        self._host(cluster, host)
        reason = reason or "simulated failure"
        with self._write():
            self.db.execute(
                "UPDATE hosts SET failed = 1, failed_reason = ?, changed_at = ?"
                " WHERE cluster_id = ? AND name = ?",
                (reason, now, cluster["id"], host),
            )
            self._lose_jobs_on(cluster, host, now, f"host {host} failed: {reason}")
        return self._host_view(cluster, host)

    def recover_host(self, name: str, host: str) -> dict[str, Any]:
        """The failed host is back (an admin drain or down set on it stays)."""
        cluster, now = self._advanced(name)
        self._host(cluster, host)
        with self._write():
            self.db.execute(
                "UPDATE hosts SET failed = 0, failed_reason = '', changed_at = ?"
                " WHERE cluster_id = ? AND name = ?",
                (now, cluster["id"], host),
            )
        return self._host_view(cluster, host)

    def _host_view(self, cluster: sqlite3.Row, host: str) -> dict[str, Any]:
        return next(h for h in self.hosts(cluster["name"]) if h["name"] == host)

    def _lose_jobs_on(self, cluster: sqlite3.Row, host: str, now: float, detail: str) -> None:
        self.db.execute(
            "UPDATE jobs SET state = 'lost', ended_at = ?, ended_seen_at = ?, detail = ?"
            f" WHERE state IN {_ACTIVE_SQL} AND id IN"
            " (SELECT job_id FROM job_gpus WHERE cluster_id = ? AND host = ?)",
            (now, now, detail, cluster["id"], host),
        )

    # jobs

    def jobs(self, name: str) -> list[dict[str, Any]]:
        """Active jobs and jobs ended within the retention period, oldest first."""
        jobs: list[dict[str, Any]] = json.loads(self.jobs_json(name))["jobs"]
        return jobs

    def jobs_json(self, name: str) -> str:
        """`jobs()` as the JSON text `{"jobs": [...]}`, the request of every scheduling
        cycle. A job's text depends only on its state (its times are fixed once reached),
        so it is rendered once per state and kept until the job is forgotten: only jobs
        whose state changed since the last listing are read in full."""
        cluster, now = self._advanced(name)
        listed = self.db.execute(
            "SELECT id, state FROM jobs WHERE cluster_id = ? ORDER BY id", (cluster["id"],)
        ).fetchall()
        cache = self._job_texts
        changed = [job_id for job_id, state in listed if cache.get(job_id, ("",))[0] != state]
        for start in range(0, len(changed), 500):
            chunk = changed[start : start + 500]
            marks = ", ".join("?" * len(chunk))
            for row in self.db.execute(f"SELECT * FROM jobs WHERE id IN ({marks})", chunk):
                cache[row["id"]] = (row["state"], _job_json(row, now))
        return '{"jobs":[' + ",".join(cache[job_id][1] for job_id, _ in listed) + "]}"

    def job(
        self, name: str, *, attempt_id: str | None = None, job_id: int | None = None
    ) -> dict[str, Any]:
        cluster, now = self._advanced(name)
        return _job_dict(self._job_row(cluster, attempt_id=attempt_id, job_id=job_id), now)

    def _job_row(
        self, cluster: sqlite3.Row, *, attempt_id: str | None = None, job_id: int | None = None
    ) -> sqlite3.Row:
        if attempt_id is not None:
            row: sqlite3.Row | None = self.db.execute(
                "SELECT * FROM jobs WHERE cluster_id = ? AND attempt_id = ?",
                (cluster["id"], attempt_id),
            ).fetchone()
            what = f"attempt {attempt_id!r}"
        else:
            row = self.db.execute(
                "SELECT * FROM jobs WHERE cluster_id = ? AND id = ?", (cluster["id"], job_id)
            ).fetchone()
            what = f"job {job_id}"
        if row is None:
            raise SimError(404, "unknown_job", f"cluster {cluster['name']!r} has no {what}")
        return row

    def start(self, name: str, body: Mapping[str, Any]) -> tuple[dict[str, Any], bool, float]:
        """Start an attempt on exactly the GPUs asked, or return the job that already
        carries its attempt id (adopt). Returns (job, created, delay before answering)."""
        attempt_id = _text(body, "attempt_id", required=True)
        cluster, now = self._advanced(name)
        existing = self.db.execute(
            "SELECT * FROM jobs WHERE cluster_id = ? AND attempt_id = ?",
            (cluster["id"], attempt_id),
        ).fetchone()
        if existing is not None:
            return _job_dict(existing, now), False, 0.0
        forgotten = self.db.execute(
            "SELECT * FROM forgotten_attempts WHERE cluster_id = ? AND attempt_id = ?",
            (cluster["id"], attempt_id),
        ).fetchone()
        if forgotten is not None:
            raise SimError(
                409,
                "attempt_ended",
                f"attempt {attempt_id!r} already ran on this cluster and ended "
                f"({forgotten['state']}) at {iso(forgotten['ended_at'])}; it is not started "
                "again: a new start needs a new attempt id",
            )
        with self._write():
            job = self._insert_job(cluster, body, now, attempt_id=attempt_id)
            delay = 0.0
            if cluster["start_timeouts"] > 0:
                self.db.execute(
                    "UPDATE clusters SET start_timeouts = start_timeouts - 1 WHERE id = ?",
                    (cluster["id"],),
                )
                delay = cluster["start_timeout_delay_s"]
        return job, True, delay

    def create_foreign(self, name: str, body: Mapping[str, Any]) -> dict[str, Any]:
        """A job started outside Allot (no attempt id), holding the GPUs it names."""
        cluster, now = self._advanced(name)
        with self._write():
            return self._insert_job(cluster, body, now, attempt_id=None)

    def _insert_job(
        self, cluster: sqlite3.Row, body: Mapping[str, Any], now: float, *, attempt_id: str | None
    ) -> dict[str, Any]:
        placements = self._checked_placements(cluster, body.get("placements"))
        held = sum(len(p["gpu_indices"]) for p in placements)
        gpus = _integer(body, "gpus", held, 1, 1_000_000)
        if gpus != held:
            raise _bad("gpus", f"is {gpus} but the placements name {held} GPUs")
        run_for_s = _number(body, "run_for_s", None, 0.0, 1e9)
        grace_s = _number(body, "grace_s", 30.0, 0.0, 1e6)
        spec = body.get("spec") or {}
        if not isinstance(spec, dict):
            raise _bad("spec", "must be an object")
        simulate = spec.get("simulate") or {}
        if not isinstance(simulate, dict):
            raise _bad("spec.simulate", "must be an object")
        exit_code = _integer(simulate, "exit_code", 0, -255, 255)
        exit_delay_s = _number(simulate, "exit_delay_s", None, 0.0, 1e9)
        start_delay_s = _number(simulate, "start_delay_s", cluster["start_delay_s"], 0.0, 1e9)
        speed = cluster["speed"]
        running_at = now + start_delay_s / speed
        end_at = None if run_for_s is None else running_at + run_for_s / speed
        ended_ok = exit_code == 0
        job_name = _text(body, "job_name", "job" if attempt_id else "foreign job")
        cursor = self.db.execute(
            "INSERT INTO jobs (cluster_id, attempt_id, name, project, gpus, placements, spec,"
            " run_for_s, grace_s, exit_delay_s, state, submitted_at, running_at, end_at,"
            " end_state, end_detail, profile)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                cluster["id"],
                attempt_id,
                job_name,
                _text(body, "project"),
                gpus,
                json.dumps(placements, separators=(",", ":")),
                json.dumps(spec),
                run_for_s,
                grace_s,
                exit_delay_s,
                "running" if running_at <= now else "starting",
                now,
                running_at,
                end_at,
                "succeeded" if ended_ok else "failed",
                f"exit code {exit_code}" if ended_ok else f"exit code {exit_code} (failed)",
                profile_for(kind=_text(body, "kind"), spec=spec, key=job_name),
            ),
        )
        job_id = cursor.lastrowid
        self.db.executemany(
            "INSERT INTO job_gpus (job_id, cluster_id, host, gpu) VALUES (?, ?, ?, ?)",
            [
                (job_id, cluster["id"], p["host"], gpu)
                for p in placements
                for gpu in p["gpu_indices"]
            ],
        )
        return _job_dict(self._job_row(cluster, job_id=job_id), now)

    def _checked_placements(self, cluster: sqlite3.Row, raw: Any) -> list[dict[str, Any]]:
        """Placements as asked, or a refusal naming what is wrong (a start on a host that
        is not healthy or on GPUs that are busy is the scheduler's bug, never accepted)."""
        if not isinstance(raw, list) or not raw:
            raise _bad("placements", "must be a non-empty list of {host, gpu_indices}")
        placements: list[dict[str, Any]] = []
        seen_hosts: set[str] = set()
        for i, item in enumerate(raw):
            field = f"placements[{i}]"
            host_name, indices = _placement_shape(item, field, seen_hosts)
            host = self._host(cluster, host_name)
            if len(set(indices)) != len(indices) or not all(0 <= g < host["gpus"] for g in indices):
                raise _bad(
                    f"{field}.gpu_indices",
                    f"must be distinct indices 0..{host['gpus'] - 1} of host {host_name}, "
                    f"got {indices}",
                )
            view = _host_dict(host, 0)
            if view["health"] != "healthy":
                raise SimError(
                    409,
                    f"host_{view['health']}",
                    f"host {host_name} is {view['health']}"
                    + (f" ({view['reason']})" if view["reason"] else "")
                    + ": it takes no new jobs",
                )
            placements.append({"host": host_name, "gpu_indices": sorted(indices)})
        _refuse_busy(self.db, cluster, placements)
        return placements

    def stop(self, name: str, attempt_id: str, body: Mapping[str, Any]) -> dict[str, Any]:
        """A graceful stop: the job exits after its exit delay, or is killed at the end
        of the grace period if it would take longer. Idempotent."""
        grace_s = _number(body, "grace_s", 30.0, 0.0, 1e6)
        cluster, now = self._advanced(name)
        row = self._job_row(cluster, attempt_id=attempt_id)
        if row["state"] not in ACTIVE_STATES or row["state"] == "stopping":
            return _job_dict(row, now)
        exit_delay = row["exit_delay_s"]
        if exit_delay is None:
            exit_delay = cluster["exit_delay_s"]
        if exit_delay <= grace_s:
            stop_at = now + exit_delay / cluster["speed"]
            detail = f"stopped: exited {exit_delay:g} s (simulated) after the stop signal"
        else:
            stop_at = now + grace_s / cluster["speed"]
            detail = f"stopped: killed at the end of the {grace_s:g} s grace period"
        with self._write():
            if row["end_at"] is None or row["end_at"] > stop_at:
                self.db.execute(
                    "UPDATE jobs SET state = 'stopping', stop_requested_at = ?, end_at = ?,"
                    " end_state = 'stopped', end_detail = ? WHERE id = ?",
                    (now, stop_at, detail, row["id"]),
                )
            else:  # it finishes on its own before the stop would take effect
                self.db.execute(
                    "UPDATE jobs SET state = 'stopping', stop_requested_at = ? WHERE id = ?",
                    (now, row["id"]),
                )
            self._advance(cluster, now)
        return _job_dict(self._job_row(cluster, job_id=row["id"]), now)

    def cancel(
        self,
        name: str,
        reason: str,
        *,
        attempt_id: str | None = None,
        job_id: int | None = None,
    ) -> dict[str, Any]:
        """Cancelled outside Allot (like `scancel`): ends now as `cancelled`."""
        cluster, now = self._advanced(name)
        row = self._job_row(cluster, attempt_id=attempt_id, job_id=job_id)
        if row["state"] in ACTIVE_STATES:
            with self._write():
                self.db.execute(
                    "UPDATE jobs SET state = 'cancelled', ended_at = ?, ended_seen_at = ?,"
                    " detail = ? WHERE id = ?",
                    (
                        now,
                        now,
                        f"cancelled outside Allot: {reason or 'no reason given'}",
                        row["id"],
                    ),
                )
        return _job_dict(self._job_row(cluster, job_id=row["id"]), now)

    def set_faults(self, name: str, body: Mapping[str, Any]) -> dict[str, Any]:
        """Test hook: the next `start_timeouts` new starts are accepted but answered only
        after `delay_s` wall seconds (longer than the adapter waits: it sees a timeout
        although the cluster has the job)."""
        count = _integer(body, "start_timeouts", 0, 0, 1_000_000)
        delay = _number(body, "delay_s", 2.0, 0.0, 120.0)
        cluster = self._cluster(name)
        with self._write():
            self.db.execute(
                "UPDATE clusters SET start_timeouts = ?, start_timeout_delay_s = ? WHERE id = ?",
                (count, delay, cluster["id"]),
            )
        return {"start_timeouts": count, "delay_s": delay}
