"""Share arithmetic (pure)."""

from decimal import Decimal

import pytest
from hypothesis import given
from hypothesis import strategies as st

from budgets.shares import compute_shares, shares_with_edits


def test_spec_example_a1_is_entitled_to_35_percent():
    rows = [("org", None, 1), ("A", "org", 50), ("B", "org", 50), ("A1", "A", 70), ("A2", "A", 30)]
    shares = compute_shares(rows)
    assert shares["A1"].entitled == pytest.approx(0.35)
    assert shares["A2"].entitled == pytest.approx(0.15)
    assert shares["B"].entitled == pytest.approx(0.5)
    assert shares["A1"].share == pytest.approx(0.7)


def test_all_zero_siblings_get_zero_share_not_a_division_error():
    rows = [("org", None, 1), ("A", "org", 0), ("B", "org", 0), ("A1", "A", 5)]
    shares = compute_shares(rows)
    assert shares["A"].share == 0 and shares["B"].share == 0
    assert shares["A1"].share == 1 and shares["A1"].entitled == 0


def test_zero_weight_sibling_gets_nothing_and_others_split_the_rest():
    rows = [("org", None, 1), ("A", "org", 3), ("B", "org", 1), ("C", "org", 0)]
    shares = compute_shares(rows)
    assert (shares["A"].entitled, shares["B"].entitled, shares["C"].entitled) == (0.75, 0.25, 0.0)


def test_entitled_shares_of_leaves_sum_to_one():
    rows = [
        ("o", None, 1),
        ("p", "o", Decimal("2.5")),
        ("q", "o", 7),
        ("p1", "p", 1),
        ("p2", "p", 3),
        ("q1", "q", 1),
    ]
    shares = compute_shares(rows)
    assert sum(shares[x].entitled for x in ("p1", "p2", "q1")) == pytest.approx(1.0)


def test_preview_with_edits_changes_only_the_affected_subtree():
    rows = [("org", None, 1), ("A", "org", 50), ("B", "org", 50), ("A1", "A", 70), ("A2", "A", 30)]
    after = shares_with_edits(rows, {"A1": Decimal(30)})
    assert after["A1"].entitled == pytest.approx(0.25)
    assert after["A2"].entitled == pytest.approx(0.25)
    assert after["B"].entitled == pytest.approx(0.5)


@given(st.text(max_size=30))
def test_name_slug_is_djangos_slugify(name):
    from django.utils.text import slugify

    from scheduler.core.engine.budget_tree import name_slug

    assert name_slug(name) == slugify(name)
