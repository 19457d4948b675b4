"""How pages and charts word durations and times relative to now (one wording
everywhere: "3 h 10 min", "in 3 h 10 min", "12 min ago"); static/js/time.js words them
the same in the browser."""

from __future__ import annotations

import datetime as dt

from allot_common.figures import span_text

__all__ = ["relative_text", "read_time", "span_text"]

NOW_S = 45  # closer than this to now reads "now"
# ... for a time written to the second (a cycle's): a cycle 40 s old is "40 s ago", not
# "now" beside a banner that says no cycle ran for more than 15 s (static/js/time.js too)
NOW_SECONDS_S = 5
# The times any input may name (a query's `since`, a scheduled change's `effective_at`):
# outside them a period would overflow near year 1 or 9999, and nothing the product
# records lies there.
EARLIEST = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
LATEST = dt.datetime(9000, 1, 1, tzinfo=dt.UTC)
NOT_A_TIME = (
    "Not an ISO 8601 time; give e.g. 2026-11-01T09:00:00Z (or a date alone, 2026-11-01, "
    "for its midnight UTC)."
)
OUT_OF_RANGE = f"Out of range: a time from {EARLIEST:%Y-%m-%d} to {LATEST:%Y-%m-%d} (UTC)."


def read_time(value: str | dt.datetime) -> dt.datetime:
    """A time as every input (API, pages, CLI) takes it: ISO 8601 text, a date alone
    meaning its midnight UTC, no offset meaning UTC, between EARLIEST and LATEST; the
    result in UTC. Anything else raises ValueError saying why (NOT_A_TIME, OUT_OF_RANGE)."""
    if isinstance(value, dt.datetime):
        at = value
    else:
        try:
            at = dt.datetime.fromisoformat(value.strip())
        except ValueError:  # not ISO 8601, or no such day (month 13)
            raise ValueError(NOT_A_TIME) from None
    at = at if at.tzinfo else at.replace(tzinfo=dt.UTC)
    try:
        at = at.astimezone(dt.UTC)
    except OverflowError:  # an offset that takes the time past year 1 or 9999
        raise ValueError(OUT_OF_RANGE) from None
    if not EARLIEST <= at <= LATEST:
        raise ValueError(OUT_OF_RANGE)
    return at


def relative_text(at: dt.datetime, now: dt.datetime, *, seconds: bool = False) -> str:
    """'in 3 h 10 min', '12 min ago' or 'now' (closer than NOW_S; NOW_SECONDS_S for a
    time written to the second)."""
    delta = (at - now).total_seconds()
    if abs(delta) < (NOW_SECONDS_S if seconds else NOW_S):
        return "now"
    return f"in {span_text(delta)}" if delta > 0 else f"{span_text(delta)} ago"
