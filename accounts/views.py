"""The sign-in page (Django's, plus the demo logins on a demo install) and the signed-in
user's own API tokens page (list, revoke one, revoke all)."""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.contrib.auth import views as auth_views
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_POST, require_safe

from accounts import selectors, services
from budgets.demo import DEMO_PASSWORD, demo_logins
from config.errors import NotFound


class SignInView(auth_views.LoginView):
    # Django's form view takes PUT as a POST; the sign-in takes a form POST only
    http_method_names = ["get", "post", "head", "options"]

    def get_context_data(self, **kwargs: Any) -> dict[str, Any]:
        context = super().get_context_data(**kwargs)
        logins = demo_logins()
        context["demo_logins"] = logins
        context["demo_password"] = DEMO_PASSWORD if logins else ""
        return context


@login_required
@require_safe
def tokens(request: HttpRequest) -> HttpResponse:
    """`/me/tokens/`: your own live API tokens (never their secrets), newest first, each
    with a revoke button. Any signed-in user, with a role or without one."""
    context = {
        "tokens": selectors.tokens_of(user=request.user),
        "limit": services.MAX_LIVE_TOKENS_PER_USER,
    }
    return render(request, "accounts/tokens.html", context)


@login_required
@require_POST
def token_revoke(request: HttpRequest, token_key: str) -> HttpResponse:
    """Revoke one of your tokens; another user's key is a 404, as an unknown one."""
    try:
        services.token_revoke(user=request.user, token_key=token_key)
    except NotFound as exc:
        raise Http404(exc.message) from None
    messages.success(request, f"Token {token_key}… revoked: it no longer signs anything in.")
    return redirect("accounts:tokens")


@login_required
@require_POST
def tokens_revoke_all(request: HttpRequest) -> HttpResponse:
    """Revoke every token of yours (this page's session is not a token and stays)."""
    count = services.token_revoke_all(user=request.user)
    messages.success(request, f"{count} token{'s' if count != 1 else ''} revoked.")
    return redirect("accounts:tokens")
