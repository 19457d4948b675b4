"""What every budget write shares: validating input, locking the tree, recording the
audited event and the permission checks."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from django.db import transaction
from django.utils import timezone

from budgets import permissions, rules
from budgets.models import (
    BudgetEvent,
    TreeState,
)
from budgets.selectors import TreeIndex
from budgets.signals import tree_changed
from config.errors import Conflict, PermissionDenied, ValidationFailed
from config.text import clean_reason, refuse_control_characters

MAX_REASON_LENGTH = 2000
MAX_WEIGHT = rules.MAX_WEIGHT
NAME_MAX_LENGTH = rules.NAME_MAX_LENGTH


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


def reason_check(reason: Any) -> str:
    """A budget write's reason as the services will take it (the one rule,
    `_clean_reason`), for a form that names every refused field at once; raises
    ValidationFailed naming `reason`."""
    return _clean_reason(reason)


def parse_weight(value: Any, *, field: str = "weight") -> Decimal:
    """A weight, by the budget tree's one rule (`rules.parse_weight`): a finite
    decimal >= 0, at most `MAX_WEIGHT`, with at most 4 decimal places."""
    try:
        return rules.parse_weight(value)
    except rules.WeightProblem as exc:
        raise ValidationFailed(str(exc), field=field) from None


def _clean_name(name: Any, *, field: str = "name") -> str:
    """A node name by the budget tree's one rule (`rules.clean_name`)."""
    if isinstance(name, str):
        refuse_control_characters(name.strip(), field=field, multiline=False)
    try:
        return rules.clean_name(name)
    except rules.NameProblem as exc:
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
