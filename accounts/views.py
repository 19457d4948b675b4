"""The sign-in page: Django's, plus the demo logins on a demo install."""

from __future__ import annotations

from typing import Any

from django.contrib.auth import views as auth_views

from budgets.demo import DEMO_PASSWORD, demo_logins


class SignInView(auth_views.LoginView):
    # Django's form view takes PUT as a POST; the sign-in takes a form POST only
    http_method_names = ["get", "post", "head", "options"]

    def get_context_data(self, **kwargs: Any) -> dict[str, Any]:
        context = super().get_context_data(**kwargs)
        logins = demo_logins()
        context["demo_logins"] = logins
        context["demo_password"] = DEMO_PASSWORD if logins else ""
        return context
