"""Human output: rich tables and key/value panels; `--json` bypasses all of this."""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Iterable, Sequence
from typing import Any

from rich.console import Console
from rich.table import Table

out = Console(highlight=False, soft_wrap=False)
err = Console(stderr=True, highlight=False)


def print_json(data: Any) -> None:
    print(json.dumps(data, indent=2, sort_keys=False))


def seconds(value: float | int | None) -> str:
    """900 -> 15m, 5400 -> 1h30m, 0 -> 0."""
    if value is None:
        return "-"
    value = int(value)
    if value == 0:
        return "0"
    days, rest = divmod(value, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    parts = [
        f"{n}{unit}" for n, unit in ((days, "d"), (hours, "h"), (minutes, "m"), (secs, "s")) if n
    ]
    return "".join(parts)


def when(value: str | None) -> str:
    """An API time as local 'YYYY-MM-DD HH:MM:SS'."""
    if not value:
        return "-"
    try:
        moment = dt.datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return value
    return moment.astimezone().strftime("%Y-%m-%d %H:%M:%S")


def number(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.4g}" if abs(value) < 1000 else f"{value:,.0f}"
    return str(value)


def table(
    columns: Sequence[str], rows: Iterable[Sequence[Any]], *, title: str | None = None
) -> None:
    t = Table(title=title, header_style="bold", box=None, pad_edge=False)
    for column in columns:
        t.add_column(column, overflow="fold")
    for row in rows:
        t.add_row(*(number(v) if not isinstance(v, str) else v for v in row))
    out.print(t)


def pairs(items: Sequence[tuple[str, Any]]) -> None:
    t = Table(box=None, show_header=False, pad_edge=False)
    t.add_column(style="bold")
    t.add_column(overflow="fold")
    for key, value in items:
        t.add_row(key, number(value) if not isinstance(value, str) else value)
    out.print(t)
