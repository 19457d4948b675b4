"""How a figure is written, the same on every surface: the pages (template filters), the
API's texts (queue reasons, explained changes) and the `allot` CLI.

Plain Python (no Django, no server code, no CLI code; import-linter contract in
pyproject.toml), so the server and the CLI format a share, a ratio, an empty value and
the usage window with the same function.
"""

from __future__ import annotations

import math
from decimal import ROUND_HALF_UP, Context, Decimal

# The one mark of "no value" (no ratio without entitlement, no factor, unknown) on every
# page and in the CLI. An en dash is one terminal cell like "-" (rich and wcwidth count
# it as one), so the CLI's tables keep their widths.
EMPTY = "–"

# A share (among siblings, entitled) is a percentage with this many decimals everywhere,
# so 12.5% reads "12.50%" on every page and in the CLI (not "12%" here and "12.5%" there).
SHARE_DECIMALS = 2
# A ratio (GPU utilization, a delivery ratio): 0.953 -> "95.3%".
PERCENT_DECIMALS = 1


def share_text(fraction: float | Decimal | None) -> str:
    """A share: 0.125 -> '12.50%'; None -> EMPTY."""
    if fraction is None:
        return EMPTY
    return _percent(fraction, SHARE_DECIMALS)


def share_change_text(before: float | Decimal, after: float | Decimal) -> str:
    """A share's change from `before` to `after` (fractions), signed, as the difference
    of the two as shown (`share_text`, `change_text`'s rule), so the figures beside it
    add up: 0.125 -> 0.15 is '+2.50%'; 12.504% -> 12.496% shows 12.50% -> 12.50% and
    '0.00%', where the unrounded -0.008 points gave '-0.01%'."""
    return change_text(_percent_points(before), _percent_points(after), SHARE_DECIMALS) + "%"


def percent_text(value: float | Decimal | None) -> str:
    """A ratio: 0.953 -> '95.3%'; None -> EMPTY."""
    if value is None:
        return EMPTY
    return _percent(value, PERCENT_DECIMALS)


def _percent(fraction: float | Decimal, decimals: int) -> str:
    """A fraction as a percentage rounded half up, as GPU-hours and factors are
    (`fixed_text`): 0.15625 -> '15.63%' (the binary float's own rounding wrote '15.62%'
    while the API gave 0.15625). Scaled in decimal, so 0.145 is 14.5, not 14.499..."""
    return fixed_text(_percent_points(fraction), decimals) + "%"


def _percent_points(fraction: float | Decimal) -> Decimal:
    """A fraction in percent, exactly (scaled in decimal)."""
    exact = fraction if isinstance(fraction, Decimal) else Decimal(repr(float(fraction)))
    return exact * 100


_PLACES = [Decimal(1).scaleb(-n) for n in range(7)]
_WIDE = Context(prec=250)  # every digit of what it rounds (200 at most, as floatformat)


def fixed_text(value: float | int | Decimal | None, decimals: int) -> str:
    """A number with `decimals` places, written as Django's `floatformat:<decimals>`
    writes it on these pages (the shortest decimal form rounded half up, no "-0.0";
    tests/dashboards/test_fixed_text.py checks it against the filter), at a fifth of its cost:
    the tables of the dashboards write hundreds. None -> ''."""
    if value is None:
        return ""
    exact = Decimal(value) if isinstance(value, Decimal | int) else Decimal(repr(float(value)))
    if not exact.is_finite():
        return str(value)
    _, digits, exponent = exact.as_tuple()
    if len(digits) + abs(int(exponent)) > 200:  # floatformat writes these as they are
        return str(value)
    rounded = exact.quantize(_PLACES[decimals], ROUND_HALF_UP, _WIDE)
    return format(rounded if rounded else abs(rounded), "f")


