"""How the services ask for work from the workers: a scheduling cycle of a cluster, or a
refresh of its ETAs. The one module below the services that reaches the task queue,
so that no service imports `scheduler.tasks` (which imports the services).

- `request_cycle(cluster_id)`: a cycle once the current transaction commits (at once
  outside a transaction), debounced: at most one queued per cluster (`QUEUED_KEY`, which
  the cycle clears when it starts; it expires on its own so a lost task never blocks
  requests for long).
- `request_cycles_all()`: the same for every cluster (a budget change touches them all;
  `budgets` sends `budgets.signals.tree_changed` on commit, connected here in
  `SchedulerConfig.ready`).
- `request_eta_refresh(cluster_id)`: an ETA refresh unless one is queued or running.
- `send(task_name, *args)`: any other task, at once (a what-if preview run).

Tasks are queued by name through the Celery app, never by importing them. A broker or
Redis outage is logged, never raised: the write that asked still succeeds, and beat
brings cycles back when Redis returns. Requests share their process's Redis pool
(`scheduler.process_state`).
"""

from __future__ import annotations

import logging
import os

import redis
from celery import current_app
from django.apps import apps
from django.conf import settings
from django.db import transaction

from scheduler.process_state import process_state

log = logging.getLogger(__name__)

RUN_CYCLE = "scheduler.run_cycle"
REFRESH_ETAS = "scheduler.refresh_etas"
PREVIEW_RUN = "scheduler.preview_run"
# Debounce key of a queued cycle; cleared when the cycle starts, expires on its own so
# a lost task never blocks requests for long.
QUEUED_KEY = "allot:cycle-queued:{cluster_id}"
QUEUED_TTL_S = 30
# Debounce key of a queued or running ETA refresh; cleared when it ends, and expires on
# its own so a worker lost mid-refresh never stops refreshes for long.
ETA_QUEUED_KEY = "allot:eta-queued:{cluster_id}"
ETA_QUEUED_TTL_S = 120


def redis_client() -> redis.Redis:
    """A Redis client for one request, with short timeouts (an outage must not hold
    up the write that asked), on this process's pool: a submission reuses a connection
    instead of opening one (closing the client leaves the pool's connections open)."""
    pools = process_state().redis_pools
    key = (os.getpid(), settings.REDIS_URL)
    pool = pools.get(key)
    if pool is None:
        pool = redis.ConnectionPool.from_url(
            settings.REDIS_URL, socket_connect_timeout=0.5, socket_timeout=0.5
        )
        pools[key] = pool
    return redis.Redis(connection_pool=pool)


def send(task_name: str, *args: object) -> None:
    """Queue the task `task_name` with `args` by its name: through the task object where
    this process registered it (workers; eager mode runs it here), else through the
    broker. Raises what the broker raises."""
    app = current_app
    if task_name not in app.tasks:
        app.loader.import_default_modules()  # registers the apps' tasks (once per process)
    task = app.tasks.get(task_name)
    if task is not None:
        task.apply_async(args, retry=False)
    else:
        app.send_task(task_name, args, retry=False)


def _queue_once(task_name: str, cluster_id: int, key: str, ttl_s: int, what: str) -> bool:
    """Queue `task_name(cluster_id)` unless its debounce `key` is set (one queued
    already); never raises: a Redis or broker outage is logged."""
    try:
        client = redis_client()
        try:
            if not client.set(key.format(cluster_id=cluster_id), 1, nx=True, ex=ttl_s):
                return False
        finally:
            client.close()
        send(task_name, cluster_id)
        return True
    except Exception as exc:
        log.warning("could not queue %s of cluster %s: %s", what, cluster_id, exc)
        return False


def enqueue_cycle(cluster_id: int) -> bool:
    """Queue a cycle now unless one is queued already; never raises."""
    return _queue_once(RUN_CYCLE, cluster_id, QUEUED_KEY, QUEUED_TTL_S, "a cycle")


def request_cycle(cluster_id: int) -> None:
    """Ask for a cycle of the cluster once the current transaction commits (at once
    outside a transaction); debounced, and never fails the caller."""
    transaction.on_commit(lambda: enqueue_cycle(cluster_id))


def request_cycles_all(**_signal) -> None:
    """`request_cycle` for every cluster (a budget change touches them all); also the
    receiver of `budgets.signals.tree_changed`."""
    clusters = apps.get_model("scheduler", "Cluster")  # this module loads before the models
    for cluster_id in clusters.objects.values_list("pk", flat=True):
        request_cycle(cluster_id)


def request_eta_refresh(cluster_id: int) -> bool:
    """Queue an ETA refresh of the cluster unless one is queued or running; never
    raises (without Redis the pages show no ETA until it returns)."""
    return _queue_once(REFRESH_ETAS, cluster_id, ETA_QUEUED_KEY, ETA_QUEUED_TTL_S, "an ETA refresh")
