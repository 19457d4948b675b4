"""Template context every page gets: what the header links to."""

from __future__ import annotations

from django.http import HttpRequest
from django.utils.functional import SimpleLazyObject

from budgets.permissions import is_operator


def navigation(request: HttpRequest) -> dict[str, object]:
    """`nav.operator`: staff and cluster operators see the "Now" link (read lazily: one
    query, only on pages that show the header to a signed-in user)."""
    user = getattr(request, "user", None)
    return {"nav": {"operator": SimpleLazyObject(lambda: is_operator(user))}}