def change_text(
    before: float | Decimal | None, after: float | Decimal | None, decimals: int
) -> str:
    """A change from `before` to `after` (None as 0), signed, as the difference of the
    two as shown (`fixed_text` with `decimals` places), so the figures beside it add up:
    278.25 -> 235.54 shows 278.3 -> 235.5 and '-42.8', where the unrounded -42.71 gave
    '-42.7'."""
    shown = Decimal(fixed_text(after or 0, decimals)) - Decimal(fixed_text(before or 0, decimals))
    text = fixed_text(shown, decimals)
    return "+" + text if shown > 0 else text


def level_fs_text(value: float, decimals: int = 2) -> str:
    """A level fair share as every surface writes it (docs/concepts.md#level-fair-share):
    `decimals` places (`fixed_text`), "∞" for a node that used nothing."""
    return "∞" if math.isinf(value) else fixed_text(value, decimals)


def delivery_ratio(delivered_gpu_h: float, entitled_gpu_h: float) -> float | None:
    """The delivery ratio of docs/concepts.md: delivered GPU-hours / demand-capped
    entitlement, not capped; None for a project entitled to nothing. The one function
    behind every surface that shows it (dashboards, /me/, the metric, the simulator
    report, the what-if preview, `allot usage`'s period totals)."""
    return delivered_gpu_h / entitled_gpu_h if entitled_gpu_h > 1e-9 else None


def span_text(seconds: float) -> str:
    """A duration for people, the same on the pages, in the API's texts and in the CLI:
    its two largest units, the smaller one rounded down: 3 h 10 min, 12 min, 2 d 4 h,
    40 s (docs/concepts.md, "How pages show them"). For a time relative to now and for a
    span read off a clock (a wait, an age); a duration someone set is `runtime_text`."""
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


def runtime_text(seconds: float) -> str:
    """A duration someone set (a job's minimum runtime, the protection it gives), exactly:
    every unit that is not zero, largest first, in `span_text`'s words: 235 -> '3 min
    55 s' (never '3 min' on one surface, '4 min' in a reason and '3m55s' in the CLI),
    5400 -> '1 h 30 min', 0 -> '0' (docs/concepts.md#protection)."""
    s = int(round(abs(seconds)))
    minutes, secs = divmod(s, 60)
    hours, minutes = divmod(minutes, 60)
    days, hours = divmod(hours, 24)
    parts = [
        f"{n} {unit}" for n, unit in ((days, "d"), (hours, "h"), (minutes, "min"), (secs, "s")) if n
    ]
    return " ".join(parts) or "0"


def hours_text(s: float) -> str:
    """A duration in minutes below an hour, else in hours: '45 min', '2.5 h'."""
    if s < 3600:
        return f"{s / 60:.0f} min"
    return f"{s / 3600:.1f} h"


def usage_window_text(lookback_s: float, half_life_s: float | None) -> str:
    """The window a project's usage is measured over, in words, as every surface says it
    (queue reasons, the fair-share dashboard, API `fairshare/` `usage_window`, `allot
    shares`): 'over 7 days', or with a half-life 'over a decayed window (half-life
    2.0 h)' (docs/concepts.md#usage)."""
    if half_life_s:
        return f"over a decayed window (half-life {hours_text(half_life_s)})"
    days = lookback_s / 86400
    return f"over {days:g} day{'s' if days != 1 else ''}"


def path_tail(path: str | None, limit: int) -> str:
    """A project path cut from the left at a "/" to at most `limit` characters, as every
    chart axis and CLI column shortens one: 'org/research/language-models/post-training'
    -> '…/language-models/post-training', never inside a name ('…nguage-models/…'). The
    project's own name (the last part) is kept whole where it fits alone; a longer one
    is cut from the left with an ellipsis ('…-a-long-name-1'), its end naming it."""
    path = path or ""
    if len(path) <= limit:
        return path
    parts = path.split("/")
    kept = parts[-1]
    if len(kept) > limit:
        return "…" + kept[-(limit - 1) :]
    for part in reversed(parts[:-1]):
        if len(f"…/{part}/{kept}") > limit:
            break
        kept = f"{part}/{kept}"
    return kept if len(f"…/{kept}") > limit else f"…/{kept}"
