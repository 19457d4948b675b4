"""The weight form: the node a manager edits the children of, and the weights typed in
it. Read by the edit page (`budgets.views`) and by the what-if preview started from the
same form (`scheduler.views.whatif`), so both check the same permission and parse the
same fields."""

from __future__ import annotations

from decimal import Decimal

from django.http import Http404, HttpRequest

from budgets import permissions, selectors, services
from config.errors import ApplicationError, PermissionDenied


def weight_form_context(request: HttpRequest, node_id: int) -> dict:
    """The tree index, the node, its children and its path. Raises Http404 (no such
    node) or PermissionDenied (the user may not change the weights under it)."""
    index = selectors.tree_index()
    if node_id not in index.nodes:
        raise Http404("No such node")
    children = index.children.get(node_id, [])
    if not children:  # a project: not a permission of this user's, nobody may
        raise PermissionDenied(services.nothing_to_weigh(index, node_id))
    if not permissions.may_change_weights_under(request.user, node_id, index):
        raise PermissionDenied(
            f"You may not change the weights under '{index.path(node_id)}': it is outside the subtree you manage."
        )
    return {
        "index": index,
        "node": index.nodes[node_id],
        "children": children,
        "path": index.path(node_id),
    }


def posted_weights(
    request: HttpRequest, children
) -> tuple[dict[int, Decimal], dict[int, str], list[dict]]:
    """Weights typed in the form: parsed edits, per-node errors, and the raw changes."""
    edits: dict[int, Decimal] = {}
    errors: dict[int, str] = {}
    changes = []
    for child in children:
        raw = request.POST.get(f"weight-{child.pk}", "")
        try:
            weight = services.parse_weight(raw)
        except ApplicationError as exc:
            errors[child.pk] = exc.message
            continue
        if weight != child.weight:
            edits[child.pk] = weight
            changes.append({"node": child.pk, "weight": str(weight)})
    return edits, errors, changes
