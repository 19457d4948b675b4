"""Formatting for the dashboards' numbers."""

from django import template

register = template.Library()


@register.filter
def percent(value) -> str:
    """0.953 -> '95.3%'; None -> '–'."""
    if value is None:
        return "–"
    return f"{float(value) * 100:.1f}%"


@register.filter
def div(value, divisor) -> float:
    return float(value) / float(divisor)
