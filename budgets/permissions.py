"""Who may see or do what: the one place where Allot's roles become answers.

Every service, selector, API view and page asks here; none writes a rule of its own.
docs/api.md's "Who may do what" table is these rules in words, and
`tests/security/test_permissions.py` walks every API operation, page and admin
view for every role against that table.

The roles:

- **superuser**: may do everything.
- **staff** (`is_staff`): operators of the service. They read everything (job specs
  included), cancel any job, drain and resume any host, change a cluster's policy and add
  clusters, and use the admin (where the same services and rules apply). Staff have no
  say over budgets unless they also hold a manager role.
- **cluster operator** (`Cluster.operators`): drains and resumes that cluster's hosts,
  and reads every governed sbatch job Allot refused on it (`readable_sbatch_refusals`;
  others read their own and their managed projects').
- **manager of a node**: governs the nodes strictly below it (changes their weights,
  renames or moves them, grants and removes any role on them) and manages the members
  of the node itself: a project lead adds and removes the members of their project, a
  program lead of their program's projects. Only a manager above a node may make or
  unmake its managers (a lead cannot appoint a co-lead or remove the one above).
  "Manager of this node or one above it" (`manages`) is what lets a manager submit to,
  cancel in and read the job specs of every project below them.
- **member of a project**: submits work to it and cancels their own jobs.
- **participant**: anyone with one of the roles above (or a membership anywhere).
  Participants read the organisation: the tree, shares, history, memberships, jobs
  (without others' specs), queue, clusters, hosts, the ledger and the dashboards.
  A signed-in user with **no role** reads nothing of the organisation (least
  privilege): only their own API tokens, their own page (`/me/`) and the public
  schema.

Scheduled budget changes are re-checked when they are applied and when they are
cancelled: a change whose author no longer governs every node it changes is not applied
(it is cancelled by the system, which the history records); cancelling needs the right to
change those weights now, whoever wrote the change.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

from budgets.models import BudgetNode, Membership, Role
from budgets.selectors import TreeIndex, tree_index
from config.plainsql import fetch_all

# ---------------------------------------------------------------- who someone is


def is_signed_in(actor: Any) -> bool:
    return bool(actor is not None and actor.is_authenticated and actor.is_active)


def is_superuser(actor: Any) -> bool:
    return is_signed_in(actor) and bool(actor.is_superuser)


def is_staff(actor: Any) -> bool:
    """Staff or superuser: the service's operators."""
    return is_signed_in(actor) and bool(actor.is_superuser or actor.is_staff)


def is_operator(actor: Any) -> bool:
    """Staff, superusers, or an operator of some cluster: the header links them to the
    Now page (every participant may open it)."""
    if not is_signed_in(actor):
        return False
    return bool(actor.is_staff or actor.is_superuser or actor.operated_clusters.exists())


def is_participant(actor: Any) -> bool:
    """Staff, superusers, cluster operators and anyone with a role on a node: those who
    read the organisation's tree, jobs, queue, clusters and figures."""
    if not is_signed_in(actor):
        return False
    if actor.is_superuser or actor.is_staff:
        return True
    return bool(_roles(actor)) or actor.operated_clusters.exists()


# ---------------------------------------------------------------- one read per request

# (node id, role) of each user's memberships, read once per request while `roles_read_once`
# is active (a read-only request: see config.middleware.RolesReadOnceMiddleware); outside
# it every question reads the database, so a write and a later check never disagree.
_ROLES_MEMO: ContextVar[dict[int, list[tuple[int, str]]] | None] = ContextVar(
    "allot_roles_memo", default=None
)


@contextmanager
def roles_read_once() -> Iterator[None]:
    """Within the block, each user's memberships are read at most once."""
    token = _ROLES_MEMO.set({})
    try:
        yield
    finally:
        _ROLES_MEMO.reset(token)


_ROLES_SQL = 'SELECT "{node}", "{role}" FROM "{table}" WHERE "{user}" = %s'


def _roles(actor: Any) -> list[tuple[int, str]]:
    memo = _ROLES_MEMO.get()
    if memo is not None and actor.pk in memo:
        return memo[actor.pk]
    meta = Membership._meta  # a plain statement: every request asks (config.plainsql)
    sql = _ROLES_SQL.format(
        node=meta.get_field("node").column,
        role=meta.get_field("role").column,
        table=meta.db_table,
        user=meta.get_field("user").column,
    )
    roles = [(node_id, role) for node_id, role in fetch_all(sql, [actor.pk])]
    if memo is not None:
        memo[actor.pk] = roles
    return roles


def roles_reading_once() -> bool:
    """Whether this request reads each user's roles once (`roles_read_once` is active)."""
    return _ROLES_MEMO.get() is not None


