"""A clock for tests whose data and pages both read "the current hour" (issue 31,
point 8): a test that writes rows for the last complete hours and then asks a page
for them fails when the hour turns in between (the page's window moves one hour on).

`MidHourClock` runs at the real clock's pace from the middle of the hour the test
starts in, so a test has 30 minutes before its hour turns, whenever it starts (at
10:59:59.9 it reads 10:30:00.0). The `mid_hour` fixture (a plugin of
`tests/conftest.py`) puts it in place of `django.utils.timezone.now` for one test: the
data helpers, the views and the selectors read the same clock."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable

import pytest
from django.utils import timezone


class MidHourClock:
    def __init__(self, real_now: Callable[[], dt.datetime]) -> None:
        self.real_now = real_now
        start = real_now()
        self.shift = start - start.replace(minute=30, second=0, microsecond=0)

    def __call__(self) -> dt.datetime:
        return self.real_now() - self.shift


@pytest.fixture
def mid_hour(monkeypatch) -> MidHourClock:
    clock = MidHourClock(timezone.now)
    monkeypatch.setattr(timezone, "now", clock)
    return clock
