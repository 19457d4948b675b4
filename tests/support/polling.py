"""Waiting for a state by polling it (never a sleep followed by an assert)."""

from __future__ import annotations

import time


def wait_for(predicate, timeout_s: float = 10.0, what: str = "condition"):
    """Poll until `predicate()` is truthy (a correctness wait, not a timing assert)."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.02)
