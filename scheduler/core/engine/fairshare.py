"""Hierarchical fair share: entitled shares and Slurm's Fair Tree walk.

Decides the order of projects: which project is served first, and whether one
project would still rank above another after its usage grows (the test preemption
uses to avoid cycles). Pure Python, no clock, no I/O. The tree is compiled once per
`BudgetNode` object (memoised by identity in the caller's `EngineState`), so a
scheduling cycle only redoes the arithmetic on usage. Shares and project keys follow
`scheduler.core.engine.budget_tree`.

Fair Tree, as in Slurm (doc/html/fair_tree.shtml): at every level siblings are
compared by their level fair-share LF = S / U where S is the node's share among its
siblings (weight / sum of sibling weights) and U its usage among its siblings
(usage / parent's usage). Higher LF is better served first; U = 0 gives LF = inf, a
zero weight gives LF = 0 (last). Walking the sorted tree depth first gives the order
of the leaves (projects). Ties follow Slurm's rules: tied leaves get the same rank;
tied inner nodes have their children merged into one list before sorting; a leaf tied
with a sibling inner node gets the rank of that node's best leaf (leaves sort before
inner nodes at equal LF). The Slurm-style fair-share factor of a leaf is
rank / number of leaves with an entitlement, 1.0 for the best; a leaf without one (a
weight of 0 on its path) takes no rank and gets 0. Remaining ties in the queue order are
broken by a seeded, process-independent hash of the node path.
"""

from __future__ import annotations

import math
import zlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import NamedTuple

from scheduler.core.engine.budget_tree import entitled_shares, project_keys, sibling_shares
from scheduler.core.engine.types import BudgetNode

__all__ = [
    "CompiledTree",
    "FairShare",
    "StillAbove",
    "TreeMemo",
    "compile_tree",
    "compute_fair_share",
    "entitled_shares",
    "fair_tree",
]

INF = math.inf
# Compiled trees kept per caller state (a tree object per budget version, few at once).
_MAX_COMPILED_TREES = 16


class CompiledTree:
    """A budget tree flattened into arrays (node 0 is the root).

    `names[i]` is node i's name for inner nodes and its project key for leaves."""

    __slots__ = (
        "children",
        "entitled",
        "is_leaf",
        "leaf_index",
        "leaves",
        "leaves_under",
        "names",
        "parent",
        "path_nodes",
        "paths",
        "postorder_inner",
        "entitled_by_key",
        "share",
        "static_orders",
        "tiekeys",
    )

    def __init__(self, root: BudgetNode) -> None:
        self.names: list[str] = []
        self.paths: list[str] = []
        self.parent: list[int] = []
        self.children: list[list[int]] = []
        self.share: list[float] = []
        self.entitled: list[float] = []
        self.is_leaf: list[bool] = []
        self.path_nodes: list[tuple[int, ...]] = []
        self.leaves: list[int] = []
        self.leaf_index: dict[str, int] = {}
        self.tiekeys: dict[int, list[int]] = {}
        self.static_orders: dict[int, tuple[list[int], list[list[int]]]] = {}
        explicit_keys: list[str] = []
        self._add(root, -1, "", 1.0, 1.0, (), explicit_keys)
        keys = project_keys(
            [self.names[i] for i in self.leaves],
            [self.paths[i] for i in self.leaves],
            explicit_keys,
        )
        for i, key in zip(self.leaves, keys, strict=True):
            if key in self.leaf_index:
                raise ValueError(f"project {key!r} appears twice in the budget tree")
            self.names[i] = key
            self.leaf_index[key] = i
        # Per node, the names of the leaves below it (itself for a leaf).
        self.leaves_under: list[list[str]] = [[] for _ in self.names]
        for i in self.leaves:
            for a in self.path_nodes[i][1:]:
                self.leaves_under[a].append(self.names[i])
        # Children before parents, so node usage can be summed in one pass.
        self.postorder_inner = [
            i for i in range(len(self.names) - 1, -1, -1) if not self.is_leaf[i]
        ]
        self.entitled_by_key = {self.names[i]: self.entitled[i] for i in self.leaves}

    def _add(
        self,
        node: BudgetNode,
        parent: int,
        path: str,
        share: float,
        entitled: float,
        anc: tuple[int, ...],
        explicit_keys: list[str],
    ) -> int:
        i = len(self.names)
        self.names.append(node.name)
        self.paths.append(path)
        self.parent.append(parent)
        self.children.append([])
        self.share.append(share)
        self.entitled.append(entitled)
        leaf = not node.children and parent >= 0
        self.is_leaf.append(leaf)
        anc = (*anc, i)
        self.path_nodes.append(anc)
        if leaf:
            self.leaves.append(i)
            explicit_keys.append(node.key)
        shares = sibling_shares([c.weight for c in node.children])
        for c, s in zip(node.children, shares, strict=True):
            cpath = f"{path}/{c.name}" if path else c.name
            j = self._add(c, i, cpath, s, entitled * s, anc, explicit_keys)
            self.children[i].append(j)
        return i

    def tiekey(self, seed: int) -> list[int]:
        keys = self.tiekeys.get(seed)
        if keys is None:
            keys = [zlib.crc32(f"{seed}\x00{p}".encode()) for p in self.paths]
            self.tiekeys[seed] = keys
        return keys

    def static_order(self, seed: int) -> tuple[list[int], list[list[int]]]:
        """The part of the Fair Tree sort key that does not depend on usage (leaves
        before inner nodes, then the seeded hash, then the path): each node's rank in
        it, and every node's children sorted by it. A cycle then sorts siblings by level
        fair-share alone with a stable sort, which orders them by the whole key."""
        got = self.static_orders.get(seed)
        if got is None:
            tie, paths, is_leaf = self.tiekey(seed), self.paths, self.is_leaf
            by_key = sorted(range(len(paths)), key=lambda i: (not is_leaf[i], tie[i], paths[i]))
            rank = [0] * len(paths)
            for r, i in enumerate(by_key):
                rank[i] = r
            children = [sorted(c, key=rank.__getitem__) for c in self.children]
            got = self.static_orders[seed] = (rank, children)
        return got


