"""Weight changes: checked, scheduled, applied when due, cancelled or lapsed."""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping, Sequence
from decimal import Decimal
from typing import Any

import pghistory
from django.db import transaction
from django.utils import timezone

from budgets import permissions
from budgets.models import (
    BudgetEvent,
    BudgetEventItem,
    EventKind,
    ScheduledChange,
    ScheduledStatus,
    TreeState,
)
from budgets.selectors import TreeIndex, tree_index
from budgets.services._common import (
    WeightEdit,
    _actor_name,
    _check_base_version,
    _clean_reason,
    _lock_tree,
    _new_event,
    _require,
    _require_governs,
    parse_weight,
)
from budgets.shares import NodeShare
from config.errors import Conflict, NotFound, NothingToChange, ValidationFailed


def nothing_to_weigh(index: TreeIndex, node_id: int) -> str:
    """Why a node without children has no weights to change under it (the API's previews
    and budget changes, the edit page and its previews say it in these words)."""
    return f"'{index.path(node_id)}' is a project: it has no children to weigh."


def weight_edits_check(
    *,
    actor,
    node_id: int,
    changes: Sequence[Mapping[str, Any]],
    field: str = "weights",
    allow_none: bool = False,
) -> tuple[TreeIndex, dict[int, Decimal]]:
    """Proposed weights of `node_id`'s children, validated by the rules of
    `budget_change_create` (nothing is written): the actor must govern every child (as
    on the edit page), each change names a child of the node and a valid weight; no
    change at all only with `allow_none` (a what-if of something else than the weights).

    Raises PermissionDenied, or ValidationFailed naming `node` or `field`."""
    index = tree_index()
    if node_id not in index.nodes:
        raise ValidationFailed(f"There is no node with id {node_id}.", field="node")
    children = index.children.get(node_id, [])
    if not children:
        raise ValidationFailed(nothing_to_weigh(index, node_id), field="node")
    _require(
        actor is None or permissions.may_change_weights_under(actor, node_id, index),
        actor,
        index,
        node_id,
        field="node",
        action="change the weights under",
    )
    none = allow_none and isinstance(changes, Sequence) and not isinstance(changes, str | bytes)
    edits = [] if none and not changes else _parse_edits(changes, index, field=field)
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


# how far before now an effective time may lie and still mean "now" (a client's clock)
PAST_TOLERANCE = dt.timedelta(minutes=1)
# how far ahead a change may be scheduled: further is a typo (2062 for 2026), not a plan
MAX_SCHEDULE_AHEAD = dt.timedelta(days=730)


def _check_effective_at(effective_at: dt.datetime, now: dt.datetime) -> None:
    """A change's effective time: aware, not backdated, at most MAX_SCHEDULE_AHEAD ahead
    (ValidationFailed naming `effective_at` otherwise). The messages do not name the
    field: the API's error names it in `field`, and the edit page shows the message
    beside the field its label names."""
    if timezone.is_naive(effective_at):
        raise ValidationFailed(
            "The time needs a time zone (e.g. 2026-12-01T09:00:00Z).", field="effective_at"
        )
    if effective_at < now - PAST_TOLERANCE:
        # the ledger rebuilds past hours from the effective times (`shares_as_of`): a
        # backdated record would rewrite them, and say what never was in force
        raise ValidationFailed(
            f"{effective_at.isoformat()} is in the past: give no time for a change that "
            "takes effect now, or a future time.",
            field="effective_at",
        )
    if effective_at > now + MAX_SCHEDULE_AHEAD:
        raise ValidationFailed(
            f"{effective_at.isoformat()} is more than "
            f"{MAX_SCHEDULE_AHEAD.days} days ahead; a change may be scheduled up to "
            f"{(now + MAX_SCHEDULE_AHEAD):%Y-%m-%d}.",
            field="effective_at",
        )


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
    if effective_at is not None:
        _check_effective_at(effective_at, now)
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
                effective_at=now,
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
