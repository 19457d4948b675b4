"""Helpers to act as a role in tests: API tokens for users."""

from accounts.services import token_create
from budgets.models import BudgetNode, Membership, NodeKind
from tests.factories import UserFactory


def token_for(user) -> str:
    """A fresh API token (its secret) for `user`."""
    return token_create(user=user, name="test")[1]


def participant(username: str):
    """A user with a role (member of the project `org/readers`, made if missing): reading
    the organisation needs one (`budgets.permissions.is_participant`)."""
    user = UserFactory(username=username)
    root, _ = BudgetNode.objects.get_or_create(
        parent=None, name="org", defaults={"slug": "org", "kind": NodeKind.ORGANISATION}
    )
    project, _ = BudgetNode.objects.get_or_create(
        parent=root, name="readers", defaults={"slug": "readers", "kind": NodeKind.PROJECT}
    )
    Membership.objects.get_or_create(user=user, node=project, role="member")
    return user