def roles_select(user_id_sql: str) -> str:
    """Two select-list items: the node ids and the roles (`remember_roles`' pairs, in
    the same order) of the user whose id is the SQL expression `user_id_sql`, for a
    statement that reads the user anyway (the API token's: accounts.authentication)."""
    meta = Membership._meta
    parts = {
        "table": meta.db_table,
        "user": meta.get_field("user").column,
        "pk": meta.pk.column,
        "where": user_id_sql,
    }
    pick = 'ARRAY(SELECT m."{col}" FROM "{table}" m WHERE m."{user}" = {where} ORDER BY m."{pk}")'
    return ", ".join(
        pick.format(col=meta.get_field(name).column, **parts) for name in ("node", "role")
    )


def remember_roles(user_id: int, node_ids: list[int], roles: list[str]) -> None:
    """Within `roles_read_once`, take the pairs of `roles_select` as the memberships of
    `user_id` (read by this request already); outside it, nothing."""
    memo = _ROLES_MEMO.get()
    if memo is not None:
        memo[user_id] = list(zip(node_ids, roles, strict=True))


NO_ROLE_MESSAGE = (
    "You have no role in the organisation yet: ask a manager to make you a member of a "
    "project. Until then you may manage your API tokens and see your own page."
)


# ---------------------------------------------------------------- roles on the tree


def managed_nodes(actor: Any) -> set[int]:
    """Ids of the nodes where `actor` holds the manager role."""
    if not is_signed_in(actor):
        return set()
    return {node_id for node_id, role in _roles(actor) if role == Role.MANAGER}


def member_projects(actor: Any) -> set[int]:
    """Ids of the projects where `actor` holds the member role."""
    if not is_signed_in(actor):
        return set()
    return {node_id for node_id, role in _roles(actor) if role == Role.MEMBER}


def governed_nodes(actor: Any, index: TreeIndex | None = None) -> set[int] | None:
    """Ids of the nodes strictly below a node `actor` manages (those whose weights,
    names, places and roles they decide); None means every node (superusers)."""
    if is_superuser(actor):
        return None
    managed = managed_nodes(actor)
    if not managed:
        return set()
    index = index or tree_index()
    governed: set[int] = set()
    for node_id in managed:
        if node_id in index.nodes:
            governed.update(index.descendants(node_id))
    return governed


def managed_subtrees(actor: Any, index: TreeIndex | None = None) -> set[int] | None:
    """Ids of the nodes `actor` manages and every node below them (the nodes of which
    they are "manager of this node or one above it"); None means every node."""
    if is_superuser(actor):
        return None
    return _subtrees(managed_nodes(actor), index)


def _subtrees(node_ids: set[int], index: TreeIndex | None) -> set[int]:
    if not node_ids:
        return set()
    index = index or tree_index()
    ids: set[int] = set()
    for node_id in node_ids:
        if node_id in index.nodes:
            ids.add(node_id)
            ids.update(index.descendants(node_id))
    return ids


def governs(actor: Any, node_id: int, index: TreeIndex | None = None) -> bool:
    """A manager of a node strictly above `node_id` (or a superuser)."""
    governed = governed_nodes(actor, index)
    return governed is None or node_id in governed


def governs_all(actor: Any, node_ids: Iterable[int], index: TreeIndex | None = None) -> bool:
    governed = governed_nodes(actor, index)
    return governed is None or all(n in governed for n in node_ids)


def manages(actor: Any, node_id: int) -> bool:
    """A manager of `node_id` or of a node above it (or a superuser), in one query."""
    if is_superuser(actor):
        return True
    if not is_signed_in(actor):
        return False
    chain = BudgetNode.objects.ancestors(BudgetNode(pk=node_id), include_self=True)
    return Membership.objects.filter(
        user_id=actor.pk, role=Role.MANAGER, node_id__in=chain.values("pk")
    ).exists()


# ---------------------------------------------------------------- the budget tree


def may_change_weight(actor: Any, node_id: int, index: TreeIndex | None = None) -> bool:
    """The manager of a node above it decides a node's weight."""
    return governs(actor, node_id, index)


def may_change_weights_under(actor: Any, node_id: int, index: TreeIndex) -> bool:
    """The edit-weights page, its preview and what-if previews of `node_id`: whoever
    governs every child of the node (a node without children has nothing to weigh)."""
    children = index.children.get(node_id, [])
    return bool(children) and governs_all(actor, (c.pk for c in children), index)


def may_add_node_under(actor: Any, parent_id: int) -> bool:
    """A manager of the parent or of a node above it."""
    return manages(actor, parent_id)


def may_change_node(actor: Any, node_id: int, index: TreeIndex | None = None) -> bool:
    """Renaming or moving a node: a manager above it."""
    return governs(actor, node_id, index)


def may_grant_role(actor: Any, node_id: int, role: str, index: TreeIndex | None = None) -> bool:
    """Members: a manager of the node or above (a project lead manages their project's
    members). Managers: only a manager above the node."""
    if role == Role.MEMBER:
        return manages(actor, node_id)
    return governs(actor, node_id, index)


