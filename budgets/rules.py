"""Who may do what on the budget tree. One place, used by services, API, pages and admin.

- a manager of a node may change the weights of every node below it and manage
  memberships below it;
- a member of a project may submit work to it and see its details (so may the
  managers above it);
- everyone signed in may read the tree, shares and history;
- superusers may do everything.
"""

from __future__ import annotations

import rules

from budgets import selectors


@rules.predicate
def manages_above(user, node) -> bool:
    """The user manages a strict ancestor of `node`."""
    if node is None or not user.is_authenticated:
        return False
    return node.pk in selectors.nodes_governed_by(user=user)


@rules.predicate
def uses_project(user, node) -> bool:
    """The user is a member of the project, or manages it or a node above it."""
    if node is None or not user.is_authenticated:
        return False
    return node.pk in selectors.nodes_usable_by(user=user)


is_superuser = rules.is_superuser
is_signed_in = rules.is_authenticated

rules.add_perm("budgets.view_tree", is_signed_in)
rules.add_perm("budgets.change_weight", is_superuser | manages_above)
rules.add_perm("budgets.manage_memberships", is_superuser | manages_above)
rules.add_perm("budgets.change_structure", is_superuser | manages_above)
rules.add_perm("budgets.use_project", is_superuser | uses_project)
