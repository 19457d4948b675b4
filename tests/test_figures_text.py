"""How a figure is written (`allot_common.figures`), at the boundaries of each rule: the
units a duration changes at, the sign of a share's change, the delivery ratio's empty
case, the usage window's words.

Written for the mutants that survived the surfaces' tests (`tools/mutants.py`,
docs/testing.md "How the suite was checked"): those tests compare two surfaces with each
other, so a wrong text on both passed."""

from __future__ import annotations

import math
from decimal import Decimal

import pytest

from allot_common.figures import (
    EMPTY,
    change_text,
    delivery_ratio,
    fixed_text,
    hours_text,
    level_fs_text,
    path_tail,
    percent_text,
    runtime_text,
    share_change_text,
    share_text,
    span_text,
    usage_window_text,
)


@pytest.mark.parametrize(
    ("seconds", "text"),
    [
        (0, "0 s"),
        (59.4, "59 s"),
        (59.6, "1 min"),  # rounded to the second first
        (60, "1 min"),
        (3599, "59 min"),
        (3600, "1 h"),
        (3660, "1 h 1 min"),
        (11400, "3 h 10 min"),
        (86399, "23 h 59 min"),
        (86400, "1 d"),
        (187200, "2 d 4 h"),
        (-125, "2 min"),  # a time relative to now, either side
    ],
)
def test_a_span_reads_its_two_largest_units(seconds, text):
    """A span is written in its two largest units, the smaller rounded down, switching
    unit at exactly 60 s, 60 min and 24 h."""
    assert span_text(seconds) == text


@pytest.mark.parametrize(
    ("seconds", "text"),
    [
        (0, "0"),
        (59, "59 s"),
        (235, "3 min 55 s"),
        (3600, "1 h"),
        (5400, "1 h 30 min"),
        (90061, "1 d 1 h 1 min 1 s"),
        (86400, "1 d"),
        (-61, "1 min 1 s"),
    ],
)
def test_a_runtime_reads_every_unit_it_has(seconds, text):
    """A duration someone set is written exactly: every non-zero unit, largest first;
    '0' for none."""
    assert runtime_text(seconds) == text


@pytest.mark.parametrize(
    ("seconds", "text"),
    [
        (0, "0 min"),
        (2700, "45 min"),
        (3599, "60 min"),
        (3600, "1.0 h"),
        (9000, "2.5 h"),
        (360181, "100.1 h"),  # 100.05 h and a second: rounds up
    ],
)
def test_hours_text_switches_to_hours_at_one_hour(seconds, text):
    """Below an hour in whole minutes, from one hour on in hours with one decimal."""
    assert hours_text(seconds) == text


def test_the_usage_window_names_its_days_or_its_half_life():
    """The usage window is 'over N days' (one day singular), or with a half-life the
    decayed window and its half-life; a half-life of 0 or None means no decay."""
    assert usage_window_text(7 * 86400, None) == "over 7 days"
    assert usage_window_text(86400, None) == "over 1 day"
    assert usage_window_text(1.5 * 86400, 0) == "over 1.5 days"
    assert usage_window_text(7 * 86400, 7200) == "over a decayed window (half-life 2.0 h)"


def test_the_delivery_ratio_is_delivered_over_entitled_and_empty_without_entitlement():
    """Delivered / entitled, not capped at 1; None for a project entitled to (almost)
    nothing, so no page divides by zero or shows a ratio of noise."""
    assert delivery_ratio(30.0, 20.0) == 1.5
    assert delivery_ratio(5.0, 20.0) == 0.25
    assert delivery_ratio(0.0, 20.0) == 0.0
    assert delivery_ratio(5.0, 0.0) is None
    assert delivery_ratio(5.0, 1e-10) is None
    assert delivery_ratio(5.0, 1e-9) is None
    assert delivery_ratio(1e-6, 1e-6) == 1.0


def test_a_shares_change_is_signed_and_no_change_has_no_sign():
    """A gain reads '+', a loss '-', and no change '0.00%' with neither; in the
    shares' two decimals."""
    assert share_change_text(0.125, 0.15) == "+2.50%"
    assert share_change_text(Decimal("0.1"), Decimal("0.125")) == "+2.50%"
    assert share_change_text(0.15, 0.125) == "-2.50%"
    assert share_change_text(0, 0) == "0.00%"
    assert share_change_text(0.3, 0.3) == "0.00%"


