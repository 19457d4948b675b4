"""Who may do what on a node: adding and removing memberships (roles)."""

from __future__ import annotations

import pghistory
from django.contrib.auth import get_user_model
from django.db import transaction

from budgets import permissions
from budgets.models import (
    BudgetEvent,
    BudgetEventItem,
    EventKind,
    Membership,
    NodeKind,
    Role,
    TreeState,
)
from budgets.selectors import TreeIndex, tree_index
from budgets.services._common import (
    _actor_name,
    _clean_reason,
    _lock_tree,
    _new_event,
    _require,
)
from config.errors import NotFound, NothingToChange, ValidationFailed


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
