"""The deciding level in a waiting job's reason (glossary: deciding level): where the Fair
Tree put the project ranked just above it first, named only when it was not the two
projects themselves, with the level fair-shares the walk compared."""

from __future__ import annotations

import itertools
import re

from hypothesis import given, settings
from hypothesis import strategies as st

from allot_common.figures import level_fs_text
from scheduler.core.engine import BudgetNode, Policy
from scheduler.core.engine.explain import FairShareReasons
from scheduler.core.engine.fairshare import FairShare, compute_fair_share

from .helpers import H, cycle, hosts, job, pending, run, snap

NOW = 100 * H
CLAUSE = re.compile(
    r"; behind project (?P<ahead>\S+) at the deciding level: (?P<a>.+) used more relative "
    r"to its share than (?P<b>.+) \(level FS (?P<lf_a>\S+) vs (?P<lf_b>\S+)\)$"
)


def _programs() -> BudgetNode:
    """Two programs of two projects each, all weights equal."""
    return BudgetNode(
        "org",
        children=(
            BudgetNode("vision", 1, (BudgetNode("seg", 1), BudgetNode("det", 1))),
            BudgetNode("biology", 1, (BudgetNode("cells", 1), BudgetNode("genes", 1))),
        ),
    )


# A project's entitled share of the 8 GPUs over 7 days is 0.25 x 8 x 168 h = 336 GPU-h:
# X is 4% of it. vision used 100 X (level FS 0.5 x 150 / 100 = 0.75), biology 50 X (1.50):
# biology's projects go first. Inside them seg used little (10 X: 40%) and cells much
# (45 X: 180%), so seg, at a lower usage relative to its entitled share, ranks behind cells.
X = 13.44 * H
USAGE = {"seg": 10 * X, "det": 90 * X, "cells": 45 * X, "genes": 5 * X}


def _waiting_reasons(
    tree: BudgetNode, usage: dict[str, float], busy: str = "det"
) -> dict[str, str]:
    """The waiting reason of every project but `busy`, whose protected job fills the one
    host (nothing starts, nothing is preempted)."""
    running = run(job("r", busy, 8, minrt=8 * H), "h0", tuple(range(8)), NOW - H)
    names = [p for p in usage if p != busy]
    p = pending(*(job(f"w-{n}", n) for n in names))
    out = cycle(snap(hosts(1), [running], p, tree, usage), NOW)
    assert out.starts == () and out.stops == ()
    return {q.project: q.reason for q in out.queue}


def test_a_program_over_its_share_is_named_as_what_put_the_project_behind():
    reasons = _waiting_reasons(_programs(), USAGE)
    seg = reasons["seg"]
    assert seg.startswith("waiting: project seg is at 40% of its entitled share over 7 days")
    assert "(fair-share rank 3 of 4); 2 projects rank above it; " in seg
    # the project just ahead is at a higher usage relative to its entitled share (180%)
    assert "project cells is at 180%" in reasons["cells"]
    assert seg.endswith(
        "; behind project cells at the deciding level: vision used more relative to its "
        "share than biology (level FS 0.75 vs 1.50); no free GPUs"
    )


def test_where_the_projects_themselves_decided_the_reason_adds_nothing():
    """cells ranks behind its sibling genes: their own level decided, and their standing
    says it; the first-ranked project has nobody ahead."""
    reasons = _waiting_reasons(_programs(), USAGE)
    assert reasons["cells"].endswith(
        "(fair-share rank 2 of 4); 1 project ranks above it; no free GPUs"
    )
    assert "deciding level" not in reasons["genes"]
    flat = BudgetNode("org", children=(BudgetNode("a", 1), BudgetNode("b", 1), BudgetNode("c", 1)))
    flat_reasons = _waiting_reasons(flat, {"a": 5 * H, "b": 10 * H, "c": 20 * H}, busy="a")
    assert flat_reasons["c"].endswith(
        "(fair-share rank 3 of 3); 2 projects rank above it; no free GPUs"
    )


def test_a_project_compared_with_a_program_is_named_as_a_project():
    tree = BudgetNode(
        "org",
        children=(
            BudgetNode("solo", 1),
            BudgetNode("vision", 1, (BudgetNode("seg", 1), BudgetNode("det", 1))),
        ),
    )
    # solo used 60 h (level FS 0.5 x 100 / 60 = 0.83), vision 40 h (1.25): vision's det
    # ranks before solo
    reasons = _waiting_reasons(tree, {"solo": 60 * H, "seg": 0.0, "det": 40 * H})
    assert reasons["solo"].endswith(
        "; behind project det at the deciding level: project solo used more relative to its "
        "share than vision (level FS 0.83 vs 1.25); no free GPUs"
    )


def test_tied_programs_are_looked_through_and_a_full_tie_names_no_level():
    fs = compute_fair_share(_programs(), {"seg": 10.0, "det": 30.0, "cells": 20.0, "genes": 20.0})
    leaf = fs.tree.leaf_index
    # vision and biology tie (40 each): Slurm merges their projects, so seg and cells,
    # compared one level down, decide
    assert fs.deciding_nodes("cells", "seg") == (leaf["cells"], leaf["seg"])
    assert fs.deciding_nodes("genes", "cells") is None  # tied down to the leaves
    assert fs.deciding_nodes("seg", "seg") is None
    assert fs.deciding_nodes("seg", "not-a-project") is None


