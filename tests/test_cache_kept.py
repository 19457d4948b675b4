"""`config.cache.kept`: a figure kept in Redis, computed again when Redis is down (a
dashboard or the fair-share API answers, not a 500)."""

from __future__ import annotations

import pytest
from django.core.cache import cache
from redis.exceptions import ConnectionError as RedisConnectionError

from config.cache import kept


@pytest.fixture
def calls():
    return []


def _compute(calls):
    def compute():
        calls.append(1)
        return {"sum": len(calls)}

    return compute


def test_a_kept_figure_is_computed_once(calls):
    cache.delete("test:kept")
    assert kept("test:kept", _compute(calls), 60) == {"sum": 1}
    assert kept("test:kept", _compute(calls), 60) == {"sum": 1}
    assert len(calls) == 1


def test_with_redis_down_the_figure_is_computed(calls, monkeypatch):
    def down(*args, **kwargs):
        raise RedisConnectionError("Connection refused")

    monkeypatch.setattr(cache, "get", down)
    monkeypatch.setattr(cache, "set", down)
    assert kept("test:kept-down", _compute(calls), 60) == {"sum": 1}
    assert kept("test:kept-down", _compute(calls), 60) == {"sum": 2}


def test_with_redis_failing_on_write_the_figure_is_still_answered(calls, monkeypatch):
    cache.delete("test:kept-write")

    def down(*args, **kwargs):
        raise RedisConnectionError("Connection refused")

    monkeypatch.setattr(cache, "set", down)
    assert kept("test:kept-write", _compute(calls), 60) == {"sum": 1}