# id(tree) -> (tree, compiled): the entry holds the tree, so its id stays unique
TreeMemo = dict[int, tuple[BudgetNode, CompiledTree]]


def compile_tree(tree: BudgetNode, memo: TreeMemo | None = None) -> CompiledTree:
    """The compiled form of `tree`, memoised in `memo` by object identity."""
    if memo is None:
        return CompiledTree(tree)
    hit = memo.get(id(tree))
    if hit is not None and hit[0] is tree:
        return hit[1]
    ct = CompiledTree(tree)
    if len(memo) >= _MAX_COMPILED_TREES:
        memo.clear()
    memo[id(tree)] = (tree, ct)
    return ct


@dataclass(slots=True)
class FairShare:
    """The result of one Fair Tree walk (engine-internal, also used by the queue).

    `order` lists the projects best first (a strict order: Slurm ties broken by the
    seeded hash); `factor` is the Slurm-style fair-share factor (rank / leaves, ties
    share a rank); `usage` and `lf` are per node index of the compiled tree.
    """

    tree: CompiledTree
    order: list[str]
    factor: dict[str, float]
    usage: list[float]
    lf: list[float]
    node_factor: list[float]
    # leaf index -> other project -> (lo, hi): `beats_after` is True for added usage
    # in [0, lo), False above hi, and computed in full between (see `_delta_bounds`)
    delta_bounds: dict[int, dict[str, tuple[float, float]]] = field(default_factory=dict)

    def position_after(self, project: str, delta: float, index: int) -> int:
        """The first order index whose project `project` would still strictly beat
        after adding `delta` GPU-seconds to its usage (order index > `index`).

        Adding usage to one project only moves it down in the order; the others keep
        their relative order, so a search over the current order suffices: galloping
        from `index` (the answer is usually close: callers pass the last answer), then
        binary. Returns len(order) when it beats nobody below it.
        """
        lo, hi = index + 1, len(self.order)
        p = self.tree.leaf_index.get(project)
        if p is None:
            return hi
        step = 1
        probe = lo
        while probe < hi:
            if self.beats_after(p, delta, self.order[probe]):
                hi = probe
                break
            lo = probe + 1
            probe = lo + step
            step *= 2
        while lo < hi:
            mid = (lo + hi) // 2
            if self.beats_after(p, delta, self.order[mid]):
                hi = mid
            else:
                lo = mid + 1
        return lo

    def still_above(self, p: int, delta: float) -> StillAbove:
        """`beats_after(p, delta, ...)` for one preemptor, as data a search reads inline
        (it asks it for every allocated victim's project)."""
        by_other = self.delta_bounds.get(p)
        if by_other is None:
            by_other = self.delta_bounds[p] = {}
        return StillAbove(self, p, delta, by_other)

    def beats_after(self, p: int, delta: float, other: str) -> bool:
        """Whether leaf `p` with `delta` more usage still ranks strictly above `other`.

        Ties (which Slurm would merge or rank equally) count as not above, so that two
        equally served projects never preempt each other. Usage is fixed for the cycle,
        so the answer for a pair changes at one amount of added usage: away from it,
        the pair's cached bounds answer (searches ask the same pairs again and again
        with growing `delta`).
        """
        by_other = self.delta_bounds.get(p)
        if by_other is None:
            by_other = self.delta_bounds[p] = {}
        bounds = by_other.get(other)
        if bounds is None:
            bounds = by_other[other] = self._delta_bounds(p, other)
        if delta >= 0.0:
            if delta < bounds[0]:
                return True
            if delta > bounds[1]:
                return False
        return self._beats_after_exact(p, delta, other)

    def _delta_bounds(self, p: int, other: str) -> tuple[float, float]:
        """(lo, hi) such that `beats_after(p, delta, other)` is True for 0 <= delta < lo
        and False for delta > hi. Where the two paths part (nodes a of p's, b of the
        other's, under a common parent of usage U), the level fair-shares compare as
        share_a (U + delta) / (u_a + delta) against share_b (U + delta) / u_b, so p
        stays above while u_a + delta < share_a u_b / share_b. The bounds keep a
        relative margin of 1e-9 around that point, far wider than the rounding of
        either side, so the answer outside them is the one the full comparison gives;
        (-inf, inf) sends every delta to the full comparison."""
        ct = self.tree
        q = ct.leaf_index.get(other)
        if q is None:
            return (INF, INF)  # unknown projects are beaten
        pa, qa = ct.path_nodes[p], ct.path_nodes[q]
        k = _parting(pa, qa)
        if k >= len(pa) or k >= len(qa):
            return (-INF, -INF)  # the same project: never above itself
        a, b = pa[k], qa[k]
        share_a, share_b, u_a, u_b = ct.share[a], ct.share[b], self.usage[a], self.usage[b]
        if share_a <= 0.0 or share_b <= 0.0 or u_b <= 0.0 or u_a < 0.0:
            return (-INF, INF)
        parting = share_a * u_b / share_b
        return (parting * (1.0 - 1e-9) - u_a, parting * (1.0 + 1e-9) - u_a)

    def _beats_after_exact(self, p: int, delta: float, other: str) -> bool:
        ct = self.tree
        q = ct.leaf_index.get(other)
        if q is None:
            return True
        pa, qa = ct.path_nodes[p], ct.path_nodes[q]
        k = _parting(pa, qa)
        u, share, is_leaf, parent = self.usage, ct.share, ct.is_leaf, ct.parent
        while k < len(pa) and k < len(qa):
            a, b = pa[k], qa[k]
            lfa = _lf(share[a], u[a] + delta, u[parent[a]] + delta)
            pb = parent[b]
            # b's parent holds the extra usage only if it is on p's path.
            ub_par = u[pb] + (delta if pb in pa else 0.0)
            lfb = _lf(share[b], u[b], ub_par)
            if lfa != lfb:
                return lfa > lfb
            if is_leaf[a] or is_leaf[b]:
                return False
            k += 1  # tied inner nodes: Slurm merges their children, compare one level down
        return False

    def deciding_nodes(self, project: str, ahead: str) -> tuple[int, int] | None:
        """Where the Fair Tree walk put `ahead` before `project` (glossary: deciding
        level): the nodes (of `project`'s path, of `ahead`'s) whose level fair-shares it
        compared and found different, from the walk's own `lf`: the first nodes from
        the root where the two paths part, or, where those tie as inner nodes (Slurm
        merges their children), the first pair below them that differs. None for an
        unknown or the same project, or a tie down to a leaf (the seeded hash
        decided)."""
        ct = self.tree
        p, q = ct.leaf_index.get(project), ct.leaf_index.get(ahead)
        if p is None or q is None:
            return None
        pa, qa = ct.path_nodes[p], ct.path_nodes[q]
        lf, is_leaf = self.lf, ct.is_leaf
        k = _parting(pa, qa)
        while k < len(pa) and k < len(qa):
            a, b = pa[k], qa[k]
            if lf[a] != lf[b]:
                return a, b
            if is_leaf[a] or is_leaf[b]:
                return None
            k += 1  # tied inner nodes: compared one level down, as `_beats_after_exact`
        return None

    def beaten_all(self, p: int, delta: float) -> dict[str, bool]:
        """`beats_after(p, delta, q)` for every leaf q other than `p`, by name, in one
        walk down `p`'s path (the same comparisons, each node's computed once)."""
        ct = self.tree
        u, share, is_leaf, parent, children = (
            self.usage,
            ct.share,
            ct.is_leaf,
            ct.parent,
            ct.children,
        )
        under = ct.leaves_under
        pa = ct.path_nodes[p]
        npa = len(pa)
        out: dict[str, bool] = {}
        # (node b, level k, p's node a at k, a's level fair-share, b's); no closure, so
        # that no reference cycle is left for the (disabled) cyclic collector
        todo: list[tuple[int, int, int, float, float]] = []
        for k in range(1, npa):
            a = pa[k]
            pk = pa[k - 1]
            lfa = _lf(share[a], u[a] + delta, u[pk] + delta)
            up = u[pk] + delta  # siblings' parent is on p's path
            for b in children[pk]:
                if b != a:
                    todo.append((b, k, a, lfa, _lf(share[b], u[b], up)))
            while todo:
                b, kb, ab, lfa, lfb = todo.pop()
                if lfa != lfb:
                    out.update(dict.fromkeys(under[b], lfa > lfb))
                elif is_leaf[ab] or is_leaf[b] or kb + 1 >= npa:
                    out.update(dict.fromkeys(under[b], False))
                else:
                    # tied inner nodes: Slurm merges their children, compare a level down
                    a2 = pa[kb + 1]
                    lfa2 = _lf(share[a2], u[a2] + delta, u[parent[a2]] + delta)
                    ub = u[b] + 0.0  # b is not on p's path
                    for c in children[b]:
                        todo.append((c, kb + 1, a2, lfa2, _lf(share[c], u[c], ub)))
        return out


