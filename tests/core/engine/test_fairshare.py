"""Fair-share arithmetic against hand-checked numbers (Slurm Fair Tree semantics)."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scheduler.core.engine import BudgetNode, entitled_shares, fair_tree
from scheduler.core.engine.fairshare import INF, compute_fair_share

SPEC_TREE = BudgetNode(
    "org",
    children=(
        BudgetNode("A", 50, (BudgetNode("A1", 70), BudgetNode("A2", 30))),
        BudgetNode("B", 50, (BudgetNode("B1", 1),)),
    ),
)


def test_spec_example_a1_is_entitled_to_35_percent():
    shares = entitled_shares(SPEC_TREE)
    assert shares["A1"] == pytest.approx(0.35)
    assert shares["A2"] == pytest.approx(0.15)
    assert shares["B1"] == pytest.approx(0.50)
    assert sum(shares.values()) == pytest.approx(1.0)


def test_all_zero_weights_give_zero_share():
    t = BudgetNode("r", children=(BudgetNode("a", 0), BudgetNode("b", 0)))
    assert entitled_shares(t) == {"a": 0.0, "b": 0.0}


def test_level_fs_and_norm_values_by_hand():
    # A used 300, B used 100 (A1 200, A2 100): at root level U_A = 0.75, S_A = 0.5
    res = fair_tree(SPEC_TREE, {"A1": 200.0, "A2": 100.0, "B1": 100.0})
    n = res["nodes"]
    assert n["A"]["norm_shares"] == pytest.approx(0.5)
    assert n["A"]["effective_usage"] == pytest.approx(0.75)
    assert n["A"]["level_fs"] == pytest.approx(0.5 / 0.75)
    assert n["B"]["level_fs"] == pytest.approx(0.5 / 0.25)
    # inside A: A1 S=0.7 U=2/3 -> 1.05 ; A2 S=0.3 U=1/3 -> 0.9
    assert n["A/A1"]["level_fs"] == pytest.approx(0.7 / (2 / 3))
    assert n["A/A2"]["level_fs"] == pytest.approx(0.3 / (1 / 3))
    # B is less served, so B1 first; then A1 (1.05) before A2 (0.9)
    assert res["order"] == ["B1", "A1", "A2"]
    assert n["B/B1"]["fairshare"] == pytest.approx(3 / 3)
    assert n["A/A1"]["fairshare"] == pytest.approx(2 / 3)
    assert n["A/A2"]["fairshare"] == pytest.approx(1 / 3)
    assert set(n["A/A1"]) >= {"norm_shares", "effective_usage", "level_fs", "fairshare"}


def test_zero_usage_ranks_first_with_infinite_level_fs():
    res = fair_tree(SPEC_TREE, {"A1": 10.0, "B1": 1e9})
    n = res["nodes"]
    assert math.isinf(n["A/A2"]["level_fs"])
    assert res["order"][0] == "A2"
    assert res["order"][-1] == "B1"


def test_zero_weight_ranks_last_even_with_zero_usage():
    t = BudgetNode("r", children=(BudgetNode("z", 0), BudgetNode("a", 1), BudgetNode("b", 1)))
    res = fair_tree(t, {"a": 1e6, "b": 5.0})
    assert res["order"] == ["b", "a", "z"]
    assert res["nodes"]["z"]["level_fs"] == 0.0
    # no entitlement, no factor: the entitled projects number 1/2 and 2/2
    assert res["nodes"]["z"]["fairshare"] == 0.0
    assert res["nodes"]["b"]["fairshare"] == pytest.approx(1.0)
    assert res["nodes"]["a"]["fairshare"] == pytest.approx(0.5)


def test_a_zero_weight_project_early_in_the_order_leaves_no_gap_in_the_factors():
    # P is served first (little usage), so its zero-weight sandbox z comes second in
    # the order; the entitled projects still read 1, 2/3, 1/3 (as their ranks 1-3 of 3)
    t = BudgetNode(
        "r",
        children=(
            BudgetNode("P", 1, children=(BudgetNode("z", 0), BudgetNode("p1", 1))),
            BudgetNode("Q", 1, children=(BudgetNode("q1", 1), BudgetNode("q2", 1))),
        ),
    )
    res = fair_tree(t, {"p1": 1.0, "q1": 10.0, "q2": 100.0})
    assert res["order"] == ["p1", "z", "q1", "q2"]
    f = {p: res["nodes"][f"{'P' if p[0] in 'pz' else 'Q'}/{p}"]["fairshare"] for p in res["order"]}
    assert f == pytest.approx({"p1": 1.0, "z": 0.0, "q1": 2 / 3, "q2": 1 / 3})


def test_tied_leaves_share_a_rank():
    t = BudgetNode("r", children=(BudgetNode("a", 1), BudgetNode("b", 1), BudgetNode("c", 2)))
    res = fair_tree(t, {"a": 10.0, "b": 10.0, "c": 100.0})
    f = {p: res["nodes"][p]["fairshare"] for p in "abc"}
    assert f["a"] == f["b"] == pytest.approx(1.0)  # tied, both best
    assert f["c"] == pytest.approx(1 / 3)  # rank counts the tied pair: 3 - 2 = 1
    assert res["order"][2] == "c"


def test_tied_accounts_are_merged_before_descending():
    # X and Y tie at the top level (equal shares, equal usage); their children are then
    # sorted together: y1 (LF 2.0) < x1 (LF 4.0) > ... Without merging, all of X would
    # come before all of Y (or vice versa).
    t = BudgetNode(
        "r",
        children=(
            BudgetNode("X", 1, (BudgetNode("x1", 1), BudgetNode("x2", 1))),
            BudgetNode("Y", 1, (BudgetNode("y1", 1), BudgetNode("y2", 1))),
        ),
    )
    usage = {"x1": 10.0, "x2": 90.0, "y1": 25.0, "y2": 75.0}
    res = fair_tree(t, usage)
    # x1: 0.5/0.1 = 5 ; y1: 0.5/0.25 = 2 ; y2: 0.5/0.75 = 0.667 ; x2: 0.5/0.9 = 0.556
    assert res["order"] == ["x1", "y1", "y2", "x2"]


def test_leaf_tied_with_account_gets_its_best_leafs_rank():
    t = BudgetNode(
        "r",
        children=(
            BudgetNode("u", 1),
            BudgetNode("A", 1, (BudgetNode("a1", 1), BudgetNode("a2", 1))),
        ),
    )
    res = fair_tree(t, {"u": 50.0, "a1": 10.0, "a2": 40.0})
    f = {p: res["nodes"][p]["fairshare"] for p in ("u", "A/a1", "A/a2")}
    assert res["order"] == ["u", "a1", "a2"]  # leaves sort before accounts at equal LF
    assert f["u"] == f["A/a1"] == pytest.approx(1.0)
    assert f["A/a2"] == pytest.approx(1 / 3)


def test_three_level_tree_by_hand():
    t = BudgetNode(
        "org",
        children=(
            BudgetNode(
                "D",
                3,
                (
                    BudgetNode("P", 1, (BudgetNode("p1", 1), BudgetNode("p2", 3))),
                    BudgetNode("Q", 1, (BudgetNode("q1", 1),)),
                ),
            ),
            BudgetNode("E", 1, (BudgetNode("E1", 1, (BudgetNode("e1", 1),)),)),
        ),
    )
    shares = entitled_shares(t)
    assert shares["p1"] == pytest.approx(0.75 * 0.5 * 0.25)
    assert shares["p2"] == pytest.approx(0.75 * 0.5 * 0.75)
    assert shares["q1"] == pytest.approx(0.375)
    assert shares["e1"] == pytest.approx(0.25)
    usage = {"p1": 30.0, "p2": 30.0, "q1": 40.0, "e1": 100.0}
    res = fair_tree(t, usage)
    # root: D S=.75 U=.5 -> 1.5 ; E S=.25 U=.5 -> .5 ; D first.
    # D: P S=.5 U=.6 -> .833 ; Q S=.5 U=.4 -> 1.25 ; Q first. P: p2 1.5 > p1 .5
    assert res["order"] == ["q1", "p2", "p1", "e1"]
    assert res["nodes"]["D/P/p2"]["level_fs"] == pytest.approx(0.75 / 0.5)
    assert res["nodes"]["D"]["level_fs"] == pytest.approx(1.5)
    assert [res["nodes"][k]["fairshare"] for k in ("D/Q/q1", "D/P/p2", "D/P/p1", "E/E1/e1")] == [
        1.0,
        0.75,
        0.5,
        0.25,
    ]


def test_order_is_deterministic_and_seeded_for_full_ties():
    t = BudgetNode("r", children=tuple(BudgetNode(f"p{i}", 1) for i in range(12)))
    a = compute_fair_share(t, {}, seed=1).order
    assert a == compute_fair_share(t, {}, seed=1).order
    assert sorted(a) == sorted(f"p{i}" for i in range(12))
    assert any(compute_fair_share(t, {}, seed=s).order != a for s in range(2, 6))


def test_position_after_added_usage():
    t = BudgetNode("r", children=(BudgetNode("a", 1), BudgetNode("b", 1), BudgetNode("c", 1)))
    fs = compute_fair_share(t, {"a": 10.0, "b": 20.0, "c": 40.0})
    assert fs.order == ["a", "b", "c"]
    # a +5 -> 15: still beats b (20) and c
    assert fs.position_after("a", 5.0, 0) == 1
    # a +15 -> 25: below b, above c
    assert fs.position_after("a", 15.0, 0) == 2
    # a +30 -> 40: ties c: a tie is not "strictly above"
    assert fs.position_after("a", 30.0, 0) == 3


def test_position_after_gallops_to_the_same_answer_as_a_scan_when_monotone():
    """On a flat tree "still beaten" is a suffix of the order: the search finds its start."""
    import random

    rng = random.Random(7)
    for _ in range(20):
        t = BudgetNode(
            "org", children=tuple(BudgetNode(f"p{i}", rng.choice([1, 2, 5])) for i in range(30))
        )
        usage = {f"p{i}": rng.choice([0.0, rng.uniform(0, 100)]) for i in range(30)}
        fs = compute_fair_share(t, usage)
        leaf = fs.tree.leaf_index
        for r, proj in enumerate(fs.order):
            for delta in (0.0, 1.0, 30.0, 1e4):
                want = next(
                    (
                        i
                        for i in range(r + 1, len(fs.order))
                        if fs.beats_after(leaf[proj], delta, fs.order[i])
                    ),
                    len(fs.order),
                )
                assert fs.position_after(proj, delta, r) == want, (proj, delta, r)


def _random_tree(rng) -> BudgetNode:
    """An uneven tree of up to 4 levels below the root, with tied and zero weights."""

    def node(name: str, depth: int) -> BudgetNode:
        w = rng.choice([0, 1, 1, 2, 3, 5])
        if depth >= 3 or rng.random() < 0.3:
            return BudgetNode(name, w)
        kids = tuple(node(f"{name}.{i}", depth + 1) for i in range(rng.randint(1, 4)))
        return BudgetNode(name, w, kids)

    return BudgetNode("org", children=tuple(node(f"n{i}", 1) for i in range(rng.randint(1, 4))))


def test_beaten_all_equals_beats_after_for_every_leaf():
    """The one-walk vector form gives exactly `beats_after` for each other leaf, on
    uneven, tied, zero-weight and mixed-depth trees."""
    import random

    rng = random.Random(3)

    for _ in range(60):
        t = _random_tree(rng)
        fs0 = compute_fair_share(t, {})
        names = list(fs0.tree.leaf_index)
        usage = {n: rng.choice([0.0, 0.0, 10.0, 20.0, rng.uniform(0, 100)]) for n in names}
        fs = compute_fair_share(t, usage)
        leaf = fs.tree.leaf_index
        for p in names:
            for delta in (0.0, 10.0, rng.uniform(0, 50), 1e6):
                got = fs.beaten_all(leaf[p], delta)
                want = {q: fs.beats_after(leaf[p], delta, q) for q in names if q != p}
                assert got == want


@settings(max_examples=150, deadline=None)
@given(
    seed=st.integers(0, 10**6),
    deltas=st.lists(
        st.one_of(st.floats(0.0, 1e7, allow_nan=False), st.sampled_from([0.0, 10.0, 1e12])),
        min_size=1,
        max_size=6,
    ),
)
def test_beats_after_answers_from_its_bounds_exactly_as_the_full_comparison(seed, deltas):
    """The per-pair bounds never change an answer: every pair is asked at random
    amounts, at the exact point where the order flips and one float step either side
    of it, after the bounds are cached, on uneven, tied, zero-weight, zero-usage and
    mixed-depth trees."""
    import random

    rng = random.Random(seed)

    t = _random_tree(rng)
    names = list(compute_fair_share(t, {}).tree.leaf_index)
    usage = {n: rng.choice([0.0, 0.0, 10.0, 20.0, rng.uniform(0, 1e6)]) for n in names}
    fs = compute_fair_share(t, usage)
    leaf = fs.tree.leaf_index
    for p in names:
        for q in [*names, "not-in-the-tree"]:
            lo, hi = fs._delta_bounds(leaf[p], q)
            flips = [x for x in (lo, hi, (lo + hi) / 2) if math.isfinite(x) and x >= 0.0]
            near = [y for x in flips for y in (x, math.nextafter(x, 0), math.nextafter(x, INF))]
            for delta in [*deltas, *near]:
                want = fs._beats_after_exact(leaf[p], delta, q)
                assert fs.beats_after(leaf[p], delta, q) == want, (p, q, delta, lo, hi)


def test_fair_tree_reports_each_nodes_figures():
    """The simulator's `fairshare` figures per node below the root: its share among
    siblings, its usage among siblings (0 under a parent that used nothing), level FS,
    raw usage and entitled share, by path; the order is the walk's for the same seed."""
    got = fair_tree(SPEC_TREE, {"A1": 30.0, "A2": 10.0, "B1": 40.0})
    nodes = got["nodes"]
    assert set(nodes) == {"A", "B", "A/A1", "A/A2", "B/B1"}
    a1 = nodes["A/A1"]
    assert (a1["norm_shares"], a1["effective_usage"], a1["usage"]) == (0.7, 0.75, 30.0)
    assert a1["level_fs"] == pytest.approx(0.7 * 40 / 30)
    assert a1["entitled_share"] == pytest.approx(0.35)
    assert (nodes["A"]["usage"], nodes["A"]["effective_usage"], nodes["A"]["level_fs"]) == (
        40.0,
        0.5,
        1.0,
    )
    assert got["order"] == ["A2", "B1", "A1"]
    small = fair_tree(SPEC_TREE, {"A1": 0.3, "A2": 0.1})["nodes"]
    assert small["A/A1"]["effective_usage"] == pytest.approx(0.75)
    assert small["B/B1"]["effective_usage"] == 0.0  # B used nothing
    idle = fair_tree(SPEC_TREE, {})["nodes"]
    assert idle["A/A1"]["effective_usage"] == 0.0 and idle["A/A1"]["level_fs"] == INF
    flat = BudgetNode("r", children=tuple(BudgetNode(f"p{i}", 1) for i in range(8)))
    assert fair_tree(flat, {})["order"] == compute_fair_share(flat, {}, 0).order
    assert fair_tree(flat, {}, seed=5)["order"] == compute_fair_share(flat, {}, 5).order
    assert compute_fair_share(flat, {}, 5).order != compute_fair_share(flat, {}, 0).order