def may_remove_role(actor: Any, membership: Membership, index: TreeIndex | None = None) -> bool:
    """The same rule as granting that role on that node."""
    return may_grant_role(actor, membership.node_id, membership.role, index)


def may_cancel_scheduled_change(
    actor: Any, node_ids: Iterable[int], index: TreeIndex | None = None
) -> bool:
    """Whoever may change every weight the scheduled change sets, now (its author too
    only while they still may)."""
    return governs_all(actor, node_ids, index)


def may_cancel_scheduled_changes(
    actor: Any, changes: Iterable[Iterable[int]], index: TreeIndex | None = None
) -> list[bool]:
    """may_cancel_scheduled_change for each change (the node ids it sets), in one query."""
    governed = governed_nodes(actor, index)
    return [governed is None or all(n in governed for n in node_ids) for node_ids in changes]


def may_apply_scheduled_change(
    author: Any, node_ids: Iterable[int], index: TreeIndex | None = None
) -> bool:
    """A scheduled change is applied only while its author may still make it (a change
    the system scheduled, without an author, always is)."""
    if author is None:
        return True
    return governs_all(author, node_ids, index)


def may_import_tree(actor: Any) -> bool:
    return actor is None or is_superuser(actor)


def may_read_preview(actor: Any, preview: Any, index: TreeIndex | None = None) -> bool:
    """Its requester and whoever may change the weights it previews."""
    if not is_signed_in(actor):
        return False
    if actor.is_superuser or preview.requester_id == actor.pk:
        return True
    return may_change_weights_under(actor, preview.node_id, index or tree_index())


# ---------------------------------------------------------------- jobs


def may_submit(actor: Any, project_id: int) -> bool:
    """Members of the project, managers of it or of a node above it, superusers."""
    if is_superuser(actor):
        return True
    if not is_signed_in(actor):
        return False
    if project_id in member_projects(actor):
        return True
    return manages(actor, project_id)


def may_cancel_job(actor: Any, job: Any) -> bool:
    """Its submitter, managers of its project or of a node above it, and staff."""
    if not is_signed_in(actor):
        return False
    return is_staff(actor) or job.submitter_id == actor.pk or manages(actor, job.project_id)


def spec_readable_projects(actor: Any, index: TreeIndex | None = None) -> set[int] | None:
    """Projects whose jobs' specs `actor` reads as a manager (of the project or a node
    above it); None means every project (staff). Submitters read their own jobs' specs."""
    if is_staff(actor):
        return None
    return managed_subtrees(actor, index)


def may_read_spec(actor: Any, job: Any, readable: set[int] | None) -> bool:
    """`readable` is `spec_readable_projects(actor)`, computed once for many jobs."""
    return readable is None or job.submitter_id == actor.pk or job.project_id in readable


def my_projects(actor: Any, index: TreeIndex | None = None) -> set[int]:
    """Nodes `actor` is a member of, manages, or is below a node they manage (the "mine"
    of `/me/` and the delivery dashboard)."""
    return _subtrees(managed_nodes(actor), index) | member_projects(actor)


# ---------------------------------------------------------------- clusters and hosts


def may_operate_hosts(actor: Any, cluster: Any) -> bool:
    """Drain and resume a cluster's hosts: staff and the cluster's operators."""
    if not is_signed_in(actor):
        return False
    return is_staff(actor) or cluster.operators.filter(pk=actor.pk).exists()


def readable_sbatch_refusals(
    actor: Any, cluster: Any, index: TreeIndex | None = None
) -> tuple[set[str], set[str]] | None:
    """Which governed sbatch jobs Allot refused to adopt (docs/slurm.md) `actor` reads:
    None means every one (staff and the cluster's operators, who act on them in Slurm);
    else (Slurm user names, Slurm accounts): their own, sbatch'd under their user name,
    and those sbatch'd on the account (the slug) of a project they manage or that lies
    below a node they manage. A refusal names a Slurm user and account and says why, so
    no other participant reads it."""
    if may_operate_hosts(actor, cluster):
        return None
    if not is_signed_in(actor):
        return set(), set()
    managed = _subtrees(managed_nodes(actor), index)  # no read of the tree for a member
    if not managed:
        return {actor.get_username()}, set()
    index = index or tree_index()
    accounts = {a for n in managed if (a := index.slurm_account(n)) is not None}
    return {actor.get_username()}, accounts


def may_change_cluster_policy(actor: Any) -> bool:
    """Staff; `actor` None is the system (a management command)."""
    return actor is None or is_staff(actor)


def may_add_cluster(actor: Any) -> bool:
    """Staff; `actor` None is the system (a management command)."""
    return actor is None or is_staff(actor)
