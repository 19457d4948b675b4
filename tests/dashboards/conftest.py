"""The dashboards' tests write rows for the last complete hours and read them back
through pages that compute the same hours: every test runs on the mid-hour clock
(`mid_hour`, `tests/support/clock.py`), so the hour never turns between the two."""

import pytest


@pytest.fixture(autouse=True)
def _steady_hour(mid_hour):
    return mid_hour
