"""Manager pages: the tree, the edit form with a live preview, and the history.

The clusters these pages show (the tree's entitled GPU-hours per cluster, the edit
form's what-if preview) come from the scheduler's template tags (`cluster_tags`) and
routes (`scheduler.views.whatif`): `budgets` imports nothing of the scheduler."""

from __future__ import annotations

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
from config.access import participant_required
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


@participant_required
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
                    "delta": new - old,
                }
            )
    return rows


# The API field a service's refusal names -> the edit form's label for it
FORM_LABELS = {"effective_at": "Effective at"}


def _in_page_words(exc: ApplicationError) -> str:
    """A service's refusal as the edit page says it: the form's label where the message
    names the API's field ("effective_at 2020-01-01... is in the past; ... (leave
    effective_at out)" read as API-speak beside a field labelled "Effective at")."""
    field = getattr(exc, "field", None)
    label = FORM_LABELS.get(field or "")
    if field is None or label is None:
        return exc.message
    return exc.message.replace(f"leave {field} out", f"leave {label} empty").replace(field, label)


@participant_required
@require_http_methods(["GET", "POST"])
def edit_page(request: HttpRequest, node_id: int) -> HttpResponse:
    try:
        context = weight_form_context(request, node_id)
    except PermissionDenied as exc:
        return render(request, "403.html", {"message": exc.message}, status=403)
    context.update(version=selectors.tree_version(), preview=[], errors={}, form_error=None)
    context["fields"] = [
        {"child": c, "value": request.POST.get(f"weight-{c.pk}", weight_text(c.weight))}
        for c in context["children"]
    ]
    if request.method == "POST":
        edits, errors, changes = posted_weights(request, context["children"])
        context.update(
            errors=errors, preview=_preview_rows(context["index"], edits), posted=request.POST
        )
        effective_at = None
        raw_effective = request.POST.get("effective_at", "").strip()
        if raw_effective:
            try:  # the form's local time is UTC
                effective_at = read_time(raw_effective)
            except ValueError as exc:  # month 13 too (was a 500)
                context["form_error"] = f"Effective time: {exc}"
        if not errors and context["form_error"] is None:
            if not changes:
                context["form_error"] = "No weight was changed."
            else:
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
                    context["form_error"] = _in_page_words(exc)
                    return render(request, "budgets/edit.html", context, status=exc.status_code)
                messages.success(request, f"Budget change for '{context['path']}' saved.")
                return redirect("budgets:history")
        return render(request, "budgets/edit.html", context, status=400)
    return render(request, "budgets/edit.html", context)


@participant_required
@require_POST
def preview_partial(request: HttpRequest, node_id: int) -> HttpResponse:
    """htmx: the entitled shares of every affected node if the typed weights were saved."""
    try:
        context = weight_form_context(request, node_id)
    except PermissionDenied as exc:
        return HttpResponse(exc.message, status=403)
    edits, errors, _ = posted_weights(request, context["children"])
    return render(
        request,
        "budgets/_preview.html",
        {
            "preview": _preview_rows(context["index"], edits),
            "errors": errors,
            "index": context["index"],
        },
    )


@participant_required
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
