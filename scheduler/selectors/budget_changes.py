"""Explained changes: the audited budget change that moved a waiting job's standing.

A queue reason quotes the project's standing ("project a2 is at 12% of its entitled
share over 7 days (fair-share rank 2 of 3)"). When a manager changed a weight inside the
usage window the standing is read over, the reason says so, from the budget history:

    "...; a1's weight changed 70 -> 30 at 2026-12-05 10:04 UTC by lead-a (entitled
    share of org/prog-a/a2 15.00% -> 25.00%)"

Only applied changes that moved the project's own entitled share count (an item of
the event names the project: its weight, a sibling's or an ancestor's changed); the
latest one is told, with how many earlier ones the window holds. The ETA's "moved ...
because" tells a budget change with the same notes (`scheduler/services/eta.py`).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable
from typing import NamedTuple

from django.db import connection
from django.utils import timezone

from allot_common.figures import EMPTY
from budgets.models import BudgetEvent, BudgetEventItem, EventKind
from budgets.shares import share_text, weight_text
from config.plainsql import id_array
from scheduler.core.engine.explain import FOR_GPUS, STANDING

__all__ = ["cluster_change_notes", "standing_change_notes", "with_change_note"]


def cluster_change_notes(
    *,
    lookback_s: int,
    as_of: dt.datetime | None,
    project_ids: Iterable[int],
    any_change: bool = True,
) -> dict[int, str]:
    """The notes for a cluster's queue computed at `as_of`: changes from the start of
    its usage window (`as_of` - look-back) until now (a change after the cycle moves the
    standing at the next one, and is told already). `any_change=False`: the caller knows
    that no applied change falls in that window (`StoredQueue.budget_changed`, read
    with the queue), so there is none to tell and no statement runs."""
    if not any_change:
        return {}
    now = timezone.now()
    start = (as_of or now) - dt.timedelta(seconds=lookback_s)
    return standing_change_notes(project_ids=project_ids, since=start, until=now)


def standing_change_notes(
    *, project_ids: Iterable[int], since: dt.datetime, until: dt.datetime
) -> dict[int, str]:
    """Project node id -> the note of the latest applied budget change in [since,
    until] that moved its entitled share (projects without one are left out)."""
    wanted = sorted(set(project_ids))
    if not wanted:
        return {}
    tables = {"item": BudgetEventItem._meta.db_table, "event": BudgetEvent._meta.db_table}
    with connection.cursor() as cursor:  # one plain statement: most requests find none
        params = [id_array(wanted), EventKind.APPLIED, since, until]
        cursor.execute(_ITEMS_SQL.format(**tables), params)
        rows = cursor.fetchall()
    latest: dict[int, _Item] = {}
    earlier: dict[int, int] = {}
    for row in rows:
        item = _Item(*row)
        if item.node_id in latest:
            earlier[item.node_id] = earlier.get(item.node_id, 0) + 1
        else:
            latest[item.node_id] = item
    if not latest:
        return {}
    events = {item.event_id for item in latest.values()}
    changed: dict[int, list[BudgetEventItem]] = {}
    for item in BudgetEventItem.objects.filter(event_id__in=events).order_by("node_path"):
        if item.old_weight is not None and item.old_weight != item.new_weight:
            changed.setdefault(item.event_id, []).append(item)
    notes = {}
    for node_id, item in latest.items():
        weights = ", ".join(
            f"{_name(c.node_path)}'s weight changed {_weight(c.old_weight)} -> "
            f"{_weight(c.new_weight)}"
            for c in changed.get(item.event_id, [])
        )
        when = item.effective_at.astimezone(dt.UTC).strftime("%Y-%m-%d %H:%M UTC")
        more = earlier.get(node_id, 0)
        notes[node_id] = (
            f"{weights or 'the budget tree changed'} at {when} by "
            f"{item.actor_name or 'system'} (entitled share of {item.node_path} "
            f"{share_text(item.old_entitled_share)} -> {share_text(item.new_entitled_share)})"
            + (f"; {more} earlier change{'s' if more != 1 else ''} in the window" if more else "")
        )
    return notes


class _Item(NamedTuple):
    """What a note tells of an item of an applied change, and of its event."""

    node_id: int
    event_id: int
    node_path: str
    old_entitled_share: float | None
    new_entitled_share: float | None
    effective_at: dt.datetime
    actor_name: str


_ITEMS_SQL = """
    SELECT i.node_id, i.event_id, i.node_path, i.old_entitled_share, i.new_entitled_share,
           e.effective_at, e.actor_name
    FROM {item} i JOIN {event} e ON e.id = i.event_id
    WHERE i.node_id = ANY(%s::bigint[]) AND e.kind = %s AND e.effective_at >= %s AND e.effective_at <= %s
    ORDER BY e.effective_at DESC, i.event_id DESC
"""


def with_change_note(reason: str, note: str | None) -> str:
    """The reason with the note appended, when the reason quotes the project's standing:
    its usage against its entitled share, its rank as the first-ranked project
    (FOR_GPUS: a change may have put it there), or that it has no entitlement; other
    reasons are returned unchanged."""
    quotes = STANDING in reason or reason.startswith(FOR_GPUS) or "no entitlement" in reason
    if not note or not quotes:
        return reason
    return f"{reason}; {note}"


def _name(path: str) -> str:
    return path.rsplit("/", 1)[-1]


def _weight(value) -> str:
    return EMPTY if value is None else weight_text(value)
