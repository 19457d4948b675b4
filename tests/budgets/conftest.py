import pytest
from django.contrib.auth import get_user_model

from budgets.models import BudgetNode
from budgets.services import budget_tree_import
from tests.factories import EXAMPLE_TREE, SuperUserFactory


class Tree:
    """The example tree, with helpers to find nodes and users by name."""

    def node(self, name: str) -> BudgetNode:
        return BudgetNode.objects.get(name=name)

    def user(self, name: str):
        user = get_user_model().objects.get(username=name)
        if not user.has_usable_password():
            user.set_password("pw")
            user.save()
        return user


@pytest.fixture
def tree(db) -> Tree:
    budget_tree_import(data=EXAMPLE_TREE)
    return Tree()


@pytest.fixture
def admin_user(db):
    return SuperUserFactory(username="root")
