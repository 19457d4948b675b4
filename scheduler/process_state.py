"""What a web or worker process keeps between its requests, owned by the scheduler app
(made once per process in `SchedulerConfig.ready`, never a module's global): its copies
of the clusters' stored queues (`scheduler.selectors.queue.stored_queue`), the room of
their healthy hosts as of that queue (`scheduler.selectors.room`) and its
Redis connection pools (`scheduler.cycle_requests.redis_client`)."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any

import redis
from django.apps import apps


@dataclass
class ProcessState:
    # (database name, cluster id) -> the StoredQueue this process read last
    queue_copies: dict[tuple[str, int], Any] = field(default_factory=dict)
    queue_copies_lock: threading.Lock = field(default_factory=threading.Lock)
    # (database name, cluster id) -> the room read for that queue version (`room._room_facts`)
    rooms: dict[tuple[str, int], Any] = field(default_factory=dict)
    # (pid, Redis URL) -> pool: a forked child makes its own
    redis_pools: dict[tuple[int, str], redis.ConnectionPool] = field(default_factory=dict)


def process_state() -> ProcessState:
    """This process's state (the scheduler app's)."""
    return apps.get_app_config("scheduler").process_state
