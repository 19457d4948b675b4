"""The built-in health checks: database and broker (what a web process needs), the
scheduler's state (beat, workers, every cluster's cycles, the restore pause) and the
background queue's worker (previews, ETAs, utilization, rollups)."""

from __future__ import annotations

from django.conf import settings
from django.db import connection

from ops.health import Check
from ops.selectors import queue_health, scheduling_health
from ops.worker_database import ping_broker

TIMEOUT_S = 2.0
BACKGROUND_WORKER = "background worker"  # what `/healthz` names when it is not alive


def database() -> dict:
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1")
        cursor.fetchone()
    return {"ok": True}


def broker() -> dict:
    if not ping_broker(TIMEOUT_S):
        return {"ok": True, "note": "not a Redis broker; not checked"}
    return {"ok": True}


def scheduling() -> dict:
    """Every cluster had a cycle that read it within ALLOT_STALE_CYCLES periods, beat and
    a worker beat recently, scheduling is not paused (ops.selectors.scheduling_health)."""
    return scheduling_health().as_dict()


def background() -> dict:
    """A worker of the background queue beat recently (the same heartbeats and freshness
    as the scheduling check's workers). Not critical: cycles go on without it, while
    previews stay queued and ETAs, utilization and rollups stop being refreshed."""
    return queue_health(settings.BACKGROUND_QUEUE, BACKGROUND_WORKER).as_dict()


# What `/healthz` runs, in this order (`/healthz/web` only the `web` ones).
CHECKS = (
    Check("database", database, critical=True, web=True),
    Check("broker", broker, critical=True, web=True),
    Check("scheduling", scheduling, critical=True, web=False),
    Check("background", background, critical=False, web=False),
)
