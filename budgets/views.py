"""Manager pages: the tree, the edit form with a live preview, and the history.

The clusters these pages show (the tree's entitled GPU-hours per cluster, the edit
form's what-if preview) come from the scheduler's template tags (`cluster_tags`) and
routes (`scheduler.views.whatif`): `budgets` imports nothing of the scheduler."""

from __future__ import annotations

import datetime as dt
import re
from decimal import Decimal

from django.contrib import messages
from django.core.paginator import Paginator
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_http_methods, require_POST

from budgets import permissions, selectors, services
from budgets.api.serializers import BudgetChangeFilter
from budgets.forms import posted_weights, weight_form_context
from budgets.models import EventKind
from budgets.shares import weight_text
from config.access import participant_page, participant_required
from config.clock import read_time
from config.errors import ApplicationError, PermissionDenied, ValidationFailed
from config.query import QUERY_REFUSED, field_errors, read_page_query
from config.text import is_id_text


def _tree_rows(index: selectors.TreeIndex, user) -> list[dict]:
    rows = []
    for node, depth in index.walk():
        share = index.shares[node.pk]
        children = index.children.get(node.pk, [])
        rows.append(
            {
                "node": node,
                "depth": depth,
                "indent": depth * 1.5,
                "path": index.path(node.pk),
                "share": share.share,
                "entitled": share.entitled,
                "managers": index.managers.get(node.pk, []),
                "members": index.members.get(node.pk, []),
                "can_edit_children": bool(children)
                and permissions.may_change_weights_under(user, node.pk, index),
            }
        )
    return rows


@participant_page
def tree_page(request: HttpRequest) -> HttpResponse:
    index = selectors.tree_index(with_people=True)
    context = {
        "rows": _tree_rows(index, request.user),
        "version": selectors.tree_version(),
        "pending": selectors.scheduled_changes_pending(),
    }
    return render(request, "budgets/tree.html", context)


def _preview_rows(index: selectors.TreeIndex, edits: dict[int, Decimal]) -> list[dict]:
    after = index.preview(edits)
    rows = []
    for node, _depth in index.walk():
        old, new = index.shares[node.pk].entitled, after[node.pk].entitled
        if node.pk in edits or abs(old - new) > 1e-12:
            rows.append(
                {
                    "path": index.path(node.pk),
                    "old_weight": node.weight,
                    "new_weight": edits.get(node.pk, node.weight),
                    "old": old,
                    "new": new,
                }
            )
    return rows


# The edit form's own fields, by the API field a service's refusal names, with the labels
# the form shows; a weight the service refuses is `changes[i].weight` (or `.node`), the
# i-th change the page sent, which is one child's field `weight-<id>` (`_form_field`).
FORM_LABELS = {"reason": "Reason", "effective_at": "Effective at"}
CHANGE_FIELD = re.compile(r"changes\[(\d+)\]\.(?:node|weight)")


def _form_field(api_field: str | None, changes: list[dict]) -> str | None:
    """The form field a service's refusal of `api_field` is shown beside, or None where
    it is about the whole form (a stale version, a node, no field)."""
    if api_field in FORM_LABELS:
        return api_field
    match = CHANGE_FIELD.fullmatch(api_field or "")
    if match and int(match[1]) < len(changes):
        return f"weight-{changes[int(match[1])]['node']}"
    return None


def _field_labels(children) -> dict[str, str]:
    """Every field of the edit form with its label, in the form's order."""
    return {**{f"weight-{c.pk}": f"Weight of {c.name}" for c in children}, **FORM_LABELS}


def _edit_form(
    request: HttpRequest, context: dict, field_errors: dict[str, str], *, status: int = 200
) -> HttpResponse:
    """The edit page with each refused field's reason beside it, and above the form a
    summary naming each such field by its label."""
    labels = _field_labels(context["children"])
    context["fields"] = [
        {
            "child": c,
            "name": f"weight-{c.pk}",
            "value": request.POST.get(f"weight-{c.pk}", weight_text(c.weight)),
            "error": field_errors.get(f"weight-{c.pk}"),
        }
        for c in context["children"]
    ]
    context["field_errors"] = field_errors
    context["error_summary"] = [
        {"field": name, "label": label, "message": field_errors[name]}
        for name, label in labels.items()
        if name in field_errors
    ]
    return render(request, "budgets/edit.html", context, status=status)


def _effective_at(request: HttpRequest) -> tuple[dt.datetime | None, str | None]:
    """The form's "Effective at" (its label says so: a datetime-local without an offset
    is read as UTC, as `read_time` reads every input): (the time, None), (None, None)
    when empty (now), or (None, why it is refused; month 13 too, which was a 500)."""
    raw = request.POST.get("effective_at", "").strip()
    if not raw:
        return None, None
    try:
        return read_time(raw), None
    except ValueError as exc:
        return None, str(exc)


