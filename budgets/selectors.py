"""Reads of the budget tree. Trees are small (hundreds of nodes), so one query loads
the whole tree into a `TreeIndex` that answers paths, subtrees and shares."""

from __future__ import annotations

import datetime as dt
from collections import defaultdict
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from decimal import Decimal

from django.contrib.auth import get_user_model
from django.db import connection
from django.db.models import F, Prefetch, QuerySet

from budgets.models import (
    BudgetEvent,
    BudgetEventItem,
    BudgetNode,
    EventKind,
    Membership,
    Role,
    ScheduledChange,
    ScheduledStatus,
    TreeState,
)
from budgets.shares import NodeShare, compute_shares, shares_with_edits, weight_number, weight_text
from config.errors import ValidationFailed
from config.plainsql import columns, fetch_all, fetch_one, instance
from config.text import is_id_text


@dataclass
class TreeIndex:
    """The whole tree in memory: nodes by id, children, slug paths and shares."""

    nodes: dict[int, BudgetNode]
    children: dict[int | None, list[BudgetNode]]
    shares: dict[int, NodeShare]
    managers: dict[int, list[str]] = field(default_factory=dict)
    members: dict[int, list[str]] = field(default_factory=dict)

    def rows(self) -> list[tuple[int, int | None, Decimal]]:
        return [(n.pk, n.parent_id, n.weight) for n in self.nodes.values()]

    def path(self, node_id: int) -> str:
        return slug_path(node_id, lambda n: (self.nodes[n].parent_id, self.nodes[n].slug))

    def ref(self, node_id: int) -> dict[str, int | str]:
        """How the API names a node beside its id wherever it refers to one (budget
        changes, previews): `node`, `node_path` and `node_name`."""
        node = self.nodes.get(node_id)
        if node is None:
            return {"node": node_id, "node_path": "", "node_name": ""}
        return {"node": node_id, "node_path": self.path(node_id), "node_name": node.name}

    def find(self, ref: str | int) -> int | None:
        """The id of the node `ref` names, by id, slug path (`org/program/project`) or,
        as a submission takes it (`-A pretraining`), a slug alone that one project has
        (else one node); None when there is none, or several have that slug."""
        text = str(ref).strip()
        if is_id_text(text) and int(text) in self.nodes:
            return int(text)
        wanted = text.strip("/")
        found = next((n for n in self.nodes if self.path(n) == wanted), None)
        if found is not None or "/" in wanted:
            return found
        leaves, named = self.by_slug(wanted)
        for candidates in (leaves, named):
            if len(candidates) == 1:
                return candidates[0]
        return None

    def by_slug(self, slug: str) -> tuple[list[int], list[int]]:
        """The projects (leaves) whose slug alone is `slug`, and every node that has it:
        the one rule by which a slug alone names a node (`find`, a submission's project)."""
        named = [n for n, node in self.nodes.items() if node.slug == slug]
        return [n for n in named if not self.children.get(n)], named

    def slurm_account(self, node_id: int) -> str | None:
        """The Slurm account of a project (a node below a root with no children): its
        slug, lower-cased; None for any other node (docs/slurm.md)."""
        node = self.nodes.get(node_id)
        if node is None or node.parent_id is None or self.children.get(node_id):
            return None
        return node.slug.lower()

    def ancestors(self, node_id: int) -> list[int]:
        """Strict ancestors, nearest first."""
        result = []
        current = self.nodes[node_id].parent_id
        while current is not None:
            result.append(current)
            current = self.nodes[current].parent_id
        return result

    def descendants(self, node_id: int) -> list[int]:
        """Strict descendants, depth first."""
        result: list[int] = []
        stack = [c.pk for c in reversed(self.children.get(node_id, []))]
        while stack:
            current = stack.pop()
            result.append(current)
            stack.extend(c.pk for c in reversed(self.children.get(current, [])))
        return result

    def walk(self) -> Iterator[tuple[BudgetNode, int]]:
        """(node, depth) depth-first in name order, roots first."""
        stack = [(n, 0) for n in reversed(self.children.get(None, []))]
        while stack:
            node, depth = stack.pop()
            yield node, depth
            stack.extend((c, depth + 1) for c in reversed(self.children.get(node.pk, [])))

    def preview(self, edits: Mapping[int, Decimal]) -> dict[int, NodeShare]:
        return shares_with_edits(self.rows(), edits)


