"""Formatting for the dashboards' numbers."""

from django import template

from allot_common.figures import fixed_text, percent_text, share_text
from scheduler.core.engine import rule_label as _rule_label

register = template.Library()


@register.filter
def percent(value) -> str:
    """0.953 -> '95.3%'; None -> '–' (allot_common.figures, as the CLI writes it)."""
    return percent_text(value)


@register.filter(is_safe=True)
def fixed(value, decimals: int) -> str:
    """`floatformat:<decimals>`'s text, faster (allot_common.figures.fixed_text)."""
    return fixed_text(value, int(decimals))


@register.filter
def div(value, divisor) -> float:
    return float(value) / float(divisor)


@register.filter
def share(value) -> str:
    """A share (fraction) in the one format of every page: 0.125 -> '12.50%'."""
    return share_text(value)


@register.filter
def rule_label(rule: str) -> str:
    """A preemption rule in people's words, as the charts' legends name it."""
    return _rule_label(rule or "")


@register.filter
def any_mine(rows) -> bool:
    """Whether a table's rows (the delivery and efficiency selectors' dicts) hold one of
    the viewer's projects (shown in bold, which the table's note then says)."""
    return any(row["mine"] for row in rows)
