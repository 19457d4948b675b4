"""The tree as a document: parsing, importing (replacing the tree) and exporting."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pghistory
from django.contrib.auth import get_user_model
from django.db import transaction

from budgets import permissions, rules
from budgets.models import (
    BudgetEventItem,
    BudgetNode,
    EventKind,
    Membership,
    NodeKind,
    Role,
)
from budgets.rules import name_slug
from budgets.selectors import TreeIndex, tree_as_dict, tree_index
from budgets.services._common import (
    _actor_name,
    _clean_reason,
    _lock_tree,
    _new_event,
)
from config.errors import NotFound, PermissionDenied, ValidationFailed
from config.plainsql import next_ids


def parse_tree_document(data: Any) -> rules.TreeDocument:
    """Validate the budget tree file format (`budgets.rules`, the one
    parser the simulator uses too); the error lists every problem with its node path."""
    try:
        return rules.parse_tree_document(data)
    except rules.TreeFileError as exc:
        first = exc.issues[0]
        field = f"{first.node}.{first.field}" if first.field else first.node
        raise ValidationFailed(str(exc).replace("\n", "; "), field=field) from None


def _people_named(document: rules.TreeDocument) -> list[str]:
    """Every user name the document gives roles to, once each, in the order the writer
    meets them (depth first, managers before members)."""
    names = (name for item in document.walk() for name in (*item.managers, *item.members))
    return list(dict.fromkeys(names))


def _node_kind(item: rules.TreeDocument, parent: BudgetNode | None) -> str:
    if parent is None:
        return NodeKind.ORGANISATION
    return NodeKind.PROGRAM if item.children else NodeKind.PROJECT


class _TreeWriter:
    """Writes a parsed document's nodes and roles under the tree lock, remembering the
    nodes it touched (with their weight before) and how many roles it added.

    The tree as it was (`before`, read under the lock) finds the existing nodes; a node
    that is not there is new, and so is everything below it: a new subtree is written
    with one insert of its nodes (ids taken in depth-first order, as one insert per
    node would) and one of its roles. Users are looked up, and the missing ones created,
    in one statement each. The history rows are those the row-by-row writes made."""

    def __init__(self, document: rules.TreeDocument, before: TreeIndex) -> None:
        self.users = self._users(_people_named(document))
        self.existing = {(n.parent_id, n.name): n for n in before.nodes.values()}
        self.touched: list[tuple[BudgetNode, Decimal | None]] = []
        self.roles_added = 0

    @staticmethod
    def _users(names: list[str]) -> dict[str, Any]:
        """The users of those names; the new ones created without a usable password."""
        user_model = get_user_model()
        users = {u.get_username(): u for u in user_model.objects.filter(username__in=names)}
        new = []
        for username in names:
            if username not in users:
                users[username] = user_model(username=username)
                users[username].set_unusable_password()
                new.append(users[username])
        user_model.objects.bulk_create(new)
        return users

    def _roles(self, item: rules.TreeDocument) -> list[tuple[Any, str]]:
        """(user, role) of each role the document gives on `item`, once each."""
        pairs = {
            (username, role): None
            for role, people in ((Role.MANAGER, item.managers), (Role.MEMBER, item.members))
            for username in people
        }
        return [(self.users[username], role) for username, role in pairs]

    def upsert(self, item: rules.TreeDocument, parent: BudgetNode | None) -> BudgetNode:
        """Create or update `item` under `parent` (matched by name), then its subtree."""
        node = self.existing.get((parent.pk if parent else None, item.name))
        if node is None:
            return self._create(item, parent)
        old_weight = node.weight
        node.kind = _node_kind(item, parent)
        if item.weight is not None:
            node.weight = item.weight
        node.save()
        self.touched.append((node, old_weight))
        for user, role in self._roles(item):
            _, created = Membership.objects.get_or_create(user=user, node=node, role=role)
            self.roles_added += created
        for child in item.children:
            self.upsert(child, node)
        return node

    def _create(self, item: rules.TreeDocument, parent: BudgetNode | None) -> BudgetNode:
        """Create `item` and its whole subtree (none of it exists: `item` is new)."""
        node_ids = iter(next_ids(BudgetNode, sum(1 for _ in item.walk())))
        nodes: list[BudgetNode] = []
        roles: list[Membership] = []
        stack = [(item, parent)]
        while stack:
            current, above = stack.pop()
            node = BudgetNode(
                pk=next(node_ids),
                parent=above,
                name=current.name,
                slug=name_slug(current.name),
                kind=_node_kind(current, above),
            )
            if current.weight is not None:
                node.weight = current.weight
            nodes.append(node)
            roles.extend(Membership(user=u, node=node, role=r) for u, r in self._roles(current))
            stack.extend((child, node) for child in reversed(current.children))
        BudgetNode.objects.bulk_create(nodes)
        Membership.objects.bulk_create(roles)
        self.touched.extend((node, None) for node in nodes)
        self.roles_added += len(roles)
        return nodes[0]


def _changed_nodes(
    touched: list[tuple[BudgetNode, Decimal | None]],
    before: TreeIndex,
    before_paths: dict[int, str],
    after: TreeIndex,
) -> list[tuple[BudgetNode, Decimal | None]]:
    """The touched nodes that are new, or whose weight, entitled share or path moved."""
    return [
        (node, old_weight)
        for node, old_weight in touched
        if node.pk not in before.shares
        or old_weight != node.weight
        or abs(before.shares[node.pk].entitled - after.shares[node.pk].entitled) > 1e-12
        or before_paths.get(node.pk) != after.path(node.pk)
    ]


def budget_tree_import(
    *, data: Any, actor=None, reason: str = "Imported budget tree"
) -> BudgetNode:
    """Create or update a tree from the import format, atomically.

    Nodes are matched by name under their parent: matched nodes take the file's weight,
    new nodes are created, nodes absent from the file are kept. Users named in
    managers/members are created without a usable password. An invalid file changes nothing.
    """
    if not permissions.may_import_tree(actor):
        raise PermissionDenied("Only superusers may import a budget tree.")
    reason = _clean_reason(reason)
    document = parse_tree_document(data)
    with transaction.atomic():
        state = _lock_tree()
        before = tree_index()
        before_paths = {node_id: before.path(node_id) for node_id in before.nodes}
        with pghistory.context(actor=_actor_name(actor), reason=reason):
            writer = _TreeWriter(document, before)
            root = writer.upsert(document, None)
        after = tree_index()
        changed = _changed_nodes(writer.touched, before, before_paths, after)
        if not changed and not writer.roles_added:
            return root  # the file matches the tree: nothing to record
        event = _new_event(kind=EventKind.IMPORTED, actor=actor, reason=reason, state=state)
        BudgetEventItem.objects.bulk_create(
            BudgetEventItem(
                event=event,
                node=node,
                node_path=after.path(node.pk),
                old_weight=old_weight if node.own_weight is not None else None,
                new_weight=node.own_weight,
                old_entitled_share=before.shares[node.pk].entitled
                if node.pk in before.shares
                else None,
                new_entitled_share=after.shares[node.pk].entitled,
            )
            for node, old_weight in changed
        )
        return root


def budget_tree_export(*, root_name: str | None = None) -> dict[str, Any]:
    """The tree in the import format (weights as numbers, people by user name)."""
    roots = tree_as_dict(for_export=True)
    if root_name is not None:
        roots = [r for r in roots if r["name"] == root_name]
    if not roots:
        raise NotFound(
            "There is no budget tree to export."
            if root_name is None
            else f"There is no tree named '{root_name}'."
        )
    return roots[0]
