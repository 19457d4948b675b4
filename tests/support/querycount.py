"""Query counts that must not grow with the data: a request is measured with some rows,
then with three times as many, and both counts must be equal (no query per row, N+1)."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable
from unittest import mock

from django.core.cache import cache
from django.db import connection
from django.test.utils import CaptureQueriesContext

from scheduler import cycle_requests
from scheduler.selectors.queue import forget_queues
from scheduler.selectors.room import forget_rooms

_LITERALS = re.compile(r"'[^']*'|\b\d+\b")


def _queued(task_name: str, *args: object) -> None:
    """`scheduler.cycle_requests.send` while a request is measured: the task is asked
    for, not run."""


def count_queries(request: Callable[[], object]) -> list[str]:
    """The SQL `request` runs (the cache and the process's kept rooms and queues emptied
    first, so a cached answer hides nothing). A task the request queues (an ETA refresh:
    `scheduler.cycle_requests`) is not run inside it, as a worker runs it: with eager
    Celery it ran in the request only when the debounce key's Redis round trip (0.5 s
    timeout) answered in time, so under load the queue page counted 14 statements
    instead of 27. The tasks are measured on their own (tests/test_query_counts.py)."""
    cache.clear()
    forget_rooms()
    forget_queues()
    with (
        mock.patch.object(cycle_requests, "send", _queued),
        CaptureQueriesContext(connection) as captured,
    ):
        request()
    return [q["sql"] for q in captured.captured_queries]


def _shapes(queries: list[str]) -> Counter:
    return Counter(_LITERALS.sub("?", sql) for sql in queries)


def assert_queries_do_not_grow(
    request: Callable[[], object], grow: Callable[[int], None], n: int = 3
) -> int:
    """`grow(n)` rows, measure `request`; `grow(2n)` more, measure again: the counts must be
    equal. On failure the message names the statements whose number changed. Returns the
    count."""
    grow(n)
    request()  # first use: content types, permissions and other per-process caches
    small = count_queries(request)
    grow(2 * n)
    large = count_queries(request)
    assert_same_count(small, large, n, 3 * n)
    return len(small)


def assert_same_count(small: list[str], large: list[str], n: int, large_n: int) -> None:
    """The queries measured with `n` rows of every kind and with `large_n` are as many;
    otherwise the message names the statements whose number changed."""
    if len(large) != len(small):
        more, fewer = _shapes(large) - _shapes(small), _shapes(small) - _shapes(large)
        lines = [f"+{k}x {sql[:300]}" for sql, k in more.most_common(5)]
        lines += [f"-{k}x {sql[:300]}" for sql, k in fewer.most_common(5)]
        raise AssertionError(
            f"{len(small)} queries with {n} rows each, {len(large)} with {large_n}:\n"
            + "\n".join(lines)
        )
