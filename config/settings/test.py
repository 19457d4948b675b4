"""Test settings: fast password hashing, Celery tasks run eagerly unless a test
starts a real worker; the embedded servers for a missing DATABASE_URL or REDIS_URL."""

from pathlib import Path

from .base import *  # noqa: F403
from .base import backing_services, env

DEBUG = False
PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
CELERY_TASK_ALWAYS_EAGER = True
CELERY_TASK_EAGER_PROPAGATES = True
globals().update(backing_services(embedded_fallback=True))

# Tests share the configured Redis: their cache keys get their own prefix, cleared
# before each test (tests/conftest.py), so sign-in lockouts never leak between tests.
CACHES["default"]["KEY_PREFIX"] = "allot-test"  # noqa: F405
# One process's own counters, unless a test's server is given a metrics directory.
METRICS_DIR = (
    Path(env("ALLOT_METRICS_DIR")).resolve() if env("ALLOT_METRICS_DIR", default="") else None
)
