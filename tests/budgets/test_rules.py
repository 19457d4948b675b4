"""The budget tree's rules (`budgets.rules`) at their boundaries: the name and weight
limits, negative weights, the tree file's checks and the cap on the problems it lists.

Written for the mutants that survived the tree's tests (`tools/mutants.py`,
docs/testing.md "How the suite was checked"): a limit moved by one, a check that let a
bad node through, a problem reported against the wrong node or field."""

from __future__ import annotations

from decimal import Decimal

import pytest

from budgets.rules import (
    MAX_ISSUES,
    MAX_WEIGHT,
    NAME_MAX_LENGTH,
    NameProblem,
    TreeFileError,
    TreeIssue,
    WeightProblem,
    clean_name,
    parse_tree_document,
    parse_weight,
    shares_by_id,
    sibling_shares,
    weight_number,
)


def test_a_negative_weight_counts_as_zero_in_the_shares():
    """A negative weight gives its node nothing and does not reduce the sum the others
    split (SPEC 1.1); all-zero siblings get 0, not a division error."""
    assert sibling_shares([3, -1, 1]) == [0.75, 0.0, 0.25]
    assert sibling_shares([0, 0]) == [0.0, 0.0]
    assert sibling_shares([-2]) == [0.0]
    assert sibling_shares([Decimal("0.5"), Decimal("1.5")]) == [0.25, 0.75]


def test_entitled_shares_multiply_down_the_path():
    """A node's entitled share is its parent's times its share; a root's is 1, and
    several roots are each 1."""
    rows = [
        ("o", None, 5),
        ("a", "o", 1),
        ("b", "o", 3),
        ("a1", "a", 1),
        ("a2", "a", 1),
        ("x", None, 0),
    ]
    got = shares_by_id(rows)
    assert (got["o"].share, got["o"].entitled) == (1.0, 1.0)
    assert (got["x"].share, got["x"].entitled) == (1.0, 1.0)
    assert (got["b"].share, got["b"].entitled) == (0.75, 0.75)
    assert (got["a1"].share, got["a1"].entitled) == (0.5, 0.125)
    assert shares_by_id([]) == {}


ALNUM = (
    "A name needs at least one letter a-z or digit 0-9 once accents are dropped (it becomes "
    "part of the node's path, which is ASCII: 'Zürich' -> 'zurich')."
)


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("", "A name is required."),
        ("   ", "A name is required."),
        (None, "A name is required."),
        (3, "A name is required."),
        ("x" * (NAME_MAX_LENGTH + 1), "A name has at most 100 characters."),
        ("  " + "x" * (NAME_MAX_LENGTH + 1), "A name has at most 100 characters."),
        (
            "a\u202eb",
            "A name contains the control or invisible character U+202E at position 2; use "
            "printable text.",
        ),
        (
            "ab\x07",
            "A name contains the control or invisible character U+0007 at position 3; use "
            "printable text.",
        ),
        ("a/b", "A name cannot contain '/' (it separates the names in a path)."),
        ("--", ALNUM),
        ("日本", ALNUM),
    ],
)
def test_a_name_is_refused_with_its_reason(name, message):
    """A name is refused when empty, longer than 100 characters, with a control or
    invisible character (named by code point and 1-based position), with '/', or without
    an ASCII letter or digit; the message, shown on the pages and in the API, says which."""
    with pytest.raises(NameProblem) as exc:
        clean_name(name)
    assert str(exc.value) == message


def test_a_name_keeps_its_text_without_surrounding_blanks():
    """Up to 100 characters once stripped; accents are fine when a letter remains."""
    assert clean_name("  prog a ") == "prog a"
    assert clean_name("x" * NAME_MAX_LENGTH) == "x" * NAME_MAX_LENGTH
    assert clean_name("  " + "x" * NAME_MAX_LENGTH + "  ") == "x" * NAME_MAX_LENGTH
    assert clean_name("Zürich") == "Zürich"
    assert clean_name("\tab\n") == "ab"  # blanks around it, not control characters in it


