"""The worker object: what one worker process keeps between cycles, and the entry to
a cycle (`CycleWorker.run`).

A process creates one `CycleWorker` and passes it to whatever runs cycles there (the
Celery tasks hold theirs: `scheduler.tasks`; a test or a command may make its own). It
owns the warm engine state per cluster and the Redis client of the cycle requests.
Nothing of it is module-level. A cycle first applies the budget changes now due
(`budgets.services.budget_apply_due_changes`; beat applies them too): reading a
snapshot never writes."""

from __future__ import annotations

import datetime as dt

import redis
from django.conf import settings

from budgets.services import budget_apply_due_changes
from scheduler.adapters import ClusterAdapter
from scheduler.cycle.context import CycleContext
from scheduler.cycle.lock import cluster_cycle_lock
from scheduler.cycle.run import cycle_steps_run
from scheduler.cycle.warm import ClusterWarm
from scheduler.models import Cluster, CycleRecord


class CycleWorker:
    """Runs cycles and keeps what they reuse (see the module docstring)."""

    def __init__(self) -> None:
        self._warm: dict[int, ClusterWarm] = {}
        self._redis: redis.Redis | None = None
        self._redis_url = ""

    def run(
        self,
        *,
        cluster_id: int,
        now: dt.datetime | None = None,
        adapter: ClusterAdapter | None = None,
        reconcile_only: bool = False,
    ) -> CycleRecord | None:
        """Run one scheduling cycle of a cluster (scheduler.cycle) under its advisory
        lock. Returns its `CycleRecord`, or None when another cycle of the cluster is
        running. `now` fixes the cycle's clock (tests); `adapter` replaces the
        cluster's own; `reconcile_only` stops after the reconcile (the reconcile after
        a restore, scheduler.services.restore: nothing is planned, started or
        stopped). A cycle that fails drops the cluster's warm state."""
        if not reconcile_only:  # first, so that this decision uses the weights now due
            budget_apply_due_changes(now=now)
        with cluster_cycle_lock(cluster_id) as taken:
            if not taken:
                return None
            cluster = Cluster.objects.get(pk=cluster_id)
            ctx = CycleContext(
                cluster,
                self._warm.setdefault(cluster_id, ClusterWarm()),
                now=now,
                adapter=adapter,
                reconcile_only=reconcile_only,
            )
            try:
                return cycle_steps_run(ctx)
            except Exception:
                self.reset(cluster_id)
                raise

    def reset(self, cluster_id: int | None = None) -> None:
        """Forget the warm state of one cluster (or all): the next plan is cold, stops
        are sent again, the queue is stored in full."""
        if cluster_id is None:
            self._warm.clear()
        else:
            self._warm.pop(cluster_id, None)

    def redis_client(self) -> redis.Redis:
        """The Redis client of the cycle requests (`settings.REDIS_URL`, short timeouts:
        an outage must not hold up the caller), made on first use and again when the
        setting changes."""
        url = settings.REDIS_URL
        if self._redis is None or self._redis_url != url:
            self._redis = redis.Redis.from_url(url, socket_connect_timeout=0.5, socket_timeout=0.5)
            self._redis_url = url
        return self._redis
