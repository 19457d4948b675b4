"""The fuzz world (tests/api/fuzz_world.py): the membership ids the fuzzer draws for
`DELETE /api/v1/memberships/{id}/` as the manager are almost all ones the manager may
remove, in the example tree (tests/api/test_fuzz.py) and in the demo (bench/fuzz.py), all
on the list's first page (where the fuzzer reads them)."""

import pytest

from budgets import permissions, selectors
from budgets.services import budget_tree_import
from config.pagination import DEFAULT_LIMIT
from scheduler.management.commands.seed_demo import DEMO_TREE
from tests.api.fuzz_world import FUZZ_MEMBER_PREFIX, OUT_OF_REACH_ONE_IN, add_fuzz_members
from tests.factories import EXAMPLE_TREE

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize(
    ("tree", "manager", "added"), [(EXAMPLE_TREE, "lead-a", 24), (DEMO_TREE, "manager", 84)]
)
def test_most_listed_memberships_are_the_managers_to_remove(
    tree, manager, added, django_user_model
):
    budget_tree_import(data=tree)
    actor = django_user_model.objects.get(username=manager)
    before = selectors.membership_list().count()

    assert add_fuzz_members(manager) == added

    index = selectors.tree_index()
    listed = list(selectors.membership_list()[:DEFAULT_LIMIT])  # the list's first page
    assert len(listed) == before + added
    removable = [m for m in listed if permissions.may_remove_role(actor, m, index)]
    assert (len(listed) - len(removable)) * OUT_OF_REACH_ONE_IN <= len(listed)
    # the manager's own role stays out of its reach: still refused
    assert any(m.user.username == manager for m in listed if m not in removable)
    # the added members have no password: nobody signs in as them
    users = django_user_model.objects.filter(username__startswith=FUZZ_MEMBER_PREFIX)
    assert users.count() == added and not any(u.has_usable_password() for u in users)