def node_paths() -> dict[int, str]:
    """Node id -> slug path (`org/program/project`) of every node: what `TreeIndex.path`
    gives, from three columns (no shares, no model objects: a request that shows paths
    needs nothing else of the tree)."""
    parents: dict[int, tuple[int | None, str]] = {}
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT id, parent_id, slug FROM {BudgetNode._meta.db_table}")
        for node_id, parent_id, slug in cursor.fetchall():
            parents[node_id] = (parent_id, slug)
    return {node_id: slug_path(node_id, parents.__getitem__) for node_id in parents}


def slug_path(node_id: int, parent_and_slug: Callable[[int], tuple[int | None, str]]) -> str:
    """The slug path (`org/program/project`) of `node_id`, walking up the tree through
    `parent_and_slug` (node id -> its parent's id and its slug)."""
    parts = []
    current: int | None = node_id
    while current is not None:
        current, slug = parent_and_slug(current)
        parts.append(slug)
    return "/".join(reversed(parts))


def _nodes_by_name() -> dict[int, BudgetNode]:
    """Every node, by name (a plain statement: most requests build the index)."""
    sql = (
        f'SELECT {columns(BudgetNode, "n")} FROM "{BudgetNode._meta.db_table}" n ORDER BY n."name"'
    )
    return {node.pk: node for node in (instance(BudgetNode, row)[0] for row in fetch_all(sql, []))}


_PEOPLE_SQL = """
    SELECT m.node_id, m.role, u.{username} FROM {membership} m
    INNER JOIN {user} u ON u.id = m.user_id ORDER BY u.{username}
"""


def _people() -> list[tuple[int, str, str]]:
    """(node id, role, user name) of every membership, by user name."""
    user = get_user_model()
    sql = _PEOPLE_SQL.format(
        membership=Membership._meta.db_table,
        user=user._meta.db_table,
        username=user.USERNAME_FIELD,
    )
    return [(node_id, role, name) for node_id, role, name in fetch_all(sql, [])]


def tree_index(*, with_people: bool = False) -> TreeIndex:
    nodes = _nodes_by_name()
    children: dict[int | None, list[BudgetNode]] = defaultdict(list)
    for node in nodes.values():
        children[node.parent_id].append(node)
    index = TreeIndex(
        nodes=nodes,
        children=dict(children),
        shares=compute_shares((n.pk, n.parent_id, n.weight) for n in nodes.values()),
    )
    if with_people:
        managers: dict[int, list[str]] = defaultdict(list)
        members: dict[int, list[str]] = defaultdict(list)
        for node_id, role, username in _people():
            (managers if role == Role.MANAGER else members)[node_id].append(username)
        index.managers, index.members = dict(managers), dict(members)
    return index


# The events whose items set weights: applied changes (scheduled ones at their effective
# time), imports and structure changes (a node created with its weight, moved or renamed).
WEIGHT_EVENTS = (EventKind.APPLIED, EventKind.IMPORTED, EventKind.STRUCTURE)

# A recorded weight change: (effective time, node id, the weight before it).
WeightChange = tuple[dt.datetime, int, Decimal]


def weight_changes_after(at: dt.datetime) -> list[WeightChange]:
    """Every weight change of the audited, append-only budget history effective after
    `at`, latest first (`shares_as_of` undoes them)."""
    items = (
        BudgetEventItem.objects.filter(
            event__kind__in=WEIGHT_EVENTS,
            event__effective_at__gt=at,
            old_weight__isnull=False,
            new_weight__isnull=False,
        )
        .order_by("-event__effective_at", "-event_id")
        .values_list("event__effective_at", "node_id", "old_weight", "new_weight")
    )
    return [(when, node, old) for when, node, old, new in items if old != new]


