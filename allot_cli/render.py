"""Human output: tables, lines and key/value panels as rich lays them out; `--json`
bypasses all of this.

rich is imported where it prints, not at the top: `allot --help`, `--json` and a refused
flag never load it (start-up time: ~35 ms of CPU per call), and neither do a table or a
line that rich would print as plain text (a pipe, no markup: `allot_cli/plain.py`)."""

from __future__ import annotations

import datetime as dt
import json
import re
import sys
from collections.abc import Iterable, Sequence
from decimal import ROUND_HALF_UP, Decimal
from typing import TYPE_CHECKING, Any, Literal

from allot_cli import plain
from allot_common.figures import (
    EMPTY,
    path_tail,
    percent_text,
    runtime_text,
    share_text,
    span_text,
)

if TYPE_CHECKING:
    from rich.console import Console

WRAP_MIN = 16  # a folded column is at least this wide
CROP_MIN = 12  # a cropped one too


def out(width: int | None = None) -> Console:
    """A console on standard output, made when a command prints (rich's import is
    start-up time; making one costs microseconds, and each print writes through);
    `width` overrides the terminal's."""
    from rich.console import Console

    return Console(highlight=False, soft_wrap=False, width=width)


def err() -> Console:
    """A console on standard error."""
    from rich.console import Console

    return Console(stderr=True, highlight=False)


def line(text: str = "", *, markup: bool = True) -> None:
    """One line on standard output, as `out().print(text, markup=markup)` writes it:
    folded to a terminal's width, whole into a pipe (a script reads it)."""
    if not plain.line(text):
        out().print(text, markup=markup, soft_wrap=not to_terminal())


def error(text: str) -> None:
    """One line on standard error, as `err().print(text, markup=False)` writes it (an
    error into a pipe or a log loads no rich either, and is not folded there)."""
    if not plain.line(text, sys.stderr):
        err().print(text, markup=False, soft_wrap=not plain.styled(sys.stderr))


def print_json(data: Any) -> None:
    print(json.dumps(data, indent=2, sort_keys=False))


def seconds(value: float | int | None) -> str:
    """900 -> 15m, 5400 -> 1h30m, 0 -> 0."""
    if value is None:
        return EMPTY
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


def when(value: str | None, *, seconds: bool = False) -> str:
    """An API time in the local zone, with the zone: '2026-12-05 14:09 CET'."""
    moment = _moment(value)
    if moment is None:
        return value or EMPTY
    return moment.strftime("%Y-%m-%d %H:%M:%S %Z" if seconds else "%Y-%m-%d %H:%M %Z")


# A time the server writes into a reason or a blocker: '2026-12-05 10:04 UTC',
# '10:04:05 UTC' (queue reasons, explained budget changes, a stop's grace period).
UTC_TIME = re.compile(r"\b(?:(\d{4}-\d{2}-\d{2}) )?(\d{2}:\d{2}(?::\d{2})?) UTC\b")


def local_times(text: str, now: dt.datetime | None = None) -> str:
    """A reason's or a blocker's UTC times in the local zone, as every other time the
    CLI shows ('2026-12-05 10:04 UTC' -> '2026-12-05 11:04 CET'); a time without a date
    is taken on the day that puts it nearest `now`."""
    if "UTC" not in text:
        return text
    now = now or dt.datetime.now(dt.UTC)

    def local(match: re.Match[str]) -> str:
        day, clock = match.groups()
        shape = "%H:%M:%S" if clock.count(":") == 2 else "%H:%M"
        moment = dt.datetime.strptime(clock, shape).time()
        if day:
            at = dt.datetime.combine(dt.date.fromisoformat(day), moment, dt.UTC)
        else:
            days = (now.date() + dt.timedelta(days=d) for d in (-1, 0, 1))
            at = min(
                (dt.datetime.combine(d, moment, dt.UTC) for d in days),
                key=lambda c: abs((c - now).total_seconds()),
            )
        shown = at.astimezone()
        return shown.strftime(f"%Y-%m-%d {shape} %Z" if day else f"{shape} %Z")

    return UTC_TIME.sub(local, text)