@pytest.mark.parametrize(
    ("value", "weight"),
    [(0, Decimal(0)), ("2.5", Decimal("2.5")), (" 7 ", Decimal(7)), (1.0001, Decimal("1.0001")),
     (MAX_WEIGHT, MAX_WEIGHT), (Decimal("0.0001"), Decimal("0.0001"))],
)  # fmt: skip
def test_a_weight_within_the_limits_is_read(value, weight):
    """A weight is a number or numeric text >= 0, at most 9,999,999,999, at most 4
    decimals; 0 and the maximum themselves are weights."""
    assert parse_weight(value) == weight


@pytest.mark.parametrize(
    ("value", "message"),
    [(None, "A weight is required: a number >= 0."), ("", "A weight is required: a number >= 0."),
     ("  ", "A weight is required: a number >= 0."), (True, "A weight is required: a number >= 0."),
     ([1], "[1] is not a number; a weight is a number >= 0."),
     ("abc", "'abc' is not a number; a weight is a number >= 0."),
     ("nan", "A weight must be a finite number."), (float("inf"), "A weight must be a finite number."),
     (-1, "A weight cannot be negative (got -1)."),
     ("-0.0001", "A weight cannot be negative (got -0.0001)."),
     (MAX_WEIGHT + 1, "A weight must be at most 9999999999."),
     ("1.00001", "A weight has at most 4 decimal places.")],
)  # fmt: skip
def test_a_weight_outside_the_limits_is_refused_with_its_reason(value, message):
    """Each refusal says which limit the weight breaks (the pages and the API show it)."""
    with pytest.raises(WeightProblem) as exc:
        parse_weight(value)
    assert str(exc.value) == message


def test_a_weight_is_written_as_its_shortest_json_number():
    """50.0000 is written 50 (an int), 2.5000 as 2.5 (a float)."""
    whole, half = weight_number(Decimal("50.0000")), weight_number(Decimal("2.5000"))
    assert (whole, type(whole)) == (50, int)
    assert (half, type(half)) == (2.5, float)


def issues_of(doc) -> list[TreeIssue]:
    with pytest.raises(TreeFileError) as exc:
        parse_tree_document(doc)
    return exc.value.issues


def test_a_valid_document_reads_every_field():
    """Names, weights, paths, managers, members and a leaf's usage are read; a null
    children list or people list is empty; the root's weight is ignored."""
    doc = {
        "name": "org",
        "weight": 3,
        "managers": ["ceo"],
        "children": [
            {"name": " A ", "weight": "2", "children": [
                {"name": "a1", "weight": 1, "members": [" ann "], "usage": 7200, "children": None},
            ]},
            {"name": "B", "weight": 0, "managers": None},
        ],
    }  # fmt: skip
    root = parse_tree_document(doc)
    assert (root.name, root.weight, root.path, root.managers) == ("org", None, "org", ("ceo",))
    a, b = root.children
    (a1,) = a.children
    assert (a.name, a.weight, a.path) == ("A", Decimal(2), "org/A")
    assert (a1.path, a1.members, a1.usage, a1.children) == ("org/A/a1", ("ann",), 7200.0, ())
    assert (b.weight, b.managers, b.children) == (Decimal(0), (), ())
    assert [n.path for n in root.walk()] == ["org", "org/A", "org/A/a1", "org/B"]


