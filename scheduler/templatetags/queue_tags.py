"""How the queue page and My jobs write a pending job's place and estimated start (one
writing for both, in Python: a page of 50 rows would cost more through an include per
cell), and the queue page a position is on (the job page's link to it)."""

from __future__ import annotations

from typing import Any

from django import template
from django.utils.html import format_html
from django.utils.safestring import SafeString

from ops.templatetags.clock import moment
from scheduler.selectors.cluster_queue import PAGE_SIZE

register = template.Library()

NO_ESTIMATE = SafeString('<span class="muted">over 30 days</span>')
ESTIMATING = SafeString('<span class="muted">being computed</span>')


@register.simple_tag
def queue_page_of(position: int | None) -> int:
    """`{% queue_page_of 137 %}`: the queue page (of PAGE_SIZE rows) showing `position`."""
    return 1 if not position else (int(position) - 1) // PAGE_SIZE + 1


@register.simple_tag
def queue_position(position: int | None, length: int | None) -> SafeString:
    """`{% queue_position 3 995 %}`: "3 of 995" (docs/concepts.md#queue-position); a
    pending job no cycle has placed yet: "next cycle"."""
    if not position:
        return SafeString('<span class="muted">next cycle</span>')
    return format_html("{} of {}", position, length)


@register.simple_tag
def estimated_start(eta: dict[str, Any] | None) -> SafeString:
    """`{% estimated_start eta %}`: the start as the job page writes it (a `<time>` in
    the reader's zone with "in 3 h 10 min"), "now" while the jobs it preempts exit,
    "being computed" before the first answer, "over 30 days" past the forward run's
    horizon, "due now" once the estimate has passed without a start (`overdue`, until the
    next answer); "–" without an estimate (docs/concepts.md#eta)."""
    if not eta:
        return SafeString("–")
    if eta.get("method") == "estimating":
        return ESTIMATING
    if eta.get("method") == "victims-stopping":
        return SafeString("now")
    if not eta.get("start"):
        return NO_ESTIMATE
    if eta.get("overdue"):
        return format_html(
            'due now <span class="muted">(it was expected by {}; a new estimate follows)</span>',
            moment(eta["start"], relative=False),
        )
    return moment(eta["start"])
