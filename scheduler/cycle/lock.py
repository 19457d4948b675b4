"""The cycle's advisory lock: one cycle per cluster at a time, across all workers."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager

from django.db import connection

log = logging.getLogger(__name__)

# First key of pg_try_advisory_lock(int, int); the second is the cluster id.
CYCLE_LOCK_KEY = 0x416C6F74  # "Alot"


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
