"""Times on pages: `{% moment at %}` writes a `<time>` element that reads in UTC without
JavaScript and that static/js/time.js rewrites to the reader's local time, with how far
it is from now ("in 3 h 10 min", "12 min ago"), refreshed while the page stays open."""

from __future__ import annotations

import datetime as dt
import re

from django import template
from django.utils import timezone
from django.utils.html import conditional_escape, format_html
from django.utils.safestring import SafeString

from allot_common.figures import runtime_text
from config.clock import relative_text, span_text

register = template.Library()


@register.simple_tag
def moment(at: dt.datetime | None, relative: bool = True, seconds: bool = False) -> SafeString:
    """`<time>` for `at`: 'YYYY-MM-DD HH:MM UTC (in 3 h 10 min)' until the script shows
    it in the reader's zone; '–' for no time."""
    if at is None:
        return SafeString("–")
    utc = at.astimezone(dt.UTC)
    text = utc.strftime("%Y-%m-%d %H:%M:%S" if seconds else "%Y-%m-%d %H:%M") + " UTC"
    rel = relative_text(utc, timezone.now(), seconds=seconds) if relative else ""
    return format_html(
        '<time datetime="{}" data-local="{}"{}>{}{}</time>',
        utc.isoformat().replace("+00:00", "Z"),
        "seconds" if seconds else "minutes",
        SafeString(' data-relative="1"') if relative else "",
        text,
        f" ({rel})" if rel else "",
    )


@register.filter
def duration(seconds: float | int | None) -> str:
    """Seconds as '3 h 10 min'; '–' for none."""
    return "–" if seconds is None else span_text(float(seconds))


@register.filter
def runtime(seconds: float | int | None) -> str:
    """A minimum runtime exactly, as the CLI and the reasons write it: '3 min 55 s'."""
    return "–" if seconds is None else runtime_text(float(seconds))


@register.simple_tag
def report_window(days: int, until: dt.datetime | None) -> SafeString:
    """How every reporting figure states its window (docs/concepts.md#windows): "last 7
    days of complete hours, to <its end>" (the end of the last complete hour)."""
    return format_html(
        'last {} day{} of complete hours, to <span class="window-end">{}</span>',
        days,
        "" if days == 1 else "s",
        moment(until),
    )


@register.simple_tag
def cycle_as_of(at: dt.datetime | None, from_cycle: bool = True) -> SafeString:
    """How every scheduling figure states its time (docs/concepts.md#windows): "as of
    the cycle at <the queue's computed_at>"; before the first cycle, "as of <now> (no
    cycle has run yet)"."""
    if not from_cycle:
        return format_html("as of {} (no cycle has run yet)", moment(at, seconds=True))
    return format_html(
        'as of the cycle at <span class="cycle-at">{}</span>', moment(at, seconds=True)
    )


# "2026-12-05 20:01 UTC" as reasons and blockers write a time in their text (API and CLI
# read them as text, in UTC)
_UTC_STAMP = re.compile(r"(\d{4}-\d{2}-\d{2}) (\d{2}:\d{2}) UTC")


@register.filter
def local_times(text: str | None) -> SafeString:
    """`text` escaped, with every 'YYYY-MM-DD HH:MM UTC' in it as a `<time>` that the
    page shows in the reader's zone like every other time (`moment`)."""

    def as_time(match: re.Match[str]) -> str:
        at = dt.datetime.fromisoformat(f"{match[1]}T{match[2]}+00:00")
        return str(moment(at))

    return SafeString(_UTC_STAMP.sub(as_time, str(conditional_escape(text or ""))))
