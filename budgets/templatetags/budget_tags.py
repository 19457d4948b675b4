from decimal import Decimal

from django import template

from budgets.shares import share_change_text, share_text, weight_text

register = template.Library()


@register.filter
def weight(value: Decimal | None) -> str:
    """A weight without trailing zeros: 50.0000 -> 50, 2.5000 -> 2.5."""
    return "–" if value is None else weight_text(value)


@register.filter
def share(value) -> str:
    """A share (fraction) as a percentage in the one format: 0.125 -> 12.50%."""
    return share_text(value)


@register.filter
def share_change(before, after) -> str:
    """A share's change, signed, the difference of the two shares as shown:
    `{{ old|share_change:new }}`, 12.50% -> 15.00% is +2.50%."""
    return share_change_text(before, after)
