"""Figures kept in the cache (Redis) for a while, computed again when Redis is down:
a read must not fail because a cache did (Redis down answers like a cold cache)."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TypeVar

from django.core.cache import cache
from redis.exceptions import RedisError

log = logging.getLogger(__name__)
T = TypeVar("T")


def kept(key: str, compute: Callable[[], T], timeout_s: float) -> T:
    """The value kept under `key`, else `compute()` kept for `timeout_s`; with the cache
    unreachable, `compute()` (logged once per call as a warning)."""
    try:
        found = cache.get(key)
    except RedisError as exc:
        log.warning("cache unreachable, computing %s: %s", key, exc)
        return compute()
    if found is not None:
        return found
    value = compute()
    try:
        cache.set(key, value, timeout_s)
    except RedisError as exc:
        log.warning("cache unreachable, %s not kept: %s", key, exc)
    return value