def test_level_fs_is_written_with_enough_places_to_tell_the_two_apart():
    tree = BudgetNode(
        "org",
        children=(
            BudgetNode("p", 1, (BudgetNode("a", 1),)),
            BudgetNode("q", 1, (BudgetNode("b", 1),)),
        ),
    )
    # level FS 0.5 x 2001 / 1001 = 0.99950 against 0.5 x 2001 / 1000 = 1.0005: both
    # "1.00" with two places, told apart with three
    reasons = _reasons(compute_fair_share(tree, {"a": 1001.0, "b": 1000.0}))
    assert reasons.deciding_level("a").endswith("(level FS 1.000 vs 1.001)")


def _reasons(fs: FairShare, usage: dict[str, float] | None = None) -> FairShareReasons:
    order = list(fs.order)
    return FairShareReasons(
        order,
        {p: i for i, p in enumerate(order)},
        fs.tree.entitled_by_key,
        usage or {},
        Policy(),
        8,
        fs,
    )


@st.composite
def _trees(draw: st.DrawFn) -> tuple[BudgetNode, dict[str, float]]:
    """An uneven tree of up to 3 levels below the root, with tied and zero weights, and
    usage with ties and zeros."""
    names = itertools.count()

    def node(depth: int) -> BudgetNode:
        name = f"n{next(names)}"
        weight = draw(st.sampled_from([0, 1, 1, 2, 3]))
        if depth >= 3 or not draw(st.booleans()):
            return BudgetNode(name, weight)
        kids = draw(st.integers(1, 3))
        return BudgetNode(name, weight, tuple(node(depth + 1) for _ in range(kids)))

    tree = BudgetNode("org", children=tuple(node(1) for _ in range(draw(st.integers(1, 4)))))
    keys = compute_fair_share(tree, {}).tree.leaf_index
    usage_of = st.one_of(st.sampled_from([0.0, 10.0, 20.0]), st.floats(0.0, 1e6))
    return tree, {k: draw(usage_of) for k in keys}


@settings(max_examples=150, deadline=None)
@given(_trees())
def test_the_deciding_level_is_where_the_paths_part_with_the_walks_own_figures(drawn):
    """For every ranked project and the one ranked just above it: the named nodes are the
    first, from the root, where their paths part, past inner nodes the walk tied (and
    merged); the stated level FS are those of that pair as S / U recomputed from the tree
    (the walk's figures), the worse one for the project behind; no clause where the
    projects themselves (or nothing but the seeded hash) decided."""
    tree, usage = drawn
    fs = compute_fair_share(tree, usage)
    ct = fs.tree
    reasons = _reasons(fs, usage)
    ranked = reasons.by_rank
    node_usage = [0.0] * len(ct.names)
    for i in ct.leaves:
        for n in ct.path_nodes[i]:
            node_usage[n] += usage[ct.names[i]]

    def level_fs(n: int) -> float:
        up, u = node_usage[ct.parent[n]], node_usage[n]
        return ct.share[n] * up / u if u > 0 and up > 0 else float("inf")

    for ahead, proj in itertools.pairwise(ranked):
        pa, qa = ct.path_nodes[ct.leaf_index[proj]], ct.path_nodes[ct.leaf_index[ahead]]
        k = next(k for k in range(1, min(len(pa), len(qa))) if pa[k] != qa[k])
        while (
            k + 1 < min(len(pa), len(qa))
            and fs.lf[pa[k]] == fs.lf[qa[k]]
            and not (ct.is_leaf[pa[k]] or ct.is_leaf[qa[k]])
        ):
            k += 1
        a, b = pa[k], qa[k]
        text = reasons.deciding_level(proj)
        if fs.lf[a] == fs.lf[b]:
            assert fs.deciding_nodes(proj, ahead) is None and text == ""
            continue
        assert fs.deciding_nodes(proj, ahead) == (a, b)
        assert fs.lf[a] < fs.lf[b]  # the walk put `ahead` first for this pair
        assert not fs.beats_after(ct.leaf_index[proj], 0.0, ahead)
        for n in (a, b):
            assert fs.lf[n] == level_fs(n) or abs(fs.lf[n] - level_fs(n)) <= 1e-9 * fs.lf[n]
        if ct.is_leaf[a] and ct.is_leaf[b]:
            assert text == ""
            continue
        said = CLAUSE.fullmatch(text)
        assert said, text
        assert said["ahead"] == ahead
        assert said["a"] == (f"project {proj}" if ct.is_leaf[a] else ct.names[a])
        assert said["b"] == (f"project {ahead}" if ct.is_leaf[b] else ct.names[b])
        places = max(2, len(said["lf_a"].partition(".")[2]))
        assert said["lf_a"] == level_fs_text(fs.lf[a], places)
        assert said["lf_b"] == level_fs_text(fs.lf[b], places)
        assert said["lf_a"] != said["lf_b"] or places == 6