def test_still_above_answers_as_beats_after_and_shares_its_bounds():
    """A preemption search asks `still_above(p, delta)` for every victim's project: it
    must answer exactly `beats_after(p, delta, other)` and fill the same per-pair
    bounds (the cache the later calls read)."""
    fs = compute_fair_share(SPEC_TREE, {"A1": 30.0, "A2": 10.0, "B1": 40.0})
    leaf = fs.tree.leaf_index
    for p in ("A1", "A2", "B1"):
        for delta in (0.0, 5.0, 25.0, 1e6):
            ask = fs.still_above(leaf[p], delta)
            assert (ask.p, ask.delta) == (leaf[p], delta)
            assert ask.bounds is fs.delta_bounds[leaf[p]]
            for q in ("A1", "A2", "B1", "unknown"):
                assert ask(q) == fs.beats_after(leaf[p], delta, q), (p, delta, q)
    # the preemption search reads a pair's bounds inline (`ask.bounds`): those a call
    # computed are there, and still there for the next search of the same project
    fresh = compute_fair_share(SPEC_TREE, {"A1": 30.0, "A2": 10.0, "B1": 40.0})
    ask = fresh.still_above(leaf["A1"], 0.0)
    ask("B1")
    assert ask.bounds["B1"] == fresh.delta_bounds[leaf["A1"]]["B1"]
    assert "B1" in fresh.still_above(leaf["A1"], 3.0).bounds
    # A and B tie (level FS 1.0), so A2 (1.2) is compared with B1 (1.0) and ranks above
    # it; 5 GPU-s more puts A below B, and A2 with it
    assert fs.still_above(leaf["A2"], 0.0)("B1") and not fs.still_above(leaf["A2"], 5.0)("B1")