def test_a_shares_change_is_the_difference_of_the_shares_as_shown():
    """12.504% -> 12.496% shows 12.50% -> 12.50%: no change ('-0.01%' from the unrounded
    difference); 12.494% -> 12.506% shows 12.49% -> 12.51%: +0.02% (not +0.01%)."""
    for before, after in ((0.12504, 0.12496), (0.12494, 0.12506), (1 / 3, 2 / 7)):
        shown = Decimal(share_text(after)[:-1]) - Decimal(share_text(before)[:-1])
        assert Decimal(share_change_text(before, after)[:-1]) == shown
    assert share_change_text(0.12504, 0.12496) == "0.00%"
    assert share_change_text(0.12494, 0.12506) == "+0.02%"
    assert share_change_text(Decimal("0.12504"), Decimal("0.12496")) == "0.00%"


def test_shares_and_ratios_round_half_up_and_an_unknown_is_the_dash():
    """A share has two decimals, a ratio one, both rounded half up from the decimal the
    number prints as; None is the one empty mark."""
    assert share_text(0.125) == "12.50%"
    assert share_text(0.15625) == "15.63%"
    assert share_text(Decimal("0.145")) == "14.50%"
    assert percent_text(0.953) == "95.3%"
    assert percent_text(0.9535) == "95.4%"
    assert share_text(None) == percent_text(None) == EMPTY
    # scaled in decimal: 0.0045 x 100 is 0.45 (the float product is 0.44999...)
    assert percent_text(0.0045) == "0.5%"
    assert share_text(0.00035) == "0.04%"
    # a Decimal is rounded from its own digits, not from the nearest float's
    assert share_text(Decimal("0.12344999999999999999")) == "12.34%"


def test_fixed_text_empty_infinite_and_negative_zero():
    """None writes nothing, an infinity as Python writes it, and a value that rounds to
    zero never as '-0'."""
    assert fixed_text(None, 2) == ""
    assert fixed_text(math.inf, 2) == "inf"
    assert fixed_text(-0.004, 2) == "0.00"
    assert fixed_text(2.675, 2) == "2.68"
    assert fixed_text(7, 0) == "7"


def test_a_level_fair_share_of_a_node_that_used_nothing_is_infinity():
    """Level FS is written with two decimals by default, '∞' for a node with no usage."""
    assert level_fs_text(math.inf) == "∞"
    assert level_fs_text(1.235) == "1.24"
    assert level_fs_text(1.235, 1) == "1.2"


def test_a_change_is_the_difference_of_the_two_figures_shown():
    """A change is after minus before as both are shown (so the three figures add up),
    signed: '+' for a gain, '-' for a loss, no sign for none; None counts as 0."""
    assert change_text(278.25, 235.54, 1) == "-42.8"  # 235.5 - 278.3, not -42.71
    assert change_text(1, 2.5, 1) == "+1.5"
    assert change_text(0.04, 0.06, 1) == "+0.1"  # 0.0 -> 0.1 as shown
    assert change_text(0.06, 0.04, 1) == "-0.1"
    assert change_text(None, 3, 0) == "+3"
    assert change_text(3, None, 0) == "-3"
    assert change_text(5, 5, 2) == "0.00"


@pytest.mark.parametrize(
    ("path", "limit", "text"),
    [
        (None, 10, ""),
        ("org/a", 5, "org/a"),  # fits exactly
        (
            "org/research/language-models/post-training",
            44,
            "org/research/language-models/post-training",
        ),
        ("org/research/language-models/post-training", 31, "…/language-models/post-training"),
        ("org/research/language-models/post-training", 30, "…/post-training"),
        ("a/b/c/d", 5, "…/c/d"),
        ("org/abcdefgh", 10, "…/abcdefgh"),
        ("org/abcdefgh", 9, "abcdefgh"),  # the name alone fits, with "…/" it would not
        ("org/abcdefghij", 10, "abcdefghij"),  # a name of exactly `limit` is kept whole
        ("org/a-very-long-project-name-1", 10, "…ct-name-1"),
    ],
)
def test_a_path_is_cut_from_the_left_at_a_slash(path, limit, text):
    """A path longer than `limit` keeps its last whole names behind '…/', never part of
    a name; a name longer than `limit` alone keeps its end behind '…'."""
    assert path_tail(path, limit) == text
    assert len(text) <= limit
