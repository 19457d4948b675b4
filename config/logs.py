"""Structured logs: every line has a UTC timestamp, the level, the logger, and the
request id and cycle id of the work it belongs to, as text or as one JSON object per line.

    LOG_LEVEL=INFO          # DEBUG, INFO, WARNING, ERROR
    ALLOT_LOG_FORMAT=json   # or text (the default)

The ids travel in context variables: `RequestIdMiddleware` (config/middleware.py) sets the
request id of each request (until the response is finished), the scheduling cycle sets its cycle id (`cycle_scope`), and
`ContextFilter` copies both onto every record. Plain `logging` (no Django), so gunicorn's
own logs use the same formatters (config/gunicorn.py).
"""

from __future__ import annotations

import datetime as dt
import json
import logging
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

REQUEST_ID: ContextVar[str] = ContextVar("allot_request_id", default="")
# the cycle's id, or an object whose str() is it once known (the cycle's record is
# created inside the scope)
CYCLE_ID: ContextVar[object] = ContextVar("allot_cycle_id", default="")
FORMATS = ("text", "json")
# attributes every LogRecord has; anything else a caller passed in `extra` is a field
_STANDARD = set(vars(logging.LogRecord("", 0, "", 0, "", (), None))) | {
    "message",
    "asctime",
    "request_id",
    "cycle_id",
    "taskName",
}


@contextmanager
def cycle_scope(cycle_id: object) -> Iterator[None]:
    """Log lines inside the block carry `str(cycle_id)`, read when each line is written."""
    token = CYCLE_ID.set(cycle_id)
    try:
        yield
    finally:
        CYCLE_ID.reset(token)


class ContextFilter(logging.Filter):
    """Adds `request_id` and `cycle_id` (empty outside a request or cycle) to records."""

    def filter(self, record: logging.LogRecord) -> bool:
        record.request_id = REQUEST_ID.get()
        record.cycle_id = str(CYCLE_ID.get())
        return True


def _timestamp(record: logging.LogRecord) -> str:
    when = dt.datetime.fromtimestamp(record.created, dt.UTC)
    return when.isoformat(timespec="milliseconds").replace("+00:00", "Z")


class TextFormatter(logging.Formatter):
    """`2026-01-02T03:04:05.678Z INFO scheduler.cycle.run [request=.. cycle=12] text`"""

    def format(self, record: logging.LogRecord) -> str:
        ids = [
            f"{name}={value}"
            for name, value in (
                ("request", getattr(record, "request_id", "")),
                ("cycle", getattr(record, "cycle_id", "")),
            )
            if value
        ]
        line = f"{_timestamp(record)} {record.levelname} {record.name}"
        if ids:
            line += f" [{' '.join(ids)}]"
        line += f" {record.getMessage()}"
        if record.exc_info:
            line += "\n" + self.formatException(record.exc_info)
        if record.stack_info:
            line += "\n" + self.formatStack(record.stack_info)
        return line


class JsonFormatter(logging.Formatter):
    """One JSON object per line: ts, level, logger, message, request_id, cycle_id,
    process, then any `extra` fields, and `exc` with the traceback."""

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, object] = {
            "ts": _timestamp(record),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        for name in ("request_id", "cycle_id"):
            value = getattr(record, name, "")
            if value:
                entry[name] = value
        entry["process"] = record.process
        for key, value in vars(record).items():
            if key not in _STANDARD and not key.startswith("_"):
                entry[key] = value
        if record.exc_info:
            entry["exc"] = self.formatException(record.exc_info)
        return json.dumps(entry, default=str, ensure_ascii=False)


def handler_config(log_format: str) -> dict[str, object]:
    """The `formatters`, `filters` and `console` handler of a logging dictConfig."""
    if log_format not in FORMATS:
        raise ValueError(
            f"ALLOT_LOG_FORMAT must be one of {', '.join(FORMATS)}, not {log_format!r}"
        )
    return {
        "filters": {"context": {"()": ContextFilter}},
        "formatters": {
            "text": {"()": TextFormatter},
            "json": {"()": JsonFormatter},
        },
        "handlers": {
            "console": {
                "class": "logging.StreamHandler",
                "formatter": log_format,
                "filters": ["context"],
            }
        },
    }
