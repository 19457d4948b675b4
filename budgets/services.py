"""Writes to the budget tree. Every write a person causes takes `actor=` and is
audited in the same transaction; permission checks happen here, not in views."""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

import pghistory
from django.contrib.auth import get_user_model
from django.db import transaction
from django.utils import timezone

from budgets import permissions
from budgets.models import (
    BudgetEvent,
    BudgetEventItem,
    BudgetNode,
    EventKind,
    Membership,
    NodeKind,
    Role,
    ScheduledChange,
    ScheduledStatus,
    TreeState,
)
from budgets.selectors import TreeIndex, tree_as_dict, tree_index
from budgets.shares import NodeShare
from budgets.signals import tree_changed
from config.errors import Conflict, NotFound, NothingToChange, PermissionDenied, ValidationFailed
from config.text import clean_reason, refuse_control_characters
from scheduler.core.engine import budget_tree
from scheduler.core.engine.budget_tree import name_slug

MAX_REASON_LENGTH = 2000
MAX_WEIGHT = budget_tree.MAX_WEIGHT
NAME_MAX_LENGTH = budget_tree.NAME_MAX_LENGTH


@dataclass(frozen=True)
class WeightEdit:
    node_id: int
    weight: Decimal


# ---------------------------------------------------------------- validation helpers


def _clean_reason(reason: Any) -> str:
    return clean_reason(
        reason,
        required_message="A written reason is required for every budget change.",
        max_length=MAX_REASON_LENGTH,
    )


def parse_weight(value: Any, *, field: str = "weight") -> Decimal:
    """A weight, by the budget tree's one rule (`budget_tree.parse_weight`): a finite
    decimal >= 0, at most `MAX_WEIGHT`, with at most 4 decimal places."""
    try:
        return budget_tree.parse_weight(value)
    except budget_tree.WeightProblem as exc:
        raise ValidationFailed(str(exc), field=field) from None


def _clean_name(name: Any, *, field: str = "name") -> str:
    """A node name by the budget tree's one rule (`budget_tree.clean_name`)."""
    if isinstance(name, str):
        refuse_control_characters(name.strip(), field=field, multiline=False)
    try:
        return budget_tree.clean_name(name)
    except budget_tree.NameProblem as exc:
        raise ValidationFailed(str(exc), field=field) from None


def _actor_name(actor) -> str:
    return actor.get_username() if actor is not None else ""


def _lock_tree() -> TreeState:
    """Serialise tree writes: every write locks the single version row first."""
    state, _ = TreeState.objects.select_for_update().get_or_create(pk=1)
    return state


def _new_event(
    *,
    kind: str,
    actor,
    reason: str,
    state: TreeState,
    effective_at: dt.datetime | None = None,
    bump_version: bool = True,
    base_version: int | None = None,
    scheduled_event: BudgetEvent | None = None,
) -> BudgetEvent:
    """Write an audit event; an event that changes the tree bumps its version first
    (and asks every cluster for a scheduling cycle once the change commits)."""
    if bump_version:
        state.version += 1
        state.save(update_fields=["version"])
        transaction.on_commit(_tree_changed)
    return BudgetEvent.objects.create(
        kind=kind,
        actor=actor,
        actor_name=_actor_name(actor),
        reason=reason,
        effective_at=effective_at or timezone.now(),
        base_version=base_version,
        tree_version=state.version,
        scheduled_event=scheduled_event,
    )


def _tree_changed() -> None:
    """Tell whoever listens (the scheduler asks every cluster for a cycle)."""
    tree_changed.send(sender=BudgetEvent)


def _check_base_version(state: TreeState, base_version: int | None) -> None:
    if base_version is not None and base_version != state.version:
        raise Conflict(
            f"The tree changed since you loaded it (your version {base_version}, current "
            f"version {state.version}). Reload, review the new weights and try again.",
            field="base_version",
            extra={"current_version": state.version},
        )


def _require(
    allowed: bool, actor, index: TreeIndex, node_id: int, *, field: str, action: str
) -> None:
    """PermissionDenied unless `allowed` (the rule of `budgets.permissions` that applies)
    or `actor` is None (the system: management commands and scheduled work)."""
    if actor is not None and not allowed:
        raise PermissionDenied(
            f"You may not {action} '{index.path(node_id)}': it is outside the subtree you manage.",
            field=field,
        )


def _require_governs(actor, index: TreeIndex, node_id: int, *, field: str, action: str) -> None:
    allowed = actor is None or permissions.may_change_weight(actor, node_id, index)
    _require(allowed, actor, index, node_id, field=field, action=action)


