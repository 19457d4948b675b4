"""How the short-job reserve's reason names its limit: a demo compresses the limit to
seconds, and "at most 0 min" told a user nothing."""

from __future__ import annotations

from scheduler.core.engine.explain import hours_text, limit_text
from scheduler.core.engine.reservations import within_text


def test_a_limit_below_a_minute_reads_in_seconds():
    assert limit_text(15) == "15 s"
    assert limit_text(59) == "59 s"


def test_a_limit_of_a_minute_or_more_reads_as_other_durations():
    assert limit_text(900) == hours_text(900) == "15 min"
    assert limit_text(60) == "1 min"
    assert limit_text(8 * 3600) == "8.0 h"


def test_a_hold_released_in_under_a_minute_reads_within_a_minute():
    """A reservation's reason read "expected usable in 0 min" (the demo's job 1307)."""
    assert within_text(0) == within_text(29) == within_text(59) == "within a minute"
    assert within_text(60) == "in 1 min"
    assert within_text(2 * 3600) == "in 2.0 h"
