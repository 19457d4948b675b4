"""A time in an API body as DRF's JSON encoder writes it, for rows built as plain dicts.

`rest_framework.utils.encoders.JSONEncoder.default` turns a datetime into its ISO 8601
text with a UTC offset written "Z"; reached from the C encoder through Python for each
value, that cost ~5 us a time, a tenth of a 50-row queue page's rendering. A row that
gives the text itself (`api_time`) renders to the same bytes."""

from __future__ import annotations

import datetime as dt


def api_time(value: dt.datetime | None) -> str | None:
    """`value` as DRF's JSON encoder writes a datetime (None stays None)."""
    if value is None:
        return None
    text = value.isoformat()
    return text[:-6] + "Z" if text.endswith("+00:00") else text
