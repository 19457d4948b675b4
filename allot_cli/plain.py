"""Lines and tables written without rich where rich would write the same characters.

rich's import is ~35 ms of CPU, a third of an `allot queue` call, and a script that polls
`allot queue` into a pipe gets no colour or bold from it: there rich writes plain text,
its tables padded columns two spaces apart. This module writes that text itself when
nothing in it is rich's to interpret: standard output (standard error for an error's
line) is not a terminal as rich judges one (`TTY_COMPATIBLE`, `FORCE_COLOR`, `isatty`),
every character is printable ASCII (or
the `…` that `render.tail` adds), no `[` (markup), no `:name:` that could be an emoji
code, no line break in a cell, and the table fits the width rich would use. Anything
else returns False and `render` hands it to rich, so the output is rich's in every case
(tests/cli/test_plain.py compares the two)."""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Sequence
from typing import Literal, TextIO

ELLIPSIS = "…"
_PLAIN = re.compile(r"[ -Z\\\]^_`a-~…]*")  # printable ASCII but `[`, and the ellipsis
_EMOJI_LIKE = re.compile(r":([^\s:]*)(?=:)")  # each `:name:` rich might read as an emoji
_DIGIT_EMOJI = {"100", "1234"}  # rich's emoji codes made of digits only

# Per column: (overflow, least width, most width), as `render.table` sets them.
Layout = Sequence[tuple[str, int | None, int | None]]


def styled(stream: TextIO | None = None) -> bool:
    """Whether rich would treat `stream` (standard output by default) as a terminal
    (escape codes, its size)."""
    env = os.environ
    compatible = env.get("TTY_COMPATIBLE", "")
    if compatible in ("0", "1"):
        return compatible == "1"
    force = env.get("FORCE_COLOR")
    if force is not None:
        return force != ""
    try:
        return (stream or sys.stdout).isatty()
    except ValueError:
        return False


def width() -> int:
    """The width rich's console uses: `COLUMNS`, else the size of the first standard
    stream that is a terminal (80 if it says 0), else 80."""
    columns = os.environ.get("COLUMNS")
    if columns is not None and columns.isdigit():
        return int(columns)  # 0 too, as rich takes it
    for fd in (0, 1, 2):
        try:
            return os.get_terminal_size(fd).columns or 80
        except (AttributeError, ValueError, OSError):
            continue
    return 80


def is_plain(text: str) -> bool:
    """Whether rich prints `text` as it is: plain characters, no markup, no emoji code."""
    if _PLAIN.fullmatch(text) is None:
        return False
    return all(name.isdigit() and name not in _DIGIT_EMOJI for name in _EMOJI_LIKE.findall(text))


def line(text: str, stream: TextIO | None = None) -> bool:
    """Print `text` on `stream` (standard output by default) as rich would (one line that
    fits); False, printing nothing, where rich is needed."""
    limit = width()
    if (
        styled(stream)
        or limit < 1
        or text != text.strip()
        or len(text) > limit
        or not is_plain(text)
    ):
        return False
    (stream or sys.stdout).write(text + "\n")
    return True


def table(
    columns: Sequence[str],
    cells: Sequence[Sequence[str]],
    layout: Layout,
    title: str | None,
    limit: int | None = None,
    title_justify: Literal["left", "center"] = "center",
) -> bool:
    """Print a table as rich's `Table(box=None, pad_edge=False)` does, less the blanks
    that end its lines (`render` strips rich's too, into a pipe), when it fits (in
    `limit` columns, the terminal's width by default): each
    column as wide as its widest cell (at least its minimum, at most its maximum; a cell
    over the maximum cut with an ellipsis), two spaces apart, the title above, centred
    or ("left", rich's `title_justify`) at the start of its line.
    False, printing nothing, where rich is needed."""
    if title is not None and (title != title.strip() or "  " in title):
        return False  # rich centres the title's words, wrapped: not spaces around them
    if styled() or not all(is_plain(text) for text in (*columns, *(title or "",))):
        return False
    if not all(is_plain(cell) for row in cells for cell in row):
        return False
    widths = []
    for i, column in enumerate(columns):
        _, low, high = layout[i]
        w = max([len(column), *(len(row[i]) for row in cells)])
        w = max(w, low or 0)
        widths.append(min(w, high) if high is not None else w)
    total = sum(widths) + 2 * (len(widths) - 1)
    if total > (limit or width()) or len(title or "") > total or not all(widths):
        return False
    out = []
    if title:
        left = (total - len(title)) // 2 if title_justify == "center" else 0
        out.append(" " * left + title)
    for row in (columns, *cells):
        out.append("  ".join(_fit(text, w) for text, w in zip(row, widths, strict=True)).rstrip())
    sys.stdout.write("\n".join(out) + "\n")
    return True


def _fit(text: str, w: int) -> str:
    """A cell padded to its column's width, or cut with an ellipsis to it."""
    return text.ljust(w) if len(text) <= w else text[: w - 1] + ELLIPSIS