class StillAbove(NamedTuple):
    """Whether leaf `p` of `fair_share` still ranks above another project once its
    usage grows by `delta`: `fair_share.beats_after(p, delta, other)`, with the pair
    bounds `bounds` (other -> (lo, hi)) that answer most calls without the tree."""

    fair_share: FairShare
    p: int
    delta: float
    bounds: dict[str, tuple[float, float]]

    def __call__(self, other: str) -> bool:
        return self.fair_share.beats_after(self.p, self.delta, other)


def _parting(pa: tuple[int, ...], qa: tuple[int, ...]) -> int:
    """The level (index into both root-first paths) where two paths part: their first
    nodes that differ; the shorter path's length when one holds the other."""
    k = 1
    while k < len(pa) and k < len(qa) and pa[k] == qa[k]:
        k += 1
    return k


def _lf(share: float, usage: float, parent_usage: float) -> float:
    if share <= 0.0:
        return 0.0
    if usage <= 0.0 or parent_usage <= 0.0:
        return INF
    return share * parent_usage / usage


class _FairTreeWalk:
    """The Fair Tree walk's state: the order and factors found so far, with the rank
    the next leaf gets. A class, not a closure over `compute_fair_share`'s locals: a
    recursive closure is a reference cycle, left to the garbage collector every cycle."""

    def __init__(self, ct: CompiledTree, lf: list[float], seed: int, nleaves: int) -> None:
        self.static_rank, self.static_children = ct.static_order(seed)
        self.children = ct.children
        self.names = ct.names
        self.is_leaf = ct.is_leaf
        self.entitled = ct.entitled
        self.lf = lf
        self.by_lf = [-x for x in lf]  # sort key: the best served first
        self.nleaves = nleaves
        self.node_factor = [0.0] * len(lf)
        self.order: list[str] = []
        self.factor: dict[str, float] = {}
        self.rank = nleaves
        self.rnt = nleaves

    def walk(self, sibs: list[int], tied_in: bool) -> None:
        # `sibs` comes in static order; a stable sort by level fair-share completes it
        lf, is_leaf, names = self.lf, self.is_leaf, self.names
        sibs = sorted(sibs, key=self.by_lf.__getitem__)
        m = len(sibs)
        i = 0
        prev = None
        while i < m:
            a = sibs[i]
            tied = tied_in if i == 0 else lf[a] == prev
            if is_leaf[a]:
                if self.entitled[a] > 0.0:
                    if not tied:
                        self.rank = self.rnt
                    f = self.rank / self.nleaves
                    self.rnt -= 1
                else:
                    f = 0.0  # no entitlement: no place among the factors
                self.node_factor[a] = f
                self.factor[names[a]] = f
                self.order.append(names[a])
                i += 1
            else:
                j = i
                while j + 1 < m and not is_leaf[sibs[j + 1]] and lf[sibs[j + 1]] == lf[a]:
                    j += 1
                if j == i:
                    merged = self.static_children[a]
                else:
                    merged = []
                    for b in sibs[i : j + 1]:
                        merged.extend(self.children[b])
                    merged.sort(key=self.static_rank.__getitem__)
                if merged:
                    self.walk(merged, tied)
                i = j + 1
            prev = lf[a]