def shares_as_of(
    at: dt.datetime, *, index: TreeIndex, changes: list[WeightChange]
) -> dict[int, NodeShare]:
    """Every node's shares with the weights in force at `at`: today's tree (`index`)
    with each weight changed after `at` (`changes`, from `weight_changes_after` of a
    time before `at`, latest first) set back to its old value. A node's first weight (its
    creation, an import) holds before it too, and moves are not undone (the history
    records weights, not former parents)."""
    weights = {pk: node.weight for pk, node in index.nodes.items()}
    for when, node_id, old in changes:
        if when <= at:
            break
        if node_id in weights:
            weights[node_id] = old
    return compute_shares((pk, n.parent_id, weights[pk]) for pk, n in index.nodes.items())


def tree_version() -> int:
    row = fetch_one(f'SELECT "version" FROM "{TreeState._meta.db_table}" WHERE "id" = 1', [])
    return row[0] if row else 0


def tree_as_dict(*, index: TreeIndex | None = None, for_export: bool = False) -> list[dict]:
    """Every root as a nested dict in the import format.

    By default each node also carries id, kind, share and entitled_share, and weights are
    decimal strings (the API's form); `for_export` gives the plain file format with numeric
    weights, which `budget_import` reads back."""
    index = index or tree_index(with_people=True)

    def build(node: BudgetNode) -> dict:
        data: dict = (
            {"name": node.name}
            if for_export
            else {"id": node.pk, "name": node.name, "kind": node.kind}
        )
        if node.parent_id is not None:
            data["weight"] = weight_number(node.weight) if for_export else weight_text(node.weight)
        if not for_export:
            data["share"] = index.shares[node.pk].share
            data["entitled_share"] = index.shares[node.pk].entitled
        if index.managers.get(node.pk):
            data["managers"] = index.managers[node.pk]
        if index.members.get(node.pk):
            data["members"] = index.members[node.pk]
        kids = index.children.get(node.pk, [])
        if kids:
            data["children"] = [build(c) for c in kids]
        return data

    return [build(root) for root in index.children.get(None, [])]


def ensure_node(node_id: int, *, field: str = "node") -> None:
    """A filter naming a node that does not exist is a 400 naming `field` (every
    operation answers an unknown object in a query parameter so, docs/api.md#errors)."""
    if not BudgetNode.objects.filter(pk=node_id).exists():
        raise ValidationFailed(f"There is no budget node with id {node_id}.", field=field)


def membership_list(*, node_id: int | None = None) -> QuerySet[Membership]:
    """Roles on nodes, by node, role and user name (a total order: one role of a user
    per node), on one node where `node_id` is given (an unknown one: ValidationFailed)."""
    qs = Membership.objects.select_related("user").order_by("node_id", "role", "user__username")
    if node_id is not None:
        ensure_node(node_id)
        qs = qs.filter(node_id=node_id)
    return qs


def budget_event_list(
    *,
    node_id: int | None = None,
    actor: str | None = None,
    since: dt.datetime | None = None,
    kind: str | None = None,
) -> QuerySet[BudgetEvent]:
    """Audit history, newest first, with items prefetched."""
    qs = BudgetEvent.objects.select_related("actor").prefetch_related(
        Prefetch(
            "items",
            queryset=BudgetEventItem.objects.annotate(node_name=F("node__name")).order_by(
                "node_path"
            ),
        )
    )
    if node_id is not None:
        ensure_node(node_id)
        qs = qs.filter(items__node_id=node_id).distinct()
    if actor:
        qs = qs.filter(actor_name=actor)
    if since is not None:
        qs = qs.filter(created_at__gte=since)
    if kind:
        qs = qs.filter(kind=kind)
    return qs


def scheduled_changes_pending() -> list[ScheduledChange]:
    """The pending scheduled changes, soonest first, each with its event (one plain
    statement: the tree page shows them)."""
    sql = (
        f"SELECT {columns(ScheduledChange, 's')}, {columns(BudgetEvent, 'e')} "
        f'FROM "{ScheduledChange._meta.db_table}" s '
        f'INNER JOIN "{BudgetEvent._meta.db_table}" e ON e."id" = s."event_id" '
        'WHERE s."status" = %s ORDER BY s."effective_at", s."id"'
    )
    changes = []
    for row in fetch_all(sql, [ScheduledStatus.PENDING]):
        change, at = instance(ScheduledChange, row)
        change.event, _ = instance(BudgetEvent, row, at)
        changes.append(change)
    return changes
