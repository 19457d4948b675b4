"""The tree's structure: creating and updating nodes (name, parent, kind, weight)."""

from __future__ import annotations

from typing import Any

import pghistory
from django.db import transaction

from budgets import permissions
from budgets.models import (
    BudgetEvent,
    BudgetEventItem,
    BudgetNode,
    EventKind,
    NodeKind,
    TreeState,
)
from budgets.rules import name_slug
from budgets.selectors import TreeIndex, tree_index
from budgets.services._common import (
    _actor_name,
    _check_base_version,
    _clean_name,
    _clean_reason,
    _lock_tree,
    _new_event,
    _require,
    parse_weight,
)
from config.errors import NotFound, NothingToChange, ValidationFailed


def _unique_among_siblings(
    index: TreeIndex, parent_id: int | None, name: str, *, exclude: int | None
) -> None:
    for sibling in index.children.get(parent_id, []):
        if sibling.pk != exclude and (sibling.name == name or sibling.slug == name_slug(name)):
            where = f"under '{index.path(parent_id)}'" if parent_id else "among the roots"
            raise ValidationFailed(
                f"A node named '{sibling.name}' already exists {where}.", field="name"
            )


def _structure_event(
    *,
    actor,
    reason: str,
    state: TreeState,
    node: BudgetNode,
    index: TreeIndex,
    old_weight,
    new_weight,
) -> BudgetEvent:
    event = _new_event(kind=EventKind.STRUCTURE, actor=actor, reason=reason, state=state)
    after = tree_index()
    before_shares = index.shares.get(node.pk)
    BudgetEventItem.objects.create(
        event=event,
        node=node,
        node_path=after.path(node.pk),
        old_weight=old_weight,
        new_weight=new_weight,
        old_entitled_share=before_shares.entitled if before_shares else None,
        new_entitled_share=after.shares[node.pk].entitled,
    )
    return event


def _new_parent(actor, index: TreeIndex, parent_id: int, *, action: str) -> BudgetNode:
    """The node that is to take a node under it (a new one or one moved there): it
    exists, the actor manages it or a node above it, and it is not a project (projects
    are leaves and own work). The one rule for node_create and node_update."""
    if parent_id not in index.nodes:
        raise ValidationFailed(f"There is no node with id {parent_id}.", field="parent")
    _require(
        actor is None or permissions.may_add_node_under(actor, parent_id),
        actor,
        index,
        parent_id,
        field="parent",
        action=action,
    )
    parent = index.nodes[parent_id]
    if parent.kind == NodeKind.PROJECT:
        raise ValidationFailed(
            f"'{index.path(parent_id)}' is a project; projects are leaves and own work, not nodes.",
            field="parent",
        )
    return parent


def node_create(
    *, actor, parent_id: int, name: str, weight: Any = "1", kind: str | None = None, reason: str
) -> BudgetNode:
    """Add a node under `parent_id` (a program or the organisation). Audited."""
    reason = _clean_reason(reason)
    name = _clean_name(name)
    weight_value = parse_weight(weight)
    with transaction.atomic():
        state = _lock_tree()
        index = tree_index()
        parent = _new_parent(actor, index, parent_id, action="add nodes under")
        _unique_among_siblings(index, parent_id, name, exclude=None)
        kind = kind or NodeKind.PROJECT
        if kind not in (NodeKind.PROGRAM, NodeKind.PROJECT):
            raise ValidationFailed("kind must be 'program' or 'project'.", field="kind")
        with pghistory.context(actor=_actor_name(actor), reason=reason):
            node = BudgetNode.objects.create(
                parent=parent, name=name, slug=name_slug(name), kind=kind, weight=weight_value
            )
        _structure_event(
            actor=actor,
            reason=reason,
            state=state,
            node=node,
            index=index,
            old_weight=None,
            new_weight=weight_value,
        )
        return node


def node_update(
    *,
    actor,
    node_id: int,
    reason: str,
    name: str | None = None,
    parent_id: int | None = None,
    base_version: int | None = None,
) -> BudgetNode:
    """Rename a node or move it under another parent. Audited.

    A move needs the actor to govern the node and to manage (or govern) the new parent;
    a node cannot move under itself or one of its descendants."""
    reason = _clean_reason(reason)
    with transaction.atomic():
        state = _lock_tree()
        index = tree_index()
        if node_id not in index.nodes:
            raise NotFound(f"There is no node with id {node_id}.")
        node = index.nodes[node_id]
        _require(
            actor is None or permissions.may_change_node(actor, node_id, index),
            actor,
            index,
            node_id,
            field="node",
            action="change",
        )
        _check_base_version(state, base_version)
        new_parent_id = node.parent_id
        if parent_id is not None and parent_id != node.parent_id:
            # The cycle first: it is the reason a move under a descendant project fails.
            if parent_id == node_id or parent_id in index.descendants(node_id):
                raise ValidationFailed(
                    f"'{index.path(node_id)}' cannot move under itself or its own descendant "
                    f"'{index.path(parent_id)}'.",
                    field="parent",
                )
            _new_parent(actor, index, parent_id, action="move nodes under")
            new_parent_id = parent_id
        new_name = _clean_name(name) if name is not None else node.name
        if new_name == node.name and new_parent_id == node.parent_id:
            raise NothingToChange(
                f"'{index.path(node_id)}' already has this name and parent; nothing was recorded.",
                field="name" if name is not None else ("parent" if parent_id is not None else None),
            )
        _unique_among_siblings(index, new_parent_id, new_name, exclude=node_id)
        node.name, node.slug, node.parent_id = new_name, name_slug(new_name), new_parent_id
        with pghistory.context(actor=_actor_name(actor), reason=reason):
            node.save()
        _structure_event(
            actor=actor,
            reason=reason,
            state=state,
            node=node,
            index=index,
            old_weight=node.weight,
            new_weight=node.weight,
        )
        return node
