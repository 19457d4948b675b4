"""Test settings: fast password hashing, Celery tasks run eagerly unless a test
starts a real worker; the embedded servers for a missing DATABASE_URL or REDIS_URL.

Under pytest-xdist each worker gets its own Redis database (the configured one plus the
worker's number; pytest-django gives it its own PostgreSQL database), so tests that
flush Redis or read the broker's queue never see another worker's keys."""

import os
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

from .base import *  # noqa: F403
from .base import backing_services, embedded, env

DEBUG = False
PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
CELERY_TASK_ALWAYS_EAGER = True
CELERY_TASK_EAGER_PROPAGATES = True


def _worker_redis_url(url: str, worker: str) -> str:
    """`url` with its database number raised by the xdist worker's number (gw2: +2)."""
    parts = urlsplit(url)
    db = int(parts.path.strip("/") or 0) + int(worker.removeprefix("gw"))
    if db > 15:
        raise ValueError(f"{url} leaves no Redis database for xdist worker {worker} (0-15)")
    return urlunsplit(parts._replace(path=f"/{db}"))


# Once per worker: the processes a test starts inherit the worker's URL and the mark.
_worker = os.environ.get("PYTEST_XDIST_WORKER", "")
if _worker and os.environ.get("ALLOT_TEST_REDIS_WORKER") != _worker:
    os.environ["REDIS_URL"] = _worker_redis_url(
        env("REDIS_URL", default="") or embedded.redis_url(), _worker
    )
    os.environ["ALLOT_TEST_REDIS_WORKER"] = _worker
globals().update(backing_services(embedded_fallback=True))

# Tests share the configured Redis: their cache keys get their own prefix, cleared
# before each test (tests/conftest.py), so sign-in lockouts never leak between tests.
CACHES["default"]["KEY_PREFIX"] = "allot-test"  # noqa: F405
# One process's own counters, unless a test's server is given a metrics directory.
METRICS_DIR = (
    Path(env("ALLOT_METRICS_DIR")).resolve() if env("ALLOT_METRICS_DIR", default="") else None
)