def test_beaten_all_compares_down_through_two_tied_levels():
    """Tied inner nodes are compared a level down (Slurm merges their children), again
    and again: with X and Y tied and their only children X1 and Y1 tied too, the leaves
    decide; the one-walk form follows the same levels as `beats_after`, and a project is
    never above itself."""
    pair = (BudgetNode("a", 1), BudgetNode("b", 1))
    tree = BudgetNode(
        "r",
        children=(
            BudgetNode("X", 1, (BudgetNode("X1", 1, pair),)),
            BudgetNode("Y", 1, (BudgetNode("Y1", 1, (BudgetNode("c", 1), BudgetNode("d", 1))),)),
        ),
    )
    fs = compute_fair_share(tree, {"a": 10.0, "b": 30.0, "c": 20.0, "d": 20.0})
    leaf = fs.tree.leaf_index
    assert fs.beaten_all(leaf["a"], 0.0) == {"b": True, "c": True, "d": True}
    assert fs.beaten_all(leaf["b"], 0.0) == {"a": False, "c": False, "d": False}
    for p in leaf:
        assert fs.beaten_all(leaf[p], 0.0) == {
            q: fs.beats_after(leaf[p], 0.0, q) for q in leaf if q != p
        }
        assert not fs.beats_after(leaf[p], 0.0, p)


