"""The hour arithmetic of the ledger tests (the world they share: tests/ledger/conftest.py)."""

import datetime as dt

H = dt.timedelta(hours=1)
HOURS = 4


def overlap_h(start, end, lo, hi):
    """Hours of [start, end) inside [lo, hi)."""
    return max(0.0, (min(end, hi) - max(start, lo)).total_seconds()) / 3600
