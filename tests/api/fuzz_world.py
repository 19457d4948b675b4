"""The fuzz world's memberships, shared by tests/api/test_fuzz.py and bench/fuzz.py.

schemathesis draws a membership id for `DELETE /api/v1/memberships/{id}/` from the ids
it has seen in responses (the membership list) and the schema's minimum (1, the
organisation head's role). In the example tree and the demo, half or more of the
memberships are outside the manager's reach (the head's, the manager's own, the other
programs'): the manager is refused those, rightly, and with 3 examples a run sometimes
drew only those, so the operation answered the manager only 403 and was reported as not
reached. `add_fuzz_members` gives the manager's projects members until almost every
membership the fuzzer sees is one the manager may remove; what is checked stays the same."""

from __future__ import annotations

# once the members are added, at most one membership in OUT_OF_REACH_ONE_IN is one the
# manager may not remove
OUT_OF_REACH_ONE_IN = 10
FUZZ_MEMBER_PREFIX = "fuzz-member-"


def add_fuzz_members(manager: str, one_in: int = OUT_OF_REACH_ONE_IN) -> int:
    """Give new users (`fuzz-member-<n>`, no password) a member role each, spread over
    the projects below the nodes `manager` manages, until at most one membership in
    `one_in` is out of `manager`'s reach; returns how many were added."""
    from django.contrib.auth import get_user_model

    from budgets import permissions
    from budgets.models import Membership, NodeKind, Role
    from budgets.selectors import tree_index
    from budgets.services import membership_add

    index = tree_index()
    actor = get_user_model().objects.get(username=manager)
    memberships = list(Membership.objects.all())
    removable = sum(1 for m in memberships if permissions.may_remove_role(actor, m, index))
    out_of_reach = len(memberships) - removable
    # out_of_reach * one_in <= len(memberships) + count
    count = max(0, out_of_reach * (one_in - 1) - removable)
    managed = Membership.objects.filter(user=actor, role=Role.MANAGER).order_by("node_id")
    projects = [
        node_id
        for m in managed
        for node_id in index.descendants(m.node_id)
        if index.nodes[node_id].kind == NodeKind.PROJECT
    ]
    if not projects:
        raise ValueError(f"{manager!r} manages no node with projects below it.")
    for n in range(count):
        user = get_user_model()(username=f"{FUZZ_MEMBER_PREFIX}{n}")
        user.set_unusable_password()
        user.save()
        membership_add(
            actor=None,
            node_id=projects[n % len(projects)],
            username=user.username,
            role=Role.MEMBER,
            reason="Fuzz world: memberships the manager may remove",
        )
    return count
