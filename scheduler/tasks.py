"""Celery tasks of the live service: thin wrappers around the live cycle (`scheduler.cycle`).

- `run_cycle(cluster_id)`: one scheduling cycle under the cluster's advisory lock (a
  second concurrent one skips at once; clusters run in parallel on different workers).
- Cycles (and ETA refreshes, previews) are asked for through `scheduler.cycle_requests`
  (debounced, after commit, queued by task name), which the services call; `run_cycle`
  clears the debounce key when it starts.
- `enqueue_due_cycles()` (beat, every `ALLOT_CYCLE_TICK_S`): a cycle for every cluster
  whose last cycle started `cycle_s` ago or more.
- Neither runs nor queues a cycle while scheduling is paused (after a restore, until
  `manage.py reconcile_restore`: `ops.services.scheduling_gate_check`).
- `prune_cycle_records()` (beat, hourly): cycle records older than
  `ALLOT_CYCLE_RETENTION_DAYS` (30).
- `prune_idempotency_keys()` (beat, hourly): submission Idempotency-Keys past 24 h.
- `collect_utilization()` (beat, every `ALLOT_UTILIZATION_EVERY_S`): every cluster's
  GPU utilization since the last collection (`scheduler.services.utilization`), and
  the rows of attempts ended over a day ago merged into one each.
- `refresh_etas`: the ETAs of a cluster's pending
  jobs, computed by a worker (seconds on a large queue) for the job pages to read.

What a process keeps between tasks (the warm engine state per cluster, the Redis client
of the debounce keys) is one `CycleWorker`, owned by the `run_cycle` task object
(`run_cycle.worker`): Celery makes each task object once per process.
"""

from __future__ import annotations

import logging

from celery import shared_task
from django.conf import settings

from ops.services import cycle_high_water_record, scheduling_gate_check
from ops.worker_database import DatabaseAwareTask
from scheduler.cycle.beat import clusters_due, cycle_records_prune
from scheduler.cycle.worker import CycleWorker
from scheduler.cycle_requests import ETA_QUEUED_KEY, QUEUED_KEY, enqueue_cycle
from scheduler.models import Cluster
from scheduler.services.demo import demo_load_tick as tick
from scheduler.services.eta import cluster_etas
from scheduler.services.jobs import idempotency_keys_prune
from scheduler.services.previews import preview_run
from scheduler.services.utilization import utilization_collect, utilization_compact

log = logging.getLogger(__name__)


class CycleTask(DatabaseAwareTask):
    """The cycle task's class: its object (one per process, in Celery's registry) owns
    the process's `CycleWorker`, made on first use."""

    _worker: CycleWorker | None = None

    @property
    def worker(self) -> CycleWorker:
        if self._worker is None:
            self._worker = CycleWorker()
        return self._worker


@shared_task(name="scheduler.run_cycle", ignore_result=True, bind=True, base=CycleTask)
def run_cycle(self: CycleTask, cluster_id: int) -> dict | None:
    """One scheduling cycle of a cluster; None when another cycle holds its lock."""
    try:
        self.worker.redis_client().delete(QUEUED_KEY.format(cluster_id=cluster_id))
    except Exception as exc:  # the cycle still runs; debouncing resumes with Redis
        log.warning("could not clear the queued-cycle key of cluster %s: %s", cluster_id, exc)
    if scheduling_gate_check():
        log.info("cycle of cluster %s not run: scheduling is paused", cluster_id)
        return None
    record = self.worker.run(cluster_id=cluster_id)
    if record is None:
        return None
    cycle_high_water_record(record.pk)
    return {"cycle": record.pk, "starts": record.starts, "stops": record.stops}


@shared_task(name="scheduler.enqueue_due_cycles", ignore_result=True)
def enqueue_due_cycles() -> int:
    """Queue a cycle for every cluster whose last cycle is `cycle_s` old or older."""
    if scheduling_gate_check():
        return 0
    return sum(enqueue_cycle(cluster_id) for cluster_id in clusters_due())


@shared_task(name="scheduler.prune_cycle_records", ignore_result=True)
def prune_cycle_records() -> int:
    """Delete cycle records past their retention."""
    return cycle_records_prune(days=getattr(settings, "ALLOT_CYCLE_RETENTION_DAYS", 30))


@shared_task(name="scheduler.prune_idempotency_keys", ignore_result=True)
def prune_idempotency_keys() -> int:
    """Delete submission Idempotency-Keys older than their 24 h retention."""
    return idempotency_keys_prune()


@shared_task(name="scheduler.preview_run", ignore_result=True)
def preview_run_task(preview_id: int) -> str:
    """Run one what-if preview (see `scheduler.services.previews`)."""
    return preview_run(preview_id=preview_id).state


@shared_task(name="scheduler.demo_load_tick", ignore_result=True)
def demo_load_tick() -> int:
    """The demo organisation's load (only while ALLOT_DEMO is on and the demo exists)."""
    return tick()


@shared_task(name="scheduler.refresh_etas", ignore_result=True)
def refresh_etas(cluster_id: int) -> int:
    """Recompute and cache the ETAs of a cluster's pending jobs; how many it estimated."""
    try:
        cluster = Cluster.objects.filter(pk=cluster_id).first()
        return 0 if cluster is None else len(cluster_etas(cluster=cluster, fresh=True))
    finally:
        try:
            run_cycle.worker.redis_client().delete(ETA_QUEUED_KEY.format(cluster_id=cluster_id))
        except Exception as exc:  # the key expires on its own
            log.warning("could not clear the ETA key of cluster %s: %s", cluster_id, exc)


@shared_task(name="scheduler.collect_utilization", ignore_result=True)
def collect_utilization() -> int:
    """One utilization collection of every cluster; a cluster whose metrics cannot be
    read keeps the error and the others go on. Returns the rows written."""
    rows = sum(utilization_collect(cluster=cluster) for cluster in Cluster.objects.all())
    utilization_compact()  # attempts ended over a day ago: one row each
    return rows