def zone() -> str:
    """The local zone's abbreviation ('CET'), as `when` writes it."""
    return dt.datetime.now().astimezone().strftime("%Z")


def step_start(value: str | None, step: str) -> str:
    """A ledger step's start in a narrow column: a day step is a UTC day ('2026-11-28'),
    an hour step the local hour ('11-28 14:00'; the zone is in the header, the year in
    the title's window)."""
    if step == "day":
        return (value or EMPTY)[:10]
    moment = _moment(value)
    return moment.strftime("%m-%d %H:%M") if moment else (value or EMPTY)


def day_step(value: str | None, window_start: str | None, window_end: str | None) -> str:
    """A day step's UTC day, marked "(partial)" when the period starts inside it or ends
    before it does (the first and the last day of "the last 7 days of complete hours"),
    as the charts shade and label such a step: its smaller figures are no drop."""
    text = step_start(value, "day")
    start, first, end = _moment(value), _moment(window_start), _moment(window_end)
    if start is None or end is None:
        return text
    inside = (first is None or start >= first) and start + dt.timedelta(days=1) <= end
    return text if inside else f"{text} (partial)"


def fixed(value: Any, digits: int) -> str:
    """A number with `digits` decimals rounded as the pages round them (Django's
    `floatformat`: the number's shortest decimal form, halves away from zero), so a
    2.25 GPU-h or a 0.125 factor reads alike in the CLI and on a page."""
    exact = Decimal(repr(float(value)))
    return f"{exact.quantize(Decimal(1).scaleb(-digits), rounding=ROUND_HALF_UP):f}"


def gpu_hours(value: Any) -> str:
    """GPU-hours with one decimal, as the pages show them: 4162.3."""
    return EMPTY if value is None else fixed(value, 1)


def factor(value: Any) -> str:
    """A fair-share factor or level FS with two decimals, as the fair-share dashboard
    shows it: 0.125 -> '0.13'."""
    return EMPTY if value is None else fixed(value, 2)


def report_window(start: str | None, end: str) -> str:
    """How every reporting figure states its window, as the pages do: 'last 7 days of
    complete hours, to 2026-12-05 14:00 CET'."""
    first, last = _moment(start), _moment(end)
    days = round((last - first).total_seconds() / 86400) if first and last else None
    length = f"last {days} day{'' if days == 1 else 's'}" if days is not None else "the hours"
    return f"{length} of complete hours, to {when(end)}"


def cycle_as_of(value: str | None, *, from_cycle: bool = True) -> str:
    """How every scheduling figure states its time, as the pages do: 'as of the cycle at
    2026-12-05 14:09:03 CET' ('(no cycle has run yet)' before the first)."""
    if not from_cycle:
        return f"as of {when(value, seconds=True)} (no cycle has run yet)"
    return f"as of the cycle at {when(value, seconds=True)}"


def ago(value: str | None, now: dt.datetime | None = None) -> str:
    """An API time as how long ago or how far ahead it is: '12 s ago', 'in 3 h 10 min'."""
    moment = _moment(value)
    if moment is None:
        return value or EMPTY
    delta = (moment - (now or dt.datetime.now(dt.UTC))).total_seconds()
    if abs(delta) < 45:
        return "now"
    return f"in {span(delta)}" if delta > 0 else f"{span(delta)} ago"


def since(value: str | None, now: dt.datetime | None = None) -> str:
    """How long ago an API time was, as a span ('40 s', '3 h 10 min'; '0 s' for a time
    ahead of the clock): the WAITED column, where 'now' would read as no answer."""
    moment = _moment(value)
    if moment is None:
        return value or EMPTY
    return span(max(0.0, ((now or dt.datetime.now(dt.UTC)) - moment).total_seconds()))


def span(value: float) -> str:
    """Seconds as people say them: 3 h 10 min, 12 min, 2 d 4 h, 40 s (the pages' words)."""
    return span_text(value)


def runtime(value: float | int | None) -> str:
    """A minimum runtime, exactly, as the pages write it: 235 -> 3 min 55 s."""
    return EMPTY if value is None else runtime_text(value)


def _moment(value: str | None) -> dt.datetime | None:
    if not value:
        return None
    try:
        moment = dt.datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    return moment.astimezone()