def compute_fair_share(
    tree: BudgetNode, usage: Mapping[str, float], seed: int = 0, memo: TreeMemo | None = None
) -> FairShare:
    """Run the Fair Tree walk on `tree` with per-project `usage` (missing = 0)."""
    ct = compile_tree(tree, memo)
    n = len(ct.names)
    u = [0.0] * n
    get = usage.get
    names = ct.names
    for i in ct.leaves:
        v = get(names[i], 0.0)
        if v > 0.0:
            u[i] = float(v)
    children = ct.children
    for i in ct.postorder_inner:
        u[i] = sum(map(u.__getitem__, children[i]))
    share, parent = ct.share, ct.parent
    lf = [0.0] * n
    for i in range(1, n):
        s = share[i]
        if s <= 0.0:
            continue
        up = u[parent[i]]
        ui = u[i]
        lf[i] = INF if ui <= 0.0 or up <= 0.0 else s * up / ui
    # the factors number the projects with an entitlement (rank / their count); one
    # without (a weight of 0 on its path) keeps its place in the order but no factor
    entitled = ct.entitled
    nleaves = sum(1 for i in ct.leaves if entitled[i] > 0.0)
    walk = _FairTreeWalk(ct, lf, seed, max(nleaves, 1))
    if ct.leaves:
        walk.walk(walk.static_children[0], False)
    node_factor, order, factor = walk.node_factor, walk.order, walk.factor
    # An inner node's factor is that of its best leaf.
    for i in ct.postorder_inner:
        if children[i]:
            node_factor[i] = max(map(node_factor.__getitem__, children[i]))
    return FairShare(tree=ct, order=order, factor=factor, usage=u, lf=lf, node_factor=node_factor)