# ---------------------------------------------------------------- weight changes


def weight_edits_check(
    *, actor, node_id: int, changes: Sequence[Mapping[str, Any]], field: str = "weights"
) -> tuple[TreeIndex, dict[int, Decimal]]:
    """Proposed weights of `node_id`'s children, validated by the rules of
    `budget_change_create` (nothing is written): the actor must govern every child (as
    on the edit page), each change names a child of the node and a valid weight.

    Raises PermissionDenied, or ValidationFailed naming `node` or `field`."""
    index = tree_index()
    if node_id not in index.nodes:
        raise ValidationFailed(f"There is no node with id {node_id}.", field="node")
    children = index.children.get(node_id, [])
    if not children:
        raise ValidationFailed(
            f"'{index.path(node_id)}' is a project: it has no children to weigh.", field="node"
        )
    _require(
        actor is None or permissions.may_change_weights_under(actor, node_id, index),
        actor,
        index,
        node_id,
        field="node",
        action="change the weights under",
    )
    edits = _parse_edits(changes, index, field=field)
    child_ids = {c.pk for c in children}
    for i, edit in enumerate(edits):
        if edit.node_id not in child_ids:
            raise ValidationFailed(
                f"Node {edit.node_id} is not a child of '{index.path(node_id)}'.",
                field=f"{field}[{i}].node",
            )
    return index, {e.node_id: e.weight for e in edits}


def _parse_edits(
    changes: Sequence[Mapping[str, Any]], index: TreeIndex, *, field: str = "changes"
) -> list[WeightEdit]:
    if not isinstance(changes, Sequence) or isinstance(changes, str | bytes) or not changes:
        raise ValidationFailed("Give at least one weight change.", field=field)
    edits: list[WeightEdit] = []
    seen: set[int] = set()
    for i, change in enumerate(changes):
        if not isinstance(change, Mapping):
            raise ValidationFailed(
                "Each change is an object with node and weight.", field=f"{field}[{i}]"
            )
        raw_node = change.get("node")
        if isinstance(raw_node, bool) or not isinstance(raw_node, int | str):
            raise ValidationFailed("A node id is required.", field=f"{field}[{i}].node")
        try:
            node_id = int(raw_node)
        except ValueError:
            raise ValidationFailed(
                f"'{raw_node}' is not a node id.", field=f"{field}[{i}].node"
            ) from None
        if node_id not in index.nodes:
            raise ValidationFailed(
                f"There is no node with id {node_id}.", field=f"{field}[{i}].node"
            )
        if index.nodes[node_id].parent_id is None:
            raise ValidationFailed(
                "The root has no siblings, so it has no weight to change.",
                field=f"{field}[{i}].node",
            )
        if node_id in seen:
            raise ValidationFailed(
                f"Node {node_id} appears twice in one change.", field=f"{field}[{i}].node"
            )
        seen.add(node_id)
        edits.append(
            WeightEdit(node_id, parse_weight(change.get("weight"), field=f"{field}[{i}].weight"))
        )
    return edits


def _write_items(
    event: BudgetEvent,
    index: TreeIndex,
    edits: Mapping[int, Decimal],
    before: Mapping[int, NodeShare],
    after: Mapping[int, NodeShare],
) -> None:
    """One item per node whose weight or entitled share changes."""
    items = []
    for node_id, node in index.nodes.items():
        new_weight = edits.get(node_id, node.weight)
        if (
            new_weight == node.weight
            and abs(before[node_id].entitled - after[node_id].entitled) < 1e-12
        ):
            continue
        items.append(
            BudgetEventItem(
                event=event,
                node_id=node_id,
                node_path=index.path(node_id),
                old_weight=node.weight,
                new_weight=new_weight,
                old_entitled_share=before[node_id].entitled,
                new_entitled_share=after[node_id].entitled,
            )
        )
    BudgetEventItem.objects.bulk_create(items)


def _apply_weights(
    *,
    actor,
    reason: str,
    edits: Mapping[int, Decimal],
    index: TreeIndex,
    state: TreeState,
    kind: str,
    effective_at: dt.datetime,
    base_version: int | None = None,
    scheduled_event: BudgetEvent | None = None,
) -> BudgetEvent:
    before = index.shares
    after = index.preview(edits)
    event = _new_event(
        kind=kind,
        actor=actor,
        reason=reason,
        state=state,
        effective_at=effective_at,
        base_version=base_version,
        scheduled_event=scheduled_event,
    )
    _write_items(event, index, edits, before, after)
    with pghistory.context(budget_event=event.pk, actor=_actor_name(actor), reason=reason):
        for node_id, weight in edits.items():
            node = index.nodes[node_id]
            if node.weight != weight:
                node.weight = weight
                node.save(update_fields=["weight"])
    return event


