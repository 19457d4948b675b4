"""The engine's budget tree: its leaves (projects), their project keys and entitled
shares, and the engine's tree for a tree document. Pure Python (no Django). The rules it
builds on (share arithmetic, names, weights, the tree file format) are `budgets.rules`,
shared with the `budgets` app; they are re-exported here for the core's callers.

Leaves and their keys
    Leaves (nodes without children, below the root) are projects. A leaf's *path key*
    is the names of the nodes below the root joined by "/" (e.g. "prog-a/a1"); names
    are unique among siblings and contain no "/", so path keys are unique. A leaf's
    *project key*, the opaque string by which the engine, usage, traces and reports
    name a project, is:
      1. its `BudgetNode.key` when set;
      2. else its name, when no other leaf of the tree has that name;
      3. else its path key.
    So a tree whose project names are unique keeps its names as keys, and two
    projects called "a1" in different programs become "prog-a/a1" and "prog-b/a1".
    A caller that needs keys that never change when a leaf is added elsewhere (the
    live service) sets every key to the path key with `with_path_keys`. A trace may
    name a project by its project key or by its path key (`project_lookup`).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, replace

from budgets.rules import (
    MAX_ISSUES,
    MAX_WEIGHT,
    NAME_MAX_LENGTH,
    PATH_SEPARATOR,
    NameProblem,
    NodeShare,
    TreeDocument,
    TreeFileError,
    TreeIssue,
    WeightProblem,
    clean_name,
    name_slug,
    parse_tree_document,
    parse_weight,
    shares_by_id,
    sibling_shares,
    weight_number,
)
from scheduler.core.engine.types import BudgetNode

__all__ = [
    "MAX_ISSUES",
    "MAX_WEIGHT",
    "NAME_MAX_LENGTH",
    "Leaf",
    "NameProblem",
    "NodeShare",
    "TreeDocument",
    "TreeFileError",
    "TreeIssue",
    "WeightProblem",
    "budget_node",
    "clean_name",
    "document_usage",
    "entitled_shares",
    "leaf_path_keys",
    "leaves",
    "name_slug",
    "parse_tree_document",
    "parse_weight",
    "project_keys",
    "project_lookup",
    "shares_by_id",
    "sibling_shares",
    "weight_number",
    "with_path_keys",
]


# --------------------------------------------------------------------------- leaves


@dataclass(frozen=True, slots=True)
class Leaf:
    """A project of the tree: its project key, path key, node and entitled share."""

    key: str
    path: str
    node: BudgetNode
    entitled: float


def _walk_leaves(tree: BudgetNode) -> list[tuple[str, BudgetNode, float]]:
    """(path key, node, entitled share) of every leaf, depth first, left to right."""
    out: list[tuple[str, BudgetNode, float]] = []
    stack: list[tuple[BudgetNode, str, float]] = [(tree, "", 1.0)]
    while stack:
        node, path, entitled = stack.pop()
        if not node.children:
            if path:  # a bare root is no project
                out.append((path, node, entitled))
            continue
        shares = sibling_shares([c.weight for c in node.children])
        for child, share in reversed(list(zip(node.children, shares, strict=True))):
            child_path = f"{path}{PATH_SEPARATOR}{child.name}" if path else child.name
            stack.append((child, child_path, entitled * share))
    return out


def project_keys(names: Sequence[str], paths: Sequence[str], keys: Sequence[str]) -> list[str]:
    """The project key of each leaf from its name, path key and explicit key ("" if
    none), by the rule in the module docstring."""
    counts = Counter(names)
    return [
        key or (name if counts[name] == 1 else path)
        for name, path, key in zip(names, paths, keys, strict=True)
    ]


def leaves(tree: BudgetNode) -> list[Leaf]:
    """Every leaf (project) of `tree`, depth first, left to right."""
    walked = _walk_leaves(tree)
    keys = project_keys(
        [n.name for _, n, _ in walked], [p for p, _, _ in walked], [n.key for _, n, _ in walked]
    )
    return [
        Leaf(key=k, path=p, node=n, entitled=e) for k, (p, n, e) in zip(keys, walked, strict=True)
    ]


def leaf_path_keys(tree: BudgetNode) -> list[str]:
    """Every leaf's path key ("prog-a/a1"), depth first."""
    return [path for path, _, _ in _walk_leaves(tree)]


def entitled_shares(tree: BudgetNode) -> dict[str, float]:
    """Each project's entitled share of the cluster, by project key, depth first."""
    return {leaf.key: leaf.entitled for leaf in leaves(tree)}


def project_lookup(tree: BudgetNode) -> dict[str, str]:
    """Every name by which a file may refer to a project (its project key or its path
    key) -> its project key."""
    out: dict[str, str] = {}
    for leaf in leaves(tree):
        out[leaf.path] = leaf.key
    for leaf in leaves(tree):
        out[leaf.key] = leaf.key
    return out


def with_path_keys(tree: BudgetNode) -> BudgetNode:
    """A copy of `tree` whose every leaf is keyed by its path key."""

    def build(node: BudgetNode, path: str) -> BudgetNode:
        if not node.children:
            return replace(node, key=path) if path else node
        return replace(
            node,
            children=tuple(
                build(c, f"{path}{PATH_SEPARATOR}{c.name}" if path else c.name)
                for c in node.children
            ),
        )

    return build(tree, "")


def budget_node(document: TreeDocument) -> BudgetNode:
    """The engine's tree for a validated document (weights as floats)."""
    return BudgetNode(
        name=document.name,
        weight=float(document.weight) if document.weight is not None else 1.0,
        children=tuple(budget_node(c) for c in document.children),
    )


def document_usage(document: TreeDocument) -> dict[str, float]:
    """The `usage` given on leaves of a document, by project key."""
    tree = budget_node(document)
    given: dict[str, float] = {}

    def walk(node: TreeDocument, path: str) -> None:
        if not node.children:
            if node.usage is not None and path:
                given[path] = node.usage
            return
        for c in node.children:
            walk(c, f"{path}{PATH_SEPARATOR}{c.name}" if path else c.name)

    walk(document, "")
    keys = {leaf.path: leaf.key for leaf in leaves(tree)}
    return {keys[path]: u for path, u in given.items()}
