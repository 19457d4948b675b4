"""The budget tree's rules, pure Python (no Django, nothing of the scheduler): share
arithmetic, node names and weights, and the tree file format. One definition used by
`budgets` (the database tree, its pages and API, `manage.py budget_import` /
`budget_export`) and by the pure core (`scheduler.core.engine.budget_tree`: the engine's
tree, its leaves and project keys; the simulator and the reports).

Arithmetic (SPEC 1.1)
    A node's share among its siblings is weight / sum of the sibling weights (0 for
    every sibling when they sum to 0; a negative weight counts as 0). A node's
    entitled share is the product of the shares on its path from the root (the root's
    is 1). Example: programs A/B at 50/50 and A's projects A1/A2 at 70/30 give A1 0.35.

File format (TREE.json, what `budget_export` writes and `budget_import` and
`python -m scheduler.core.sim --tree` read)
    ``{"name": ..., "children": [{"name": ..., "weight": ..., "children": [...]}, ...]}``
    - name: text, surrounding blanks dropped, 1..100 characters, no "/", no control or
      invisible characters, at least one ASCII letter or digit (it becomes part of the
      node's URL slug); siblings must have different names and slugs (`name_slug`);
    - weight: required on every node below the root (the root's is ignored): a
      number (or numeric text) >= 0, at most 9,999,999,999, at most 4 decimal places;
    - children: a list (missing or null: a leaf);
    - managers, members: optional lists of user names; members only on leaves;
    - usage: optional number >= 0 on a leaf (charged GPU-seconds, for the simulator's
      `fairshare` command);
    - any other key is ignored (so the API's `GET /api/v1/tree/` output reads too).
    `parse_tree_document` checks all of it and reports every problem (up to 20) with
    the node's path and the field.
"""

from __future__ import annotations

import math
import re
import unicodedata
from collections import defaultdict
from collections.abc import Hashable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation
from typing import Any, TypeVar

__all__ = [
    "MAX_ISSUES",
    "MAX_WEIGHT",
    "NAME_MAX_LENGTH",
    "PATH_SEPARATOR",
    "NameProblem",
    "NodeShare",
    "TreeDocument",
    "TreeFileError",
    "TreeIssue",
    "WeightProblem",
    "clean_name",
    "name_slug",
    "parse_tree_document",
    "parse_weight",
    "shares_by_id",
    "sibling_shares",
    "weight_number",
]

MAX_WEIGHT = Decimal("9999999999")
NAME_MAX_LENGTH = 100
MAX_ISSUES = 20
PATH_SEPARATOR = "/"
_WEIGHT_QUANTUM = Decimal("0.0001")
# Unicode categories refused in names: control characters, lone surrogates, invisible
# format characters (e.g. right-to-left overrides), line and paragraph separators.
_REFUSED_IN_NAMES = frozenset({"Cc", "Cs", "Cf", "Zl", "Zp"})

Key = TypeVar("Key", bound=Hashable)


# --------------------------------------------------------------------------- arithmetic


def sibling_shares(weights: Sequence[float | Decimal | int]) -> list[float]:
    """Each sibling's share: weight / sum of weights (all 0 when the sum is 0)."""
    clipped = [max(float(w), 0.0) for w in weights]
    total = sum(clipped)
    return [w / total if total > 0 else 0.0 for w in clipped]


@dataclass(frozen=True, slots=True)
class NodeShare:
    """A node's share among its siblings and its entitled share of the whole cluster."""

    share: float
    entitled: float


def shares_by_id(
    rows: Iterable[tuple[Key, Key | None, float | Decimal | int]],
) -> dict[Key, NodeShare]:
    """Shares of every node given (id, parent id, weight) rows; a root has share 1.

    Siblings are taken in row order (the order only matters for float rounding)."""
    children: dict[Key | None, list[tuple[Key, float | Decimal | int]]] = defaultdict(list)
    for node_id, parent_id, weight in rows:
        children[parent_id].append((node_id, weight))
    result: dict[Key, NodeShare] = {}
    for root_id, _ in children.get(None, []):
        result[root_id] = NodeShare(share=1.0, entitled=1.0)
    stack: list[Key] = [root_id for root_id, _ in children.get(None, [])]
    while stack:
        parent_id = stack.pop()
        siblings = children.get(parent_id, [])
        parent_entitled = result[parent_id].entitled
        shares = sibling_shares([w for _, w in siblings])
        for (node_id, _), share in zip(siblings, shares, strict=True):
            result[node_id] = NodeShare(share=share, entitled=parent_entitled * share)
            stack.append(node_id)
    return result


