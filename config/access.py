"""The gates that API views and pages put in front of `budgets.permissions`' rules.

Reading the organisation (tree, history, memberships, jobs, queue, clusters, hosts, the
ledger, dashboards, planner) needs a role (`permissions.is_participant`); a signed-in
user without one gets 403 with a sentence that says how to get one. Writes are checked
by the services, under their locks, with the finer rules of the same module."""

from __future__ import annotations

from collections.abc import Callable
from functools import wraps

from django.contrib.auth import get_user_model
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_safe
from rest_framework.permissions import BasePermission

from budgets import permissions


class IsParticipant(BasePermission):
    """DRF's default permission: signed in, with a role (anonymous: 401, no role: 403)."""

    message = permissions.NO_ROLE_MESSAGE

    def has_permission(self, request, view) -> bool:
        return permissions.is_participant(request.user)


def participant_required(view: Callable[..., HttpResponse]) -> Callable[..., HttpResponse]:
    """Pages: sign in first (redirect), then a role (403 page saying how to get one)."""

    @wraps(view)
    def gated(request: HttpRequest, *args, **kwargs) -> HttpResponse:
        if not permissions.is_participant(request.user):
            return render(request, "403.html", {"message": permissions.NO_ROLE_MESSAGE}, status=403)
        return view(request, *args, **kwargs)

    return login_required(gated)


def participant_page(view: Callable[..., HttpResponse]) -> Callable[..., HttpResponse]:
    """A page that only reads: `participant_required`, and GET or HEAD only (any other
    method is a 405). Read pages once answered DELETE with 200, so the permission
    table's walk could not tell them from the pages that write."""
    return participant_required(require_safe(view))


@require_safe
def home(request: HttpRequest) -> HttpResponse:
    """`/`: the budget tree; a signed-in user without a role goes to their own page
    (`/me/`), the one page open to them, instead of a refusal."""
    if request.user.is_authenticated and not permissions.is_participant(request.user):
        return redirect("dashboards:me")
    return redirect("budgets:tree")


def lock_user_row(user) -> None:
    """Lock `user`'s row to the end of the transaction, so that two requests of one user
    that count what the user holds before adding to it (API tokens, what-if previews)
    run one after the other and cannot both pass a limit."""
    get_user_model().objects.select_for_update().filter(pk=user.pk).exists()
