"""Fixtures the scenario tests share."""

import pytest
import redis

from config.celery import app


@pytest.fixture
def broker(settings):
    """Tasks go to the broker (not run eagerly); the test's Redis database starts empty."""
    client = redis.Redis.from_url(settings.REDIS_URL)
    client.flushdb()
    app.conf.task_always_eager = False
    yield client
    app.conf.task_always_eager = True
    client.flushdb()
