"""Heartbeats of the scheduling processes, written by the processes themselves every
ALLOT_HEARTBEAT_S seconds, or more often when a cluster cycles faster
(`ops.selectors.heartbeat_interval_s`) (`ops.models.Heartbeat`; `/healthz` and the page
banner read them through `ops.selectors.scheduling_health`).

- beat: `HeartbeatScheduler`, Celery beat's scheduler (CELERY_BEAT_SCHEDULER), beats from
  its own loop, so the row ages when beat stops (not when a worker stops);
- a worker: a thread started when the worker is ready (Celery's `worker_ready` signal)
  and stopped at its shutdown, named after the worker's node name, with the queues it
  consumes (so that health can tell the cycles' workers from the background ones).

A failed write (the database restarting) is logged and tried again at the next beat.

Beat fails loudly, like a worker (ops/worker_database.py):
- **at start** (Celery's `beat_init`, before its first tick), when its database or its
  broker cannot be used, it logs one CRITICAL line naming the variable (`DATABASE_URL`,
  `REDIS_URL` or `CELERY_BROKER_URL`, without a password) and exits with status 69, so
  systemd shows the unit failing (and restarts it) instead of "active" while nothing is
  scheduled;
- **while it runs** it keeps running (its schedule is a file; the tasks it sends wait in
  Redis, and a worker whose database is gone hands them back), but it beats only when
  the beat landed in the database and every task due since the last beat reached the
  broker: a beat that cannot reach either goes stale, and `/healthz` answers 503 naming
  beat within 3 heartbeat periods; it beats again once both answer.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time

from celery.beat import PersistentScheduler
from celery.signals import beat_init, worker_ready, worker_shutdown
from django.conf import settings
from django.db import connection
from django.utils import timezone
from kombu.utils.url import maybe_sanitize_url

from ops import selectors
from ops.models import ProcessKind
from ops.services import heartbeat_record, heartbeats_prune
from ops.worker_database import exit_unless_usable, one_line

log = logging.getLogger(__name__)
BEAT_NAME = "beat"


def heartbeat_interval_s() -> float:
    """ALLOT_HEARTBEAT_S, or less when a cluster cycles faster (ops.selectors)."""
    try:
        return selectors.heartbeat_interval_s()
    except Exception as exc:  # the database restarting: beat on, at the configured pace
        log.warning("could not read the clusters' cycle periods: %s", one_line(exc))
        connection.close()
        return float(settings.ALLOT_HEARTBEAT_S)


def _beat(kind: str, name: str, started_at, queues: tuple[str, ...] = ()) -> bool:
    """One heartbeat; False (logged) when the database did not take it."""
    try:
        heartbeat_record(
            kind=kind,
            name=name,
            host=socket.gethostname(),
            started_at=started_at,
            queues=queues,
        )
        return True
    except Exception as exc:  # the next beat tries again on a fresh connection
        log.warning("%s %s: could not record a heartbeat: %s", kind, name, one_line(exc))
        connection.close()
        return False


class HeartbeatScheduler(PersistentScheduler):
    """Celery beat's persistent scheduler that also records beat's heartbeat (and prunes
    the rows of workers gone for a day) at least every `heartbeat_interval_s()`, unless a
    due task could not be sent to the broker since the last beat."""

    def __init__(self, *args, **kwargs) -> None:
        self._next_beat = 0.0
        self._started_at = timezone.now()
        self._unsent = 0  # due tasks the broker did not take since the last beat
        super().__init__(*args, **kwargs)

    def apply_async(self, entry, *args, **kwargs):
        try:
            return super().apply_async(entry, *args, **kwargs)
        except Exception:  # Celery logs it ("Message Error") and goes on
            self._unsent += 1
            raise

    def tick(self, *args, **kwargs) -> float:
        delay = super().tick(*args, **kwargs)
        now = time.monotonic()
        if now >= self._next_beat:
            self._next_beat = now + heartbeat_interval_s()
            unsent, self._unsent = self._unsent, 0
            if unsent:
                log.warning(
                    "beat: %s due tasks could not be sent to the broker (%s); no heartbeat",
                    unsent,
                    maybe_sanitize_url(settings.CELERY_BROKER_URL),
                )
            elif _beat(ProcessKind.BEAT, BEAT_NAME, self._started_at):
                heartbeats_prune()
        return min(delay, max(0.0, self._next_beat - time.monotonic()))


@beat_init.connect
def _exit_unless_usable(sender=None, **kwargs) -> None:
    """Beat's start (before its first tick): exit 69 naming the variable when its
    database or its broker cannot be used (the worker's check, ops.worker_database)."""
    exit_unless_usable("beat asks for no task", "systemd restarts it")


class WorkerHeartbeat:
    """A daemon thread recording one worker's heartbeat (its name and the queues it
    consumes) until `stop()`."""

    def __init__(self, name: str, queues: tuple[str, ...] = ()) -> None:
        self.name = name
        self.queues = queues
        self.started_at = timezone.now()
        self._stopped = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"heartbeat-{name}", daemon=True)

    def start(self) -> WorkerHeartbeat:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stopped.set()
        self._thread.join(timeout=5)

    def _run(self) -> None:
        try:
            while not self._stopped.is_set():
                _beat(ProcessKind.WORKER, self.name, self.started_at, self.queues)
                self._stopped.wait(heartbeat_interval_s())
        finally:
            connection.close()  # this thread's own connection


def consumed_queues(consumer) -> tuple[str, ...]:
    """The queues a worker's consumer takes tasks from (its `-Q`), sorted."""
    app = getattr(consumer, "app", None)
    if app is None:
        return ()
    return tuple(sorted(app.amqp.queues.consume_from))


@worker_ready.connect
def _start_worker_heartbeat(sender=None, **kwargs) -> None:
    """Start beating once the worker consumes; the thread hangs on the WorkController."""
    controller = getattr(sender, "controller", None)
    name = getattr(sender, "hostname", "") or f"worker-{socket.gethostname()}-{os.getpid()}"
    if controller is not None and getattr(controller, "allot_heartbeat", None) is None:
        controller.allot_heartbeat = WorkerHeartbeat(name, consumed_queues(sender)).start()


@worker_shutdown.connect
def _stop_worker_heartbeat(sender=None, **kwargs) -> None:
    heartbeat = getattr(sender, "allot_heartbeat", None)
    if heartbeat is not None:
        heartbeat.stop()
        sender.allot_heartbeat = None
