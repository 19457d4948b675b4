"""Times on pages: `{% moment at %}` writes a `<time>` element that reads in UTC without
JavaScript and that static/js/time.js rewrites to the reader's local time, with how far
it is from now ("in 3 h 10 min", "12 min ago"), refreshed while the page stays open."""

from __future__ import annotations

import datetime as dt

from django import template
from django.utils import timezone
from django.utils.html import format_html
from django.utils.safestring import SafeString

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
    rel = relative_text(utc, timezone.now()) if relative else ""
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