def budget_change_create(
    *,
    actor,
    reason: str,
    changes: Sequence[Mapping[str, Any]],
    effective_at: dt.datetime | None = None,
    base_version: int | None = None,
    now: dt.datetime | None = None,
) -> BudgetEvent:
    """Change several weights at once, now or at a future time, with a written reason.

    Raises ValidationFailed (400), PermissionDenied (403, a node outside the actor's
    subtree) or Conflict (409, `base_version` is not the current tree version).
    Nothing is written unless everything is valid.
    """
    now = now or timezone.now()
    reason = _clean_reason(reason)
    if effective_at is not None and timezone.is_naive(effective_at):
        raise ValidationFailed(
            "effective_at needs a time zone (e.g. 2026-12-01T09:00:00Z).", field="effective_at"
        )
    with transaction.atomic():
        state = _lock_tree()
        index = tree_index()
        edit_list = _parse_edits(changes, index)
        for i, edit in enumerate(edit_list):
            _require_governs(
                actor,
                index,
                edit.node_id,
                field=f"changes[{i}].node",
                action="change the weight of",
            )
        _check_base_version(state, base_version)
        edits = {e.node_id: e.weight for e in edit_list}
        if effective_at is None or effective_at <= now:
            if all(index.nodes[n].weight == w for n, w in edits.items()):
                raise NothingToChange(
                    "Every weight in this change equals the current one; nothing was recorded.",
                    field="changes",
                )
            return _apply_weights(
                actor=actor,
                reason=reason,
                edits=edits,
                index=index,
                state=state,
                kind=EventKind.APPLIED,
                effective_at=effective_at or now,
                base_version=base_version,
            )
        event = _new_event(
            kind=EventKind.SCHEDULED,
            actor=actor,
            reason=reason,
            state=state,
            effective_at=effective_at,
            bump_version=False,
            base_version=base_version,
        )
        _write_items(event, index, edits, index.shares, index.preview(edits))
        ScheduledChange.objects.create(
            event=event,
            effective_at=effective_at,
            changes=[{"node": e.node_id, "weight": str(e.weight)} for e in edit_list],
        )
        return event


def budget_change_cancel(*, actor, scheduled_event_id: int, reason: str) -> BudgetEvent:
    """Cancel a pending future change: whoever may change every weight it sets, now (its
    author only while they still may: `permissions.may_cancel_scheduled_change`)."""
    reason = _clean_reason(reason)
    with transaction.atomic():
        state = _lock_tree()
        scheduled = (
            ScheduledChange.objects.select_for_update(of=("self",))
            .select_related("event")
            .filter(event_id=scheduled_event_id)
            .first()
        )
        if scheduled is None:
            raise NotFound(f"There is no scheduled change with event id {scheduled_event_id}.")
        if scheduled.status != ScheduledStatus.PENDING:
            raise Conflict(
                f"This change is already {scheduled.status}; only pending changes can be cancelled."
            )
        index = tree_index()
        for change in scheduled.changes:
            _require_governs(
                actor, index, int(change["node"]), field="event", action="cancel a change to"
            )
        scheduled.status = ScheduledStatus.CANCELLED
        scheduled.save(update_fields=["status"])
        return _new_event(
            kind=EventKind.CANCELLED,
            actor=actor,
            reason=reason,
            state=state,
            bump_version=False,
            scheduled_event=scheduled.event,
        )


def budget_apply_due_changes(*, now: dt.datetime | None = None) -> list[BudgetEvent]:
    """Apply every pending change whose effective time has come, oldest first.

    A change is applied in its author's name only while the author may still change
    every weight it sets (`permissions.may_apply_scheduled_change`); otherwise it is
    cancelled by the system with a reason that says why, and nothing changes.
    Called by Celery beat and before each scheduling decision, so the next decision
    after the effective time uses the new weights. Returns the applied events."""
    now = now or timezone.now()
    applied: list[BudgetEvent] = []
    due_now = ScheduledChange.objects.filter(status=ScheduledStatus.PENDING, effective_at__lte=now)
    if not due_now.exists():  # every cycle asks: no tree lock when nothing is due
        return applied
    with transaction.atomic():
        state = _lock_tree()
        due = list(
            ScheduledChange.objects.select_for_update(of=("self",))
            .select_related("event", "event__actor")
            .filter(status=ScheduledStatus.PENDING, effective_at__lte=now)
            .order_by("effective_at", "pk")
        )
        for scheduled in due:
            index = tree_index()
            edits = {
                int(c["node"]): Decimal(c["weight"])
                for c in scheduled.changes
                if int(c["node"]) in index.nodes
            }
            author = scheduled.event.actor
            if not permissions.may_apply_scheduled_change(author, edits, index):
                _lapse(scheduled, author=author, edits=edits, index=index, state=state)
                continue
            applied.append(
                _apply_weights(
                    actor=scheduled.event.actor,
                    reason=scheduled.event.reason,
                    edits=edits,
                    index=index,
                    state=state,
                    kind=EventKind.APPLIED,
                    effective_at=scheduled.effective_at,
                    base_version=scheduled.event.base_version,
                    scheduled_event=scheduled.event,
                )
            )
            scheduled.status = ScheduledStatus.APPLIED
            scheduled.save(update_fields=["status"])
    return applied