def test_each_problem_is_named_by_its_node_and_field():
    """Every problem of a document is reported, against the node's path (or its index
    when it has no valid name) and the field."""
    doc = {
        "name": "org",
        "children": [
            {"name": "a", "children": []},  # no weight
            {"name": "b", "weight": -1},
            {"name": "", "weight": 1},
            "leaf",
            {"name": "c", "weight": 1, "members": ["m"], "children": [{"name": "c1", "weight": 1}]},
            {"name": "d", "weight": 1, "usage": 5, "children": [{"name": "d1", "weight": 1}]},
            {"name": "e", "weight": 1, "usage": -5},
            {"name": "f", "weight": 1, "usage": True},
            {"name": "g", "weight": 1, "managers": "boss"},
            {"name": "h", "weight": 1, "children": {"x": 1}},
            {"name": "A", "weight": 1},
            {"name": "a", "weight": 1},
        ],
    }
    got = [str(i) for i in issues_of(doc)]
    # parse_weight's own message names the value already: once, not "(got -1). (got -1)"
    assert got.pop(1) == "node 'org/b': field 'weight': A weight cannot be negative (got -1)."
    assert got == [
        "node 'org/a': field 'weight': missing: every node below the root has a weight",
        "node 'org/children[2]': field 'name': A name is required. (got '')",
        "node 'org/children[3]': must be an object, got str",
        "node 'org/c': field 'members': only projects (leaves) have members",
        "node 'org/d': field 'usage': allowed on leaves (projects) only",
        "node 'org/e': field 'usage': must be a number >= 0, got -5",
        "node 'org/f': field 'usage': must be a number >= 0, got True",
        "node 'org/g': field 'managers': must be a list of user names",
        "node 'org/h': field 'children': must be a list",
        # 'a' twice, once as 'A' (the same slug): each later one is refused, not kept
        "node 'org': field 'children': two children are named 'a' and 'A'; names must be unique "
        "among siblings (also once made URL slugs)",
        "node 'org': field 'children': two children are named 'a' and 'a'; names must be unique "
        "among siblings (also once made URL slugs)",
    ]


def test_a_duplicate_child_is_left_out_and_its_first_kept():
    """Of two siblings with the same slug, the first is kept; only the second is refused."""
    with pytest.raises(TreeFileError) as exc:
        parse_tree_document(
            {"name": "o", "children": [{"name": "A b", "weight": 1}, {"name": "a-B", "weight": 2}]}
        )
    assert [(i.node, i.field) for i in exc.value.issues] == [("o", "children")]
    root = parse_tree_document({"name": "o", "children": [{"name": "A b", "weight": 1}]})
    assert [c.name for c in root.children] == ["A b"]


def test_a_document_that_is_not_an_object_or_has_no_root_name_is_refused():
    """The root must be an object with a valid name; its problem names '<root>'."""
    assert [str(i) for i in issues_of(["org"])] == [
        "node '<root>': the tree must be a JSON object with a 'name'"
    ]
    assert [(i.node, i.field) for i in issues_of({"children": []})] == [("<root>", "name")]


def test_the_problems_listed_are_capped_and_the_rest_counted():
    """At most 20 problems are listed; the error says how many more there were."""
    doc = {"name": "org", "children": [{"name": f"n{i}"} for i in range(MAX_ISSUES + 3)]}
    with pytest.raises(TreeFileError) as exc:
        parse_tree_document(doc)
    assert len(exc.value.issues) == MAX_ISSUES and exc.value.more == 3
    assert str(exc.value).endswith("... and 3 more problem(s)")
    assert str(exc.value.issues[0]) == (
        "node 'org/n0': field 'weight': missing: every node below the root has a weight"
    )
    assert str(TreeIssue("org", None, "bad")) == "node 'org': bad"
    two = TreeFileError([TreeIssue("org", None, "bad"), TreeIssue("org/a", "weight", "worse")])
    assert two.more == 0
    assert str(two) == "node 'org': bad\nnode 'org/a': field 'weight': worse"


def test_usage_people_and_the_absent_fields_of_a_leaf():
    """A leaf's usage may be 0 or a fraction; user names must be non-blank text (members
    as managers); a node without usage has None, not 0."""
    doc = {"name": "o", "children": [
        {"name": "z", "weight": 1, "usage": 0},
        {"name": "h", "weight": 1, "usage": 0.5},
        {"name": "n", "weight": 1},
    ]}  # fmt: skip
    z, h, n = parse_tree_document(doc).children
    assert (z.usage, h.usage, n.usage, n.members, n.managers) == (0.0, 0.5, None, (), ())
    bad = {"name": "o", "children": [
        {"name": "m", "weight": 1, "members": "ann"},
        {"name": "b", "weight": 1, "members": ["ann", "  "]},
        {"name": "k", "weight": 1, "managers": [3]},
    ]}  # fmt: skip
    assert [str(i) for i in issues_of(bad)] == [
        "node 'o/m': field 'members': must be a list of user names",
        "node 'o/b': field 'members': must be a list of user names",
        "node 'o/k': field 'managers': must be a list of user names",
    ]