def fair_tree(tree: BudgetNode, usage: Mapping[str, float], seed: int = 0) -> dict[str, object]:
    """Slurm Fair Tree figures for every node, as plain data.

    Returns ``{"order": [project, ...best first], "nodes": {path: {...}}}`` where a
    node path is the names below the root joined by "/" (e.g. "A/A1") and each node
    has ``norm_shares`` (share among siblings), ``effective_usage`` (usage among siblings),
    ``level_fs`` (S/U; ``inf`` for zero usage, 0 for zero weight), ``fairshare``
    (rank among leaves / number of leaves, 1.0 best; for an inner node the factor of
    its best leaf), plus ``usage`` (raw) and ``entitled_share`` (product of shares).
    """
    fs = compute_fair_share(tree, usage, seed)
    ct = fs.tree
    u = fs.usage
    nodes: dict[str, dict[str, float]] = {}
    for i in range(1, len(ct.names)):
        up = u[ct.parent[i]]
        nodes[ct.paths[i]] = {
            "norm_shares": ct.share[i],
            "effective_usage": u[i] / up if up > 0 else 0.0,
            "level_fs": fs.lf[i],
            "fairshare": fs.node_factor[i],
            "usage": u[i],
            "entitled_share": ct.entitled[i],
        }
    return {"order": list(fs.order), "nodes": nodes}