# --------------------------------------------------------------------------- names, weights


class NameProblem(ValueError):
    """A node name breaks the format's rules (the message says which)."""


class WeightProblem(ValueError):
    """A weight breaks the format's rules (the message says which)."""


def name_slug(name: str) -> str:
    """The URL slug of a name, exactly as Django's `slugify` makes it (ASCII)."""
    value = unicodedata.normalize("NFKD", name).encode("ascii", "ignore").decode("ascii")
    value = re.sub(r"[^\w\s-]", "", value.lower())
    return re.sub(r"[-\s]+", "-", value).strip("-_")


def clean_name(name: object) -> str:
    """A valid node name (surrounding blanks dropped) or `NameProblem`."""
    if not isinstance(name, str) or not name.strip():
        raise NameProblem("A name is required.")
    name = name.strip()
    if len(name) > NAME_MAX_LENGTH:
        raise NameProblem(f"A name has at most {NAME_MAX_LENGTH} characters.")
    for position, char in enumerate(name):
        if unicodedata.category(char) in _REFUSED_IN_NAMES:
            raise NameProblem(
                f"A name contains the control or invisible character U+{ord(char):04X} at "
                f"position {position + 1}; use printable text."
            )
    if PATH_SEPARATOR in name:
        raise NameProblem(
            f"A name cannot contain '{PATH_SEPARATOR}' (it separates the names in a path)."
        )
    if not name_slug(name):
        raise NameProblem(
            "A name needs at least one letter a-z or digit 0-9 once accents are dropped (it "
            "becomes part of the node's path, which is ASCII: 'Zürich' -> 'zurich')."
        )
    return name


def parse_weight(value: object) -> Decimal:
    """A weight: a finite number >= 0 (or numeric text), at most `MAX_WEIGHT`, with at
    most 4 decimal places; else `WeightProblem`."""
    if isinstance(value, bool) or value is None or (isinstance(value, str) and not value.strip()):
        raise WeightProblem("A weight is required: a number >= 0.")
    if not isinstance(value, int | float | str | Decimal):
        raise WeightProblem(f"{value!r} is not a number; a weight is a number >= 0.")
    try:
        weight = Decimal(str(value).strip())
    except (InvalidOperation, ValueError):
        raise WeightProblem(f"'{value}' is not a number; a weight is a number >= 0.") from None
    if not weight.is_finite():
        raise WeightProblem("A weight must be a finite number.")
    if weight < 0:
        raise WeightProblem(f"A weight cannot be negative (got {value}).")
    if weight > MAX_WEIGHT:
        raise WeightProblem(f"A weight must be at most {MAX_WEIGHT}.")
    if weight != weight.quantize(_WEIGHT_QUANTUM):
        raise WeightProblem("A weight has at most 4 decimal places.")
    return weight


def weight_number(weight: Decimal) -> int | float:
    """A weight as the file writes it, a JSON number: 50.0000 -> 50, 2.5000 -> 2.5."""
    value = Decimal(weight).normalize()
    return int(value) if value == value.to_integral() else float(value)


# --------------------------------------------------------------------------- the file format


@dataclass(frozen=True, slots=True)
class TreeIssue:
    """One problem of a tree document: the node's path, the field, what is wrong."""

    node: str
    field: str | None
    message: str

    def __str__(self) -> str:
        where = f"node '{self.node}'"
        return (
            f"{where}: field '{self.field}': {self.message}"
            if self.field
            else (f"{where}: {self.message}")
        )


class TreeFileError(ValueError):
    """A tree document breaks the format; `issues` lists every problem found (capped),
    `more` counts the ones left out."""

    def __init__(self, issues: Sequence[TreeIssue], more: int = 0) -> None:
        self.issues = list(issues)
        self.more = more
        lines = [str(i) for i in self.issues]
        if more:
            lines.append(f"... and {more} more problem(s)")
        super().__init__("\n".join(lines))


@dataclass(frozen=True, slots=True)
class TreeDocument:
    """A validated node of a tree document. `path` is its path from the root,
    root name included ("org/prog-a/a1"), as errors and audit rows name it."""

    name: str
    weight: Decimal | None  # None for the root
    children: tuple[TreeDocument, ...]
    path: str
    managers: tuple[str, ...] = ()
    members: tuple[str, ...] = ()
    usage: float | None = None

    def walk(self) -> Iterator[TreeDocument]:
        """This node and every node below it, depth first, parents before children."""
        yield self
        for child in self.children:
            yield from child.walk()


