"""The mid-hour clock of `tests/support/clock.py`: a test that starts a moment before
the hour turns still has the whole of its hour to run."""

import datetime as dt

from django.utils import timezone

from tests.support.clock import MidHourClock


def test_a_test_started_as_the_hour_turns_keeps_its_hour():
    real = [dt.datetime(2026, 12, 6, 10, 59, 59, 900_000, tzinfo=dt.UTC)]
    clock = MidHourClock(lambda: real[0])
    assert clock() == dt.datetime(2026, 12, 6, 10, 30, tzinfo=dt.UTC)
    real[0] += dt.timedelta(seconds=5)  # the real hour has turned
    assert clock().hour == 10 and clock() - dt.datetime(
        2026, 12, 6, 10, 30, tzinfo=dt.UTC
    ) == dt.timedelta(seconds=5)
    # a test started early in its hour is moved on to its middle, never into another hour
    early = MidHourClock(lambda: dt.datetime(2026, 12, 6, 10, 0, 1, tzinfo=dt.UTC))
    assert early() == dt.datetime(2026, 12, 6, 10, 30, tzinfo=dt.UTC)


def test_the_fixture_gives_the_test_that_clock(mid_hour):
    now = timezone.now()
    assert timezone.now is mid_hour
    assert now.minute == 30 or (now.minute == 31 and now.second < 5)
