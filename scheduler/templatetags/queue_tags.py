"""The queue page's links from other pages: the page of the queue a position is on."""

from __future__ import annotations

from django import template

from scheduler.selectors.cluster_queue import PAGE_SIZE

register = template.Library()


@register.simple_tag
def queue_page_of(position: int | None) -> int:
    """`{% queue_page_of 137 %}`: the queue page (of PAGE_SIZE rows) showing `position`."""
    return 1 if not position else (int(position) - 1) // PAGE_SIZE + 1
