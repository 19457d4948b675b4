"""Test settings: fast password hashing, Celery tasks run eagerly unless a test
starts a real worker."""

from .base import *  # noqa: F403

DEBUG = False
PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
CELERY_TASK_ALWAYS_EAGER = True
CELERY_TASK_EAGER_PROPAGATES = True

# Tests share the configured Redis: their cache keys get their own prefix, cleared
# before each test (tests/conftest.py), so sign-in lockouts never leak between tests.
CACHES["default"]["KEY_PREFIX"] = "allot-test"  # noqa: F405
