"""The dashboards' tables write their numbers with `fixed` (allot_common.figures.
fixed_text), which must write what Django's `floatformat` wrote before it, digit for
digit: ties rounded half up from the shortest decimal form, no "-0.0", integers, Decimals,
None and infinities alike, in the project's locale settings."""

from __future__ import annotations

import math
from decimal import Decimal

import pytest
from django.template import Context, Template
from django.template.defaultfilters import floatformat
from hypothesis import given
from hypothesis import strategies as st

from allot_common.figures import fixed_text

EDGES = [0, 0.0, -0.0, 0.05, 0.25, -0.25, 0.35, 1.45, 2.675, 1234.25, -0.04, -0.05, 1e-7,
         12345678.95, 1e17, 3, -7, 1 / 3, Decimal("2.50"), Decimal("-0.049"), None, math.inf,
         -math.inf, math.nan, Decimal("Infinity"), 1e300, 5e-324,
         Decimal("1E-199"), Decimal("1E-200")]  # fmt: skip
# (the last two: 200 and 201 digits, either side of where floatformat stops rounding)


@pytest.mark.parametrize("decimals", [0, 1, 2])
@pytest.mark.parametrize("value", EDGES)
def test_fixed_writes_what_floatformat_writes(value, decimals):
    assert fixed_text(value, decimals) == floatformat(value, decimals)


@given(
    value=st.floats(allow_nan=False) | st.integers(min_value=-(10**18), max_value=10**18),
    decimals=st.integers(min_value=0, max_value=3),
)
def test_fixed_writes_what_floatformat_writes_for_any_number(value, decimals):
    assert fixed_text(value, decimals) == floatformat(value, decimals)


def test_the_filter_writes_fixed_text():
    template = Template("{% load dashboards %}{{ a|fixed:1 }} {{ b|fixed:0 }} {{ c|fixed:2 }}")
    assert template.render(Context({"a": 1234.25, "b": 10751.6, "c": None})) == "1234.3 10752 "