def _agrees_with_the_walk(fs) -> None:
    """`beats_after(p, 0, q)` and `beaten_all` answer as the Fair Tree walk's own order
    (trees without full ties: a tie is "above" neither way)."""
    leaf, order = fs.tree.leaf_index, fs.order
    for p in leaf:
        expected = {q: order.index(p) < order.index(q) for q in leaf if q != p}
        assert {q: fs.beats_after(leaf[p], 0.0, q) for q in expected} == expected
        assert fs.beaten_all(leaf[p], 0.0) == expected


def test_merged_children_of_tied_nodes_compare_relative_to_their_own_parents():
    """X and Y tie (share 0.25 at usage 10, 0.75 at 30), so their children are merged and
    compared, each against its own parent's usage: a 0.5 x 10 / 2 = 2.5,
    c 0.5 x 30 / 10 = 1.5, d 0.5 x 30 / 20 = 0.75, b 0.5 x 10 / 8 = 0.625. Without the
    parent's usage in each child's level fair-share, b (8 of X's 10) would rank above
    c and d (10 and 20 of Y's 30)."""
    tree = BudgetNode(
        "r",
        children=(
            BudgetNode("X", 1, (BudgetNode("a", 1), BudgetNode("b", 1))),
            BudgetNode("Y", 3, (BudgetNode("c", 1), BudgetNode("d", 1))),
        ),
    )
    fs = compute_fair_share(tree, {"a": 2.0, "b": 8.0, "c": 10.0, "d": 20.0})
    leaf = fs.tree.leaf_index
    assert fs.order == ["a", "c", "d", "b"]
    assert fs.beaten_all(leaf["b"], 0.0) == {"a": False, "c": False, "d": False}
    assert fs.beaten_all(leaf["c"], 0.0) == {"a": False, "b": True, "d": True}
    assert not fs.beats_after(leaf["b"], 0.0, "c") and fs.beats_after(leaf["d"], 0.0, "b")
    _agrees_with_the_walk(fs)