@participant_required
@require_http_methods(["GET", "POST"])
def edit_page(request: HttpRequest, node_id: int) -> HttpResponse:
    """The weights under a node. A refused submission is answered 400 (409 for a stale
    form, 403 outside the user's subtree) with the form as typed and each reason beside
    its field."""
    try:
        context = weight_form_context(request, node_id)
    except PermissionDenied as exc:
        return render(request, "403.html", {"message": exc.message}, status=403)
    # `errors` is the live preview's list (budgets/_preview.html); the page shows them
    # beside the fields instead
    context.update(version=selectors.tree_version(), preview=[], errors={}, form_error=None)
    if request.method != "POST":
        return _edit_form(request, context, {})
    edits, weight_errors, changes = posted_weights(request, context["children"])
    field_errors = {f"weight-{pk}": message for pk, message in weight_errors.items()}
    context.update(preview=_preview_rows(context["index"], edits), posted=request.POST)
    effective_at, effective_error = _effective_at(request)
    context["effective_at"] = effective_at
    if effective_error:
        field_errors["effective_at"] = effective_error
    if field_errors:  # the reason too, so that one round trip names every refused field
        try:
            services.reason_check(request.POST.get("reason", ""))
        except ValidationFailed as exc:
            field_errors["reason"] = exc.message
        return _edit_form(request, context, field_errors, status=400)
    if not changes:
        context["form_error"] = "No weight was changed."
        return _edit_form(request, context, field_errors, status=400)
    base = request.POST.get("base_version")
    try:
        services.budget_change_create(
            actor=request.user,
            reason=request.POST.get("reason", ""),
            changes=changes,
            effective_at=effective_at,
            base_version=int(base) if base and is_id_text(base) else None,
        )
    except ApplicationError as exc:
        field = _form_field(exc.field, changes)
        if field is None:
            context["form_error"] = exc.message
        else:
            field_errors[field] = exc.message
        return _edit_form(request, context, field_errors, status=exc.status_code)
    messages.success(request, f"Budget change for '{context['path']}' saved.")
    return redirect("budgets:history")


@participant_required
@require_POST
def preview_partial(request: HttpRequest, node_id: int) -> HttpResponse:
    """htmx: the entitled shares of every affected node if the typed weights were saved."""
    try:
        context = weight_form_context(request, node_id)
    except PermissionDenied as exc:
        return HttpResponse(exc.message, status=403)
    edits, errors, _ = posted_weights(request, context["children"])
    labels = _field_labels(context["children"])  # named as a refused save names them
    shown = {f"weight-{pk}": message for pk, message in errors.items()}
    effective_at, shown["effective_at"] = _effective_at(request)
    return render(
        request,
        "budgets/_preview.html",
        {
            "preview": _preview_rows(context["index"], edits),
            "errors": {field: f"{labels[field]}: {why}" for field, why in shown.items() if why},
            "effective_at": effective_at,
            "index": context["index"],
        },
    )


@participant_page
def history_page(request: HttpRequest) -> HttpResponse:
    """The audit trail, filtered as the API's history list is (`BudgetChangeFilter`): a
    malformed or unknown filter is a 400 that names it beside the form, with no rows."""
    params = request.GET
    filters, errors = read_page_query(BudgetChangeFilter, params)
    events = selectors.budget_event_list().none()
    if not errors:
        try:
            events = selectors.budget_event_list(
                node_id=filters.get("node"),
                actor=filters.get("actor"),
                since=filters.get("since"),
                kind=filters.get("kind"),
            )
        except ValidationFailed as exc:  # a node that does not exist (removed since)
            errors = field_errors(exc)
    page = Paginator(events, 25).get_page(params.get("page"))
    index = selectors.tree_index()
    pending = list(selectors.scheduled_changes_pending())
    context = {
        "page": page,
        "nodes": [(n.pk, index.path(n.pk)) for n, _ in index.walk()],
        "kinds": EventKind.choices,
        "params": params,
        "errors": errors,
        "pending": [
            {"change": change, "may_cancel": may_cancel}
            for change, may_cancel in zip(
                pending,
                permissions.may_cancel_scheduled_changes(
                    request.user, ([int(c["node"]) for c in p.changes] for p in pending), index
                ),
                strict=True,
            )
        ],
    }
    return render(request, "budgets/history.html", context, status=QUERY_REFUSED if errors else 200)


@participant_required
@require_POST
def cancel_scheduled(request: HttpRequest, event_id: int) -> HttpResponse:
    try:
        services.budget_change_cancel(
            actor=request.user, scheduled_event_id=event_id, reason=request.POST.get("reason", "")
        )
        messages.success(request, "Scheduled change cancelled.")
    except ApplicationError as exc:
        messages.error(request, exc.message)
        if exc.status_code == 403:
            return render(request, "403.html", {"message": exc.message}, status=403)
    return redirect("budgets:history")
