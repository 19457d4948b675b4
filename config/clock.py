"""How pages and charts word durations and times relative to now (one wording
everywhere: "3 h 10 min", "in 3 h 10 min", "12 min ago"); static/js/time.js words them
the same in the browser."""

from __future__ import annotations

import datetime as dt

NOW_S = 45  # closer than this to now reads "now"
# The times any input may name (a query's `since`, a scheduled change's `effective_at`):
# outside them a period would overflow near year 1 or 9999, and nothing the product
# records lies there.
EARLIEST = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
LATEST = dt.datetime(9000, 1, 1, tzinfo=dt.UTC)


def span_text(seconds: float) -> str:
    """A duration for people: 3 h 10 min, 12 min, 2 d 4 h, 40 s."""
    s = int(round(abs(seconds)))
    if s < 60:
        return f"{s} s"
    minutes = s // 60
    if minutes < 60:
        return f"{minutes} min"
    hours, minutes = divmod(minutes, 60)
    if hours < 24:
        return f"{hours} h {minutes} min" if minutes else f"{hours} h"
    days, hours = divmod(hours, 24)
    return f"{days} d {hours} h" if hours else f"{days} d"


def relative_text(at: dt.datetime, now: dt.datetime) -> str:
    """'in 3 h 10 min', '12 min ago' or 'now'."""
    delta = (at - now).total_seconds()
    if abs(delta) < NOW_S:
        return "now"
    return f"in {span_text(delta)}" if delta > 0 else f"{span_text(delta)} ago"