def _lapse(
    scheduled: ScheduledChange,
    *,
    author,
    edits: Mapping[int, Decimal],
    index: TreeIndex,
    state: TreeState,
) -> BudgetEvent:
    """Cancel, as the system, a scheduled change whose author lost the right to make it."""
    paths = ", ".join(
        index.path(n) for n in edits if not permissions.may_change_weight(author, n, index)
    )
    scheduled.status = ScheduledStatus.CANCELLED
    scheduled.save(update_fields=["status"])
    return _new_event(
        kind=EventKind.CANCELLED,
        actor=None,
        reason=(
            f"Not applied at its effective time: its author {_actor_name(author)} may no "
            f"longer change the weight of {paths or 'these nodes'}."
        ),
        state=state,
        effective_at=scheduled.effective_at,
        bump_version=False,
        scheduled_event=scheduled.event,
    )


# ---------------------------------------------------------------- structure


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
        if parent_id not in index.nodes:
            raise ValidationFailed(f"There is no node with id {parent_id}.", field="parent")
        parent = index.nodes[parent_id]
        _require(
            actor is None or permissions.may_add_node_under(actor, parent_id),
            actor,
            index,
            parent_id,
            field="parent",
            action="add nodes under",
        )
        if parent.kind == NodeKind.PROJECT:
            raise ValidationFailed(
                f"'{index.path(parent_id)}' is a project; projects are leaves and own work, not nodes.",
                field="parent",
            )
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
            if parent_id not in index.nodes:
                raise ValidationFailed(f"There is no node with id {parent_id}.", field="parent")
            if parent_id == node_id or parent_id in index.descendants(node_id):
                raise ValidationFailed(
                    f"'{index.path(node_id)}' cannot move under itself or its own descendant "
                    f"'{index.path(parent_id)}'.",
                    field="parent",
                )
            if index.nodes[parent_id].kind == NodeKind.PROJECT:
                raise ValidationFailed(
                    f"'{index.path(parent_id)}' is a project; projects cannot have children.",
                    field="parent",
                )
            _require(
                actor is None or permissions.may_add_node_under(actor, parent_id),
                actor,
                index,
                parent_id,
                field="parent",
                action="move nodes under",
            )
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


# ---------------------------------------------------------------- memberships


def _role_event(
    *, kind: str, actor, reason: str | None, state: TreeState, index: TreeIndex, membership
) -> BudgetEvent:
    """Audit a role grant or removal: who gave or took which role of whom, on which node."""
    path = index.path(membership.node_id)
    subject = membership.user.get_username()
    verb = "granted" if kind == EventKind.ROLE_GRANTED else "removed"
    event = _new_event(
        kind=kind,
        actor=actor,
        reason=reason or f"{membership.role} role of {subject} on {path} {verb}",
        state=state,
        bump_version=False,
    )
    share = index.shares[membership.node_id].entitled
    weight = index.nodes[membership.node_id].weight
    BudgetEventItem.objects.create(
        event=event,
        node_id=membership.node_id,
        node_path=path,
        old_weight=weight,
        new_weight=weight,
        old_entitled_share=share,
        new_entitled_share=share,
    )
    return event


