"""Writes to the budget tree. Every write a person causes takes `actor=` and is
audited in the same transaction; permission checks happen here, not in views.

- `changes`: weight changes (checked, scheduled, applied when due, cancelled, lapsed).
- `nodes`: the tree's structure (creating and updating nodes).
- `memberships`: roles on nodes.
- `tree_io`: the tree as a document (import, export).
- `_common`: what they share (input checks, the tree lock, the audited event).

The public functions are re-exported here: callers import `budgets.services`.
"""

from budgets.services._common import (
    MAX_REASON_LENGTH,
    MAX_WEIGHT,
    NAME_MAX_LENGTH,
    WeightEdit,
    parse_weight,
    reason_check,
)
from budgets.services.changes import (
    MAX_SCHEDULE_AHEAD,
    budget_apply_due_changes,
    budget_change_cancel,
    budget_change_create,
    nothing_to_weigh,
    weight_edits_check,
)
from budgets.services.memberships import membership_add, membership_remove
from budgets.services.nodes import node_create, node_update
from budgets.services.tree_io import budget_tree_export, budget_tree_import, parse_tree_document
from config.errors import Conflict, NotFound, NothingToChange, PermissionDenied, ValidationFailed

__all__ = [
    "MAX_REASON_LENGTH",
    "MAX_SCHEDULE_AHEAD",
    "MAX_WEIGHT",
    "NAME_MAX_LENGTH",
    "Conflict",
    "NotFound",
    "NothingToChange",
    "PermissionDenied",
    "ValidationFailed",
    "WeightEdit",
    "budget_apply_due_changes",
    "budget_change_cancel",
    "budget_change_create",
    "budget_tree_export",
    "budget_tree_import",
    "membership_add",
    "membership_remove",
    "node_create",
    "node_update",
    "nothing_to_weigh",
    "parse_tree_document",
    "parse_weight",
    "reason_check",
    "weight_edits_check",
]