def test_a_weighted_project_is_above_a_zero_weight_one_that_used_nothing():
    """A zero share's level fair-share is 0 whatever its usage: an over-served weighted
    project (level fair-share 1.0) still ranks above an idle zero-weight sibling."""
    tree = BudgetNode("r", children=(BudgetNode("A", 1), BudgetNode("Z", 0)))
    fs = compute_fair_share(tree, {"A": 10.0})
    leaf = fs.tree.leaf_index
    assert fs.order == ["A", "Z"]
    assert fs.beats_after(leaf["A"], 0.0, "Z") and fs.beats_after(leaf["A"], 5.0, "Z")
    assert not fs.beats_after(leaf["Z"], 0.0, "A")
    _agrees_with_the_walk(fs)


def test_usage_below_one_gpu_second_is_compared_like_any_other():
    """Usage under 1 (a node's or its parent's) is ordinary usage, not "none": with
    shares 0.1 / 0.9 and usage 0.9 / 1.5, A's level fair-share is 0.1 x 2.4 / 0.9 = 0.27,
    B's 0.9 x 2.4 / 1.5 = 1.44; with usage 0.2 / 0.6 under a parent of 0.8, C's is
    0.5 x 0.8 / 0.2 = 2 and D's 0.5 x 0.8 / 0.6 = 0.67."""
    tree = BudgetNode("r", children=(BudgetNode("A", 1), BudgetNode("B", 9)))
    fs = compute_fair_share(tree, {"A": 0.9, "B": 1.5})
    assert fs.order == ["B", "A"]
    assert not fs.beats_after(fs.tree.leaf_index["A"], 0.0, "B")
    _agrees_with_the_walk(fs)
    tree = BudgetNode(
        "r",
        children=(
            BudgetNode("P", 1, (BudgetNode("C", 1), BudgetNode("D", 1))),
            BudgetNode("Q", 1, (BudgetNode("E", 1),)),
        ),
    )
    fs = compute_fair_share(tree, {"C": 0.2, "D": 0.6, "E": 100.0})
    assert fs.order == ["C", "D", "E"]
    assert fs.beats_after(fs.tree.leaf_index["C"], 0.0, "D")
    assert not fs.beats_after(fs.tree.leaf_index["D"], 0.0, "C")
    _agrees_with_the_walk(fs)


def test_a_tree_of_only_its_root_has_no_project():
    """An organisation without programs: the root is never a project of its own."""
    fs = compute_fair_share(BudgetNode("r"), {"r": 5.0})
    assert (fs.order, fs.tree.leaves, fs.tree.leaf_index) == ([], [], {})