def membership_add(
    *, actor, node_id: int, username: str, role: str, reason: str | None = None
) -> Membership:
    """Give a user a role on a node; audited as a `role_granted` event.

    Managers may do this below the nodes they manage. The permission check runs under
    the tree lock, in the same transaction as the write."""
    if role not in Role.values:
        raise ValidationFailed(f"role must be one of {', '.join(Role.values)}.", field="role")
    if reason is not None:
        reason = _clean_reason(reason)
    with transaction.atomic():
        state = _lock_tree()
        index = tree_index()
        if node_id not in index.nodes:
            raise ValidationFailed(f"There is no node with id {node_id}.", field="node")
        _require(
            actor is None or permissions.may_grant_role(actor, node_id, role, index),
            actor,
            index,
            node_id,
            field="node",
            action=f"grant the {role} role on",
        )
        if role == Role.MEMBER and index.nodes[node_id].kind != NodeKind.PROJECT:
            raise ValidationFailed(
                "Members belong to projects; give programs managers instead.", field="role"
            )
        user = get_user_model().objects.filter(username=username).first()
        if user is None:
            raise ValidationFailed(f"There is no user named '{username}'.", field="user")
        if Membership.objects.filter(user=user, node_id=node_id, role=role).exists():
            raise NothingToChange(
                f"'{username}' is already {role} of '{index.path(node_id)}'.", field="user"
            )
        with pghistory.context(actor=_actor_name(actor)):
            membership = Membership.objects.create(user=user, node_id=node_id, role=role)
        _role_event(
            kind=EventKind.ROLE_GRANTED,
            actor=actor,
            reason=reason,
            state=state,
            index=index,
            membership=membership,
        )
    return membership


def membership_remove(*, actor, membership_id: int, reason: str | None = None) -> None:
    """Remove a role; audited as a `role_removed` event, checked under the tree lock."""
    if reason is not None:
        reason = _clean_reason(reason)
    with transaction.atomic():
        state = _lock_tree()
        membership = (
            Membership.objects.select_for_update().select_related("user").filter(pk=membership_id)
        ).first()
        if membership is None:
            raise NotFound(f"There is no membership with id {membership_id}.")
        index = tree_index()
        _require(
            actor is None or permissions.may_remove_role(actor, membership, index),
            actor,
            index,
            membership.node_id,
            field="node",
            action=f"remove the {membership.role} role on",
        )
        _role_event(
            kind=EventKind.ROLE_REMOVED,
            actor=actor,
            reason=reason,
            state=state,
            index=index,
            membership=membership,
        )
        with pghistory.context(actor=_actor_name(actor)):
            membership.delete()


# ---------------------------------------------------------------- import / export


def parse_tree_document(data: Any) -> budget_tree.TreeDocument:
    """Validate the budget tree file format (`scheduler.core.engine.budget_tree`, the one
    parser the simulator uses too); the error lists every problem with its node path."""
    try:
        return budget_tree.parse_tree_document(data)
    except budget_tree.TreeFileError as exc:
        first = exc.issues[0]
        field = f"{first.node}.{first.field}" if first.field else first.node
        raise ValidationFailed(str(exc).replace("\n", "; "), field=field) from None


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
    user_model = get_user_model()
    with transaction.atomic():
        state = _lock_tree()
        index = tree_index()
        before = index.shares
        before_paths = {node_id: index.path(node_id) for node_id in index.nodes}
        users: dict[str, Any] = {}

        def user(username: str):
            if username not in users:
                found = user_model.objects.filter(username=username).first()
                if found is None:
                    found = user_model(username=username)
                    found.set_unusable_password()
                    found.save()
                users[username] = found
            return users[username]

        touched: list[tuple[BudgetNode, Decimal | None]] = []
        roles_added = [0]

        def upsert(
            item: budget_tree.TreeDocument, parent: BudgetNode | None, depth: int
        ) -> BudgetNode:
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
            touched.append((node, old_weight))
            for role, people in ((Role.MANAGER, item.managers), (Role.MEMBER, item.members)):
                for username in people:
                    _, created = Membership.objects.get_or_create(
                        user=user(username), node=node, role=role
                    )
                    roles_added[0] += created
            for child in item.children:
                upsert(child, node, depth + 1)
            return node

        with pghistory.context(actor=_actor_name(actor), reason=reason):
            root = upsert(document, None, 0)
        after_index = tree_index()
        changed = [
            (node, old_weight)
            for node, old_weight in touched
            if node.pk not in before
            or old_weight != node.weight
            or abs(before[node.pk].entitled - after_index.shares[node.pk].entitled) > 1e-12
            or before_paths.get(node.pk) != after_index.path(node.pk)
        ]
        if not changed and not roles_added[0]:
            return root  # the file matches the tree: nothing to record
        event = _new_event(kind=EventKind.IMPORTED, actor=actor, reason=reason, state=state)
        BudgetEventItem.objects.bulk_create(
            BudgetEventItem(
                event=event,
                node=node,
                node_path=after_index.path(node.pk),
                old_weight=old_weight,
                new_weight=node.weight,
                old_entitled_share=before[node.pk].entitled if node.pk in before else None,
                new_entitled_share=after_index.shares[node.pk].entitled,
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
