"""The example tree of tests/factories.py, with helpers to find nodes and users by name
(the `tree` fixture of tests/conftest.py; a module-scoped world imports it itself)."""

from __future__ import annotations

from django.contrib.auth import get_user_model

from budgets.models import BudgetNode
from budgets.services import budget_tree_import
from tests.factories import EXAMPLE_TREE


class Tree:
    """The example tree, with helpers to find nodes and users by name."""

    def node(self, name: str):
        return BudgetNode.objects.get(name=name)

    def user(self, name: str):
        user = get_user_model().objects.get(username=name)
        if not user.has_usable_password():
            user.set_password("pw")
            user.save()
        return user


def example_tree() -> Tree:
    """Import the example tree through the budget services."""
    budget_tree_import(data=EXAMPLE_TREE)
    return Tree()
