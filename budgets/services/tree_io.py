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


def parse_tree_document(data: Any) -> rules.TreeDocument:
    """Validate the budget tree file format (`budgets.rules`, the one
    parser the simulator uses too); the error lists every problem with its node path."""
    try:
        return rules.parse_tree_document(data)
    except rules.TreeFileError as exc:
        first = exc.issues[0]
        field = f"{first.node}.{first.field}" if first.field else first.node
        raise ValidationFailed(str(exc).replace("\n", "; "), field=field) from None


class _TreeWriter:
    """Writes a parsed document's nodes and roles under the tree lock, remembering the
    nodes it touched (with their weight before) and how many roles it added."""

    def __init__(self) -> None:
        self.user_model = get_user_model()
        self.users: dict[str, Any] = {}
        self.touched: list[tuple[BudgetNode, Decimal | None]] = []
        self.roles_added = 0

    def user(self, username: str):
        """The user of that name, created without a usable password if new."""
        if username not in self.users:
            found = self.user_model.objects.filter(username=username).first()
            if found is None:
                found = self.user_model(username=username)
                found.set_unusable_password()
                found.save()
            self.users[username] = found
        return self.users[username]

    def upsert(self, item: rules.TreeDocument, parent: BudgetNode | None) -> BudgetNode:
        """Create or update `item` under `parent` (matched by name), then its subtree."""
        if item.children:
            kind = NodeKind.ORGANISATION if parent is None else NodeKind.PROGRAM
        else:
            kind = NodeKind.ORGANISATION if parent is None else NodeKind.PROJECT
        node = BudgetNode.objects.filter(parent=parent, name=item.name).first()
        old_weight = node.weight if node else None
        if node is None:
            node = BudgetNode(parent=parent, name=item.name, slug=name_slug(item.name))
        node.kind = kind
        if item.weight is not None:
            node.weight = item.weight
        node.save()
        self.touched.append((node, old_weight))
        for role, people in ((Role.MANAGER, item.managers), (Role.MEMBER, item.members)):
            for username in people:
                _, created = Membership.objects.get_or_create(
                    user=self.user(username), node=node, role=role
                )
                self.roles_added += created
        for child in item.children:
            self.upsert(child, node)
        return node


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
        writer = _TreeWriter()
        with pghistory.context(actor=_actor_name(actor), reason=reason):
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
                old_weight=old_weight,
                new_weight=node.weight,
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
