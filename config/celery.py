"""The Celery application: workers and beat read their settings from Django.

- Logging: Celery leaves it to Django's LOGGING (config/logs.py), so a worker's and beat's
  lines have the same timestamp, level, request and cycle ids, text or JSON, as the web's;
  LOG_LEVEL sets the level (a worker's --loglevel is not read).
- Database: a worker that cannot use its database takes no task: it exits at start, and a
  task that meets the database gone waits for it and goes back to its queue
  (ops.worker_database). Beat exits at start too when its database or its broker cannot
  be used, and stops beating while either is gone (ops.heartbeat, its `beat_init`).
- Metrics: each worker process writes its counters under its node name and its index in
  the pool (ops.metrics), so a restarted worker continues its own counts. Node names must
  be unique: the systemd units and the container name each worker (`-n`).
"""

import logging.config
import os

import billiard.process
from celery import Celery
from celery.loaders.app import AppLoader
from celery.signals import celeryd_init, setup_logging, worker_process_init

from config import startup
from ops.metrics import PROCESS_IDENTITY_ENV, identity_part
from ops.worker_database import DatabaseAtStart

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings.dev")


class Loader(AppLoader):
    """Celery's loader, with Django's set-up (which a worker and beat make when their
    loader imports the tasks modules) run with the cyclic collector paused until the
    apps are ready (config/startup.py)."""

    def init_worker(self) -> None:
        startup.pause()
        super().init_worker()


app = Celery(
    "allot", loader="config.celery:Loader", task_cls="ops.worker_database:DatabaseAwareTask"
)
app.config_from_object("django.conf:settings", namespace="CELERY")
app.steps["worker"].add(DatabaseAtStart)
app.autodiscover_tasks()


@setup_logging.connect
def _django_logging(**kwargs) -> None:
    from django.conf import settings

    logging.config.dictConfig(settings.LOGGING)


@celeryd_init.connect
def _worker_metrics_slot(sender=None, **kwargs) -> None:
    os.environ[PROCESS_IDENTITY_ENV] = f"worker-{identity_part(str(sender))}-0"
    os.environ["ALLOT_WORKER_NODE"] = identity_part(str(sender))


@worker_process_init.connect
def _pool_process_metrics_slot(**kwargs) -> None:
    index = getattr(billiard.process.current_process(), "index", None)
    node = os.environ.get("ALLOT_WORKER_NODE", "worker")
    os.environ[PROCESS_IDENTITY_ENV] = f"worker-{node}-{(index or 0) + 1}"
