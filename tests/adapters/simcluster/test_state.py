"""The simulated cluster's state store on its own (no process)."""

from __future__ import annotations

import sqlite3

from scheduler.adapters.simcluster.state import SimState


def test_a_state_directory_of_the_first_schema_is_brought_up_to_date(tmp_path):
    """State directories written before ends had a first-report time keep their jobs."""
    db = sqlite3.connect(tmp_path / "simcluster.sqlite3")
    db.executescript(
        """
        CREATE TABLE clusters (id INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE,
            host_count INTEGER NOT NULL, gpus_per_host INTEGER NOT NULL, speed REAL NOT NULL,
            start_delay_s REAL NOT NULL, exit_delay_s REAL NOT NULL, retention_s REAL NOT NULL,
            max_ended INTEGER NOT NULL, start_timeouts INTEGER NOT NULL DEFAULT 0,
            start_timeout_delay_s REAL NOT NULL DEFAULT 0, created_at REAL NOT NULL);
        CREATE TABLE jobs (id INTEGER PRIMARY KEY AUTOINCREMENT, cluster_id INTEGER NOT NULL,
            attempt_id TEXT, name TEXT NOT NULL, project TEXT NOT NULL, gpus INTEGER NOT NULL,
            placements TEXT NOT NULL, spec TEXT NOT NULL, run_for_s REAL, grace_s REAL NOT NULL,
            exit_delay_s REAL, state TEXT NOT NULL, submitted_at REAL NOT NULL,
            running_at REAL NOT NULL, end_at REAL, end_state TEXT NOT NULL,
            end_detail TEXT NOT NULL, stop_requested_at REAL, ended_at REAL,
            detail TEXT NOT NULL DEFAULT '', UNIQUE (cluster_id, attempt_id));
        CREATE INDEX jobs_ended ON jobs (cluster_id, ended_at);
        INSERT INTO clusters VALUES (1, 'old', 1, 8, 1, 0, 5, 1e9, 100, 0, 0, 0);
        INSERT INTO jobs (cluster_id, attempt_id, name, project, gpus, placements, spec,
            grace_s, state, submitted_at, running_at, end_at, end_state, end_detail, ended_at,
            detail)
        VALUES (1, 'a-1', 'j', '', 1, '[{"host":"h000","gpu_indices":[0]}]', '{}', 30,
            'succeeded', 1, 1, 2, 'succeeded', 'exit code 0', 2, 'exit code 0');
        """
    )
    db.close()
    state = SimState(tmp_path)
    try:
        jobs = state.jobs("old")
        assert [(j["attempt_id"], j["state"]) for j in jobs] == [("a-1", "succeeded")]
        columns = {r["name"] for r in state.db.execute("PRAGMA table_info(jobs)")}
        assert "ended_seen_at" in columns
    finally:
        state.close()


def test_listing_renders_a_job_again_only_when_its_state_changed(tmp_path):
    now = [1000.0]
    state = SimState(tmp_path, clock=lambda: now[0])
    state.put_cluster("c", {"hosts": 1, "gpus_per_host": 8, "start_delay_s": 10})
    placement = [{"host": "h000", "gpu_indices": [0]}]
    state.start("c", {"attempt_id": "a-1", "placements": placement, "run_for_s": 100})
    assert [j["state"] for j in state.jobs("c")] == ["starting"]
    now[0] += 10
    running = state.jobs("c")[0]
    assert (running["state"], running["started_at"]) == ("running", "1970-01-01T00:16:50+00:00")
    now[0] += 100
    ended = state.jobs("c")[0]
    assert (ended["state"], ended["ended_at"]) == ("succeeded", "1970-01-01T00:18:30+00:00")
    assert ended["detail"] == "exit code 0"
