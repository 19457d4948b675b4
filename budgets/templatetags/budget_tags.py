from decimal import Decimal

from django import template

from budgets.shares import weight_text

register = template.Library()


@register.filter
def weight(value: Decimal | None) -> str:
    """A weight without trailing zeros: 50.0000 -> 50, 2.5000 -> 2.5."""
    return "–" if value is None else weight_text(value)
