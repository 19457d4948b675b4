"""The demo organisation's sign-ins (`make run` with ALLOT_DEMO on): who they are and
their shared password, for the terminal and the sign-in page."""

from __future__ import annotations

from django.conf import settings

from budgets.models import BudgetNode

DEMO_ROOT = "allot-demo"
DEMO_PASSWORD = "allot-demo"
DEMO_LOGINS = (
    ("admin", "superuser"),
    ("ceo", "manages the organisation"),
    ("manager", "manages the program language-models"),
    ("researcher", "member of pretraining, post-training and sandbox"),
)


def demo_logins() -> list[tuple[str, str]]:
    """The demo's logins when this is a demo install (ALLOT_DEMO on and the demo
    organisation seeded); none otherwise, so no other install ever shows a password."""
    if not settings.ALLOT_DEMO:
        return []
    if not BudgetNode.objects.filter(parent=None, name=DEMO_ROOT).exists():
        return []
    return list(DEMO_LOGINS)