def plural(n: int, noun: str) -> str:
    """'1 GPU', '8 GPUs', '1 job', '100 jobs'."""
    return f"{n} {noun}{'' if n == 1 else 's'}"


def tail(text: str | None, limit: int = 24) -> str:
    """A long path cut from the left at a "/" ('…/pretraining'): its end names it
    (`path_tail`, the charts' rule too)."""
    return path_tail(text, limit)


def clip(text: str, limit: int) -> str:
    """Text cut to at most `limit` characters after a whole word, with an ellipsis
    ('waiting: project a1 is at 82% of its…'): never inside a word but for a first word
    longer than `limit` itself, and then with the ellipsis too."""
    if len(text) <= limit:
        return text
    head = text[: max(0, limit - 1)]
    indent = len(text) - len(text.lstrip(" "))  # a tree's indentation is no word break
    if text[len(head)] != " ":  # the cut falls inside a word: back to its start
        space = head.rfind(" ")
        head = head[:space] if space > indent else head
    return head.rstrip(" ;,") + plain.ELLIPSIS


def share(value: Any) -> str:
    """A share (fraction) as the pages show it: 0.125 -> '12.50%'; None -> '–'."""
    return share_text(value)


def percent(value: Any) -> str:
    """A ratio (GPU utilization, a delivery ratio) as the pages show it: 0.953 -> '95.3%'."""
    return percent_text(value)


def known_percent(value: Any) -> str:
    """A measured ratio (GPU utilization): None is "unknown" (no metrics), never 0."""
    return "unknown" if value is None else percent(value)


def number(value: Any) -> str:
    if value is None:
        return EMPTY
    if isinstance(value, float):
        return f"{value:.4g}" if abs(value) < 1000 else f"{value:,.0f}"
    return str(value)


def to_terminal() -> bool:
    """Whether standard output is a terminal, as rich judges one (else a pipe or a file:
    a script reads it)."""
    return plain.styled()


def terminal_width() -> int:
    """The width a table is laid out in: the terminal's, or COLUMNS, or 80."""
    return out().width if to_terminal() else plain.width()


def fits(columns: Sequence[str], rows: Sequence[Sequence[Any]], *, wrap: str) -> bool:
    """Whether a table of `rows` fits the terminal with every column whole but `wrap`,
    which is folded over lines at least WRAP_MIN wide."""
    widths = [
        max([len(column), *(len(v if isinstance(v, str) else number(v)) for v in cells)])
        for column, cells in zip(columns, zip(*rows, strict=True), strict=True)
        if column != wrap
    ]
    return sum(widths) + WRAP_MIN + 2 * len(widths) <= terminal_width()


def table(
    columns: Sequence[str],
    rows: Iterable[Sequence[Any]],
    *,
    title: str | None = None,
    wrap: Sequence[str] = (),
    crop: Sequence[str] = (),
    crop_left: Sequence[str] = (),
    whole: bool | None = None,
) -> None:
    """A table that keeps one line per row on a narrow terminal: every column keeps its
    values whole except those in `wrap` (folded over lines: long text worth reading
    whole), `crop` (cut after a word with an ellipsis, `clip`, to what the terminal
    leaves them) and `crop_left` (paths, cut from the left as `tail` does: their end
    names them); the cut columns share what the others leave, one that needs less than
    its share leaving the rest to the others (`_most_widths`). `whole`: every value
    whole, one line per row however long; by default into a pipe or a file (a script
    reads whole values: `allot usage | grep language-models/pretraining` finds it), the
    title at the start of its line (centred over a line that long, it began after
    hundreds of blanks). A
    text cell's UTC times (a reason's, a blocker's) are shown local (`local_times`).
    Where the whole columns leave the others less than their least width, the table is
    laid out wider than the terminal (which folds its lines) rather than cut a figure."""
    cells = [[number(v) if not isinstance(v, str) else local_times(v) for v in row] for row in rows]
    widths = [
        max([len(line) for line in column.splitlines()] + [len(r[i]) for r in cells])
        for i, column in enumerate(columns)
    ]
    if whole if whole is not None else not to_terminal():
        span = max(sum(widths) + 2 * (len(columns) - 1), len(title or ""))
        layout: plain.Layout = [("", None, None)] * len(columns)
        if not plain.table(columns, cells, layout, title, span, title_justify="left"):
            _rich_table(columns, cells, layout, title, span, title_justify="left")
        return
    cut = (*crop, *crop_left)
    fixed = sum(w for c, w in zip(columns, widths, strict=True) if c not in cut + tuple(wrap))
    fixed += WRAP_MIN * sum(1 for c in columns if c in wrap) + 2 * (len(columns) - 1)
    width = max(terminal_width(), fixed + CROP_MIN * sum(1 for c in columns if c in cut))
    most = _most_widths(
        {c: w for c, w in zip(columns, widths, strict=True) if c in cut}, width - fixed
    )
    for i, column in enumerate(columns):
        if column in cut:
            shorten = tail if column in crop_left else clip
            for row in cells:
                row[i] = shorten(row[i], most[column])
    layout = [  # (overflow, least width, most width); "": the values stay whole
        ("fold", WRAP_MIN, None)
        if c in wrap
        else ("ellipsis", None, most[c])
        if c in cut
        else ("", None, None)
        for c in columns
    ]
    if not plain.table(columns, cells, layout, title, width):
        _rich_table(columns, cells, layout, title, width)


