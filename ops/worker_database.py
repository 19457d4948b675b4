"""A Celery worker and its database and broker: a worker that cannot use them takes no
task. Beat checks both at start with the same function (`exit_unless_usable`, called from
`ops.heartbeat`).

- **Never reachable at start** (a wrong `DATABASE_URL`, a database that does not exist, a
  password refused; a Redis broker that does not answer): `DatabaseAtStart`, a step of the
  worker that starts before its consumer, connects once to each; when that fails the
  worker logs why, naming the variable (`DATABASE_URL`, `REDIS_URL` or
  `CELERY_BROKER_URL`, without its password), and exits with status 69 (EX_UNAVAILABLE)
  before it consumes (without the check Celery retried the broker for ever, "active"),
  so the tasks of the shared queues wait in Redis for a worker that can run them, and
  systemd restarts this one (`Restart=on-failure`) until its database answers.
- **Went away while running** (a restart, a failover): a task that fails because the
  database cannot be reached is not failed: the worker waits until the database answers
  (consuming nothing meanwhile: one task at a time, its message unacknowledged), then hands
  the task back to its queue (`Reject(requeue=True)`), and goes on. A warm shutdown ends the
  wait; the task is handed back all the same. A database error while the database answers
  (a bug, a constraint) fails the task as before.
"""

from __future__ import annotations

import logging
import os
import time

from celery import Task, bootsteps
from celery.exceptions import Reject

log = logging.getLogger(__name__)

DATABASE_UNREACHABLE_EXIT = os.EX_UNAVAILABLE  # 69
WAIT_POLL_S = 1.0
BROKER_TIMEOUT_S = 2.0


def one_line(exc: BaseException) -> str:
    """An exception's text on one line (a log line per entry; psycopg's errors span two)."""
    return " ".join(str(exc).split()) or type(exc).__name__


def database_error() -> str | None:
    """Why the default database cannot be used right now (a fresh connection and
    `SELECT 1`), or None when it answers."""
    from django.db import DatabaseError, connection

    connection.close()
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
        return None
    except DatabaseError as exc:
        connection.close()
        return one_line(exc)
    except Exception as exc:  # e.g. an unknown host: not a DatabaseError in every driver
        connection.close()
        return f"{type(exc).__name__}: {exc}"


def database_described() -> str:
    """`DATABASE_URL` as the worker uses it, without its password."""
    from django.conf import settings

    db = settings.DATABASES["default"]
    user = f"{db.get('USER')}@" if db.get("USER") else ""
    port = f":{db.get('PORT')}" if db.get("PORT") else ""
    return f"postgres://{user}{db.get('HOST') or 'localhost'}{port}/{db.get('NAME')}"


def ping_broker(timeout_s: float) -> bool:
    """Raise when the Redis broker (CELERY_BROKER_URL) does not answer a PING within
    `timeout_s`; whether it was checked (a broker that is not Redis is not). `/healthz`'s
    broker check and the start checks."""
    import redis
    from django.conf import settings

    url = settings.CELERY_BROKER_URL
    if not url.startswith(("redis://", "rediss://")):
        return False
    client = redis.Redis.from_url(url, socket_timeout=timeout_s, socket_connect_timeout=timeout_s)
    try:
        client.ping()
    finally:
        client.close()
    return True


def broker_variable() -> str:
    """The variable the broker's URL comes from: CELERY_BROKER_URL when set, else
    REDIS_URL (config/settings/base.py)."""
    return "CELERY_BROKER_URL" if os.environ.get("CELERY_BROKER_URL") else "REDIS_URL"


def exit_unless_usable(process: str, meanwhile: str) -> None:
    """Exit with status 69 (`DATABASE_UNREACHABLE_EXIT`), after one CRITICAL line naming
    the variable (`DATABASE_URL`, `REDIS_URL` or `CELERY_BROKER_URL`, without its password)
    and why, when the database or the broker cannot be used. `process`: what the process
    does not do ("this worker takes no task"); `meanwhile`: what happens meanwhile."""
    from django.conf import settings
    from kombu.utils.url import maybe_sanitize_url

    error = database_error()
    variable, described = "DATABASE_URL", database_described()
    if error is None:
        try:
            ping_broker(BROKER_TIMEOUT_S)
            return
        except Exception as exc:
            error = one_line(exc)
            variable = broker_variable()
            described = maybe_sanitize_url(settings.CELERY_BROKER_URL)
    log.critical(
        "%s (%s) cannot be used, so %s and exits with status %s (%s): %s",
        variable,
        described,
        process,
        DATABASE_UNREACHABLE_EXIT,
        meanwhile,
        error,
    )
    raise SystemExit(DATABASE_UNREACHABLE_EXIT)


class DatabaseAtStart(bootsteps.StartStopStep):
    """A worker step started before the consumer (Celery starts the consumer last): the
    worker exits, consuming nothing, when its database or its broker cannot be used."""

    label = "database and broker check"

    def start(self, worker) -> None:
        exit_unless_usable(
            "this worker takes no task",
            "its tasks wait in the queue for a worker that can run them",
        )


def _shutting_down() -> bool:
    from celery.worker import state

    return state.should_stop not in (None, False) or state.should_terminate not in (None, False)


def wait_for_database() -> float:
    """Block until the database answers or the worker is asked to stop; the seconds
    waited."""
    started = time.monotonic()
    while database_error() is not None and not _shutting_down():
        time.sleep(WAIT_POLL_S)
    return time.monotonic() - started


class DatabaseAwareTask(Task):
    """Every task's class (`Celery(task_cls=...)`): a task that fails because the
    database went away is handed back to its queue once the database is back."""

    def __call__(self, *args, **kwargs):
        from django.db import InterfaceError, OperationalError

        try:
            return super().__call__(*args, **kwargs)
        except (OperationalError, InterfaceError) as exc:
            if self.request.is_eager or self.request.called_directly:
                raise
            error = database_error()
            if error is None:
                raise  # the database answers: the task's own failure
            log.warning(
                "task %s (%s): the database went away (%s); waiting for it, consuming nothing",
                self.name,
                self.request.id,
                error,
            )
            waited = wait_for_database()
            log.warning(
                "task %s (%s) handed back to its queue after %.1f s without the database",
                self.name,
                self.request.id,
                waited,
            )
            raise Reject(f"the database went away: {exc}", requeue=True) from exc
