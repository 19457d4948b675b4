"""The one budget-tree module: share arithmetic, project keys, the file format."""

from __future__ import annotations

from decimal import Decimal

import pytest

from scheduler.core.engine import BudgetNode, EngineState, Policy, Snapshot, plan
from scheduler.core.engine.budget_tree import (
    NameProblem,
    TreeFileError,
    budget_node,
    clean_name,
    entitled_shares,
    leaf_path_keys,
    leaves,
    name_slug,
    parse_tree_document,
    parse_weight,
    project_lookup,
    shares_by_id,
    sibling_shares,
    weight_number,
    with_path_keys,
)
from scheduler.core.engine.fairshare import compute_fair_share

from .helpers import hosts, job, pending

SPEC = BudgetNode(
    "org",
    children=(
        BudgetNode("A", 50, (BudgetNode("A1", 70), BudgetNode("A2", 30))),
        BudgetNode("B", 50),
    ),
)
TWINS = BudgetNode(
    "org",
    children=(
        BudgetNode("prog-a", 3, (BudgetNode("a1", 1), BudgetNode("shared", 1))),
        BudgetNode("prog-b", 1, (BudgetNode("shared", 1),)),
    ),
)


def test_spec_example_and_zero_weights():
    assert entitled_shares(SPEC) == pytest.approx({"A1": 0.35, "A2": 0.15, "B": 0.5})
    assert sibling_shares([0, 0]) == [0.0, 0.0]
    assert sibling_shares([3, 1, 0]) == [0.75, 0.25, 0.0]
    rows = [("o", None, 1), ("A", "o", Decimal(50)), ("B", "o", 50), ("A1", "A", Decimal("70"))]
    shares = shares_by_id(rows)
    assert shares["o"].entitled == 1.0 and shares["A1"].share == 1.0
    assert shares["A1"].entitled == pytest.approx(0.5)


def test_engine_and_module_agree_on_entitled_shares():
    ct = compute_fair_share(TWINS, {}).tree
    engine = {ct.names[i]: ct.entitled[i] for i in ct.leaves}
    assert engine == entitled_shares(TWINS)


def test_project_keys_are_names_unless_repeated_then_paths():
    assert [leaf.key for leaf in leaves(TWINS)] == ["a1", "prog-a/shared", "prog-b/shared"]
    assert leaf_path_keys(TWINS) == ["prog-a/a1", "prog-a/shared", "prog-b/shared"]
    lookup = project_lookup(TWINS)
    assert lookup["prog-a/a1"] == lookup["a1"] == "a1"
    assert "shared" not in lookup
    keyed = with_path_keys(TWINS)
    assert [leaf.key for leaf in leaves(keyed)] == leaf_path_keys(TWINS)
    assert entitled_shares(keyed) == {
        "prog-a/a1": pytest.approx(0.375),
        "prog-a/shared": pytest.approx(0.375),
        "prog-b/shared": pytest.approx(0.25),
    }


def test_the_engine_schedules_projects_with_the_same_name_apart():
    s = Snapshot(
        hosts=hosts(1),
        running=[],
        pending=pending(job("x", "prog-b/shared", 8), job("y", "prog-a/shared", 8)),
        tree=TWINS,
        usage={"prog-a/shared": 1e6},
    )
    out = plan(s, Policy(), 0.0, EngineState())
    assert [st.workload_id for st in out.starts] == ["x"]  # prog-b/shared has no usage
    assert {q.project for q in out.queue} == {"prog-a/shared"}
    with pytest.raises(ValueError, match="appears twice"):
        plan(
            Snapshot(
                hosts(1),
                [],
                {},
                BudgetNode("r", children=(BudgetNode("a", key="k"), BudgetNode("b", key="k"))),
            ),
            Policy(),
            0.0,
        )


def test_file_format_round_trip_and_problems_named_by_path():
    doc = {
        "name": "org",
        "managers": ["ceo"],
        "children": [
            {
                "name": " prog-a ",
                "weight": "2.5",
                "children": [{"name": "a1", "weight": 1, "usage": 3}],
            },
            {"name": "prog-b", "weight": 0, "members": ["bob"]},
        ],
    }
    parsed = parse_tree_document(doc)
    assert parsed.children[0].name == "prog-a" and parsed.children[0].weight == Decimal("2.5")
    assert parsed.children[0].children[0].path == "org/prog-a/a1"
    assert weight_number(Decimal("2.5000")) == 2.5 and weight_number(Decimal("50.0")) == 50
    assert budget_node(parsed).children[0].weight == 2.5
    bad = {
        "name": "org",
        "children": [
            {"name": "p", "weight": -1, "members": ["x"], "children": [{"name": "q"}]},
            {"name": "a/b", "weight": 1e11},
            {"name": "P", "weight": 1},
        ],
    }
    with pytest.raises(TreeFileError) as exc:
        parse_tree_document(bad)
    text = str(exc.value)
    for fragment in (
        "node 'org/p': field 'weight'",
        "node 'org/p/q': field 'weight': missing",
        "node 'org/p': field 'members'",
        "cannot contain '/'",
        "at most 9999999999",
        "unique among siblings",
    ):
        assert fragment in text
    for value, message in ((True, "required"), ("x", "not a number"), (float("nan"), "finite")):
        with pytest.raises(ValueError, match=message):
            parse_weight(value)


def test_a_name_without_ascii_letters_is_refused_with_the_real_reason():
    """'名前' has letters, but none that survive into the ASCII path: the message must
    not claim it has none."""
    with pytest.raises(NameProblem) as refused:
        clean_name("名前")
    assert "letter or digit" not in str(refused.value)
    assert "a-z" in str(refused.value) and "path" in str(refused.value)
    assert clean_name("Zürich") == "Zürich" and name_slug("Zürich") == "zurich"