def _most_widths(needed: dict[str, int], room: int) -> dict[str, int]:
    """The most width of each cut column (`needed`: its widest value): `room` shared out
    evenly, a column that needs less than its share keeping just what it needs and
    leaving the rest to the others (a short path leaves a reason the terminal's width,
    not half of it); at least CROP_MIN each."""
    most: dict[str, int] = {}
    left = dict(needed)
    while left:
        share = room // len(left)
        fit = {c: w for c, w in left.items() if w <= share}
        if not fit:
            most.update(dict.fromkeys(left, max(CROP_MIN, share)))
            break
        for c, w in fit.items():
            most[c] = w
            room -= w
            del left[c]
    return most


def _rich_table(
    columns: Sequence[str],
    cells: list[list[str]],
    layout: plain.Layout,
    title: str | None,
    width: int,
    title_justify: Literal["left", "center"] = "center",
) -> None:
    from rich.table import Table  # here, not at the top: start-up time (module docstring)
    from rich.text import Text

    t = Table(
        title=title, title_justify=title_justify, header_style="bold", box=None, pad_edge=False
    )
    for column, (overflow, low, high) in zip(columns, layout, strict=True):
        if overflow == "fold":
            t.add_column(column, overflow="fold", min_width=low, ratio=1)
        elif overflow == "ellipsis":
            t.add_column(column, overflow="ellipsis", no_wrap=True, max_width=high)
        else:
            t.add_column(column, no_wrap=True)
    for row in cells:  # as text: a job's name or a reason may hold "[...]", no markup
        t.add_row(*(Text(cell) for cell in row))
    print_table(t, width)


def print_table(t: Any, width: int | None = None) -> None:
    """Print rich's table `t`; into a pipe without the blanks that pad its last column."""
    console = out(width)
    if to_terminal():
        console.print(t)
        return
    with console.capture() as captured:
        console.print(t)
    sys.stdout.write("".join(f"{line.rstrip()}\n" for line in captured.get().splitlines()))


def pairs(items: Sequence[tuple[str, Any]]) -> None:
    """Key/value lines (`allot show`); a value's UTC times are shown local."""
    from rich.table import Table  # here, not at the top: start-up time (module docstring)
    from rich.text import Text

    t = Table(box=None, show_header=False, pad_edge=False)
    t.add_column(style="bold")
    t.add_column(overflow="fold")
    rows = [(k, number(v) if not isinstance(v, str) else local_times(v)) for k, v in items]
    for key, value in rows:  # a value as text: a job's name may hold "[...]", no markup
        t.add_row(key, Text(value))
    # into a pipe each value whole on its line (`scontrol show job` too), folded on a terminal
    # the keys' column is as wide as the longest key, whatever row holds the longest value
    whole = (
        max((len(k) for k, _ in rows), default=0) + 2 + max((len(v) for _, v in rows), default=0)
    )
    print_table(t, None if to_terminal() else max(whole, plain.width()))