@dataclass
class _Issues:
    items: list[TreeIssue] = field(default_factory=list)
    more: int = 0

    def add(self, node: str, field_name: str | None, message: str) -> None:
        if len(self.items) < MAX_ISSUES:
            self.items.append(TreeIssue(node, field_name, message))
        else:
            self.more += 1


def _is_number(value: Any) -> bool:
    return (
        isinstance(value, int | float)
        and not isinstance(value, bool)
        and math.isfinite(float(value))
    )


def _people(data: Mapping[str, Any], key: str, label: str, issues: _Issues) -> tuple[str, ...]:
    people = data.get(key, [])
    if people is None:
        return ()
    if not isinstance(people, list) or not all(isinstance(p, str) and p.strip() for p in people):
        issues.add(label, key, "must be a list of user names")
        return ()
    return tuple(p.strip() for p in people)


def _parse_node(data: Any, parent: str, index: int, issues: _Issues) -> TreeDocument | None:
    raw_name = data.get("name") if isinstance(data, Mapping) else None
    try:
        name: str | None = clean_name(raw_name)
    except NameProblem as exc:
        name = None
        name_problem = str(exc)
    if not parent:
        label = name or "<root>"
    else:
        label = f"{parent}{PATH_SEPARATOR}{name}" if name else f"{parent}/children[{index}]"
    if not isinstance(data, Mapping):
        issues.add(label, None, f"must be an object, got {type(data).__name__}")
        return None
    ok = name is not None
    if name is None:
        issues.add(label, "name", f"{name_problem} (got {raw_name!r})")
    weight = None
    if parent:
        if "weight" not in data:
            issues.add(label, "weight", "missing: every node below the root has a weight")
            ok = False
        else:
            try:
                weight = parse_weight(data["weight"])
            except WeightProblem as weight_problem:
                issues.add(label, "weight", _with_value(str(weight_problem), data["weight"]))
                ok = False
    raw_children = data.get("children", [])
    if raw_children is None:
        raw_children = []
    if not isinstance(raw_children, list):
        issues.add(label, "children", "must be a list")
        return None
    children = _parse_children(raw_children, label, issues)
    managers = _people(data, "managers", label, issues)
    members = _people(data, "members", label, issues)
    if members and raw_children:
        issues.add(label, "members", "only projects (leaves) have members")
    usage = None
    if "usage" in data:
        u = data["usage"]
        if raw_children:
            issues.add(label, "usage", "allowed on leaves (projects) only")
        elif not _is_number(u) or u < 0:
            issues.add(label, "usage", f"must be a number >= 0, got {u!r}")
        else:
            usage = float(u)
    if not ok or name is None:
        return None
    return TreeDocument(name, weight, children, label, managers, members, usage)


def _parse_children(raw: list[Any], label: str, issues: _Issues) -> tuple[TreeDocument, ...]:
    children: list[TreeDocument] = []
    by_slug: dict[str, str] = {}
    for i, child in enumerate(raw):
        name = child.get("name") if isinstance(child, Mapping) else None
        duplicate = False
        if isinstance(name, str) and name.strip():
            slug = name_slug(name.strip())
            if slug in by_slug:
                issues.add(
                    label,
                    "children",
                    f"two children are named '{by_slug[slug]}' and '{name.strip()}'; names "
                    "must be unique among siblings (also once made URL slugs)",
                )
                duplicate = True
            else:
                by_slug[slug] = name.strip()
        built = _parse_node(child, label, i, issues)
        if built is not None and not duplicate:
            children.append(built)
    return tuple(children)


def parse_tree_document(data: Any) -> TreeDocument:
    """Validate a decoded tree document (see the module docstring for the rules).

    Raises `TreeFileError` listing every problem with its node path and field."""
    if not isinstance(data, Mapping):
        raise TreeFileError(
            [TreeIssue("<root>", None, "the tree must be a JSON object with a 'name'")]
        )
    issues = _Issues()
    root = _parse_node(data, "", 0, issues)
    if issues.items or root is None:
        raise TreeFileError(issues.items, issues.more)
    return root


def _with_value(problem: str, value: object) -> str:
    """`problem` with the value it refused, unless it quotes it already ("A weight cannot
    be negative (got -1)." once read "... (got -1). (got -1)")."""
    return problem if str(value) in problem else f"{problem} (got {value!r})"
