"""Who may do what: one row per API operation, page and admin view, the status each of
nine roles gets, and whether the request changes the tables it touches.

docs/api.md's "The table" (under "Who may do what") is these rows in words (budgets/permissions.py
is the rules in code). tests/security/test_permissions.py walks every row for every
role, checks the status, and checks by each table's row count and digest that a refusal,
an invalid request and a read changed no table, and that a success of a write changed
exactly the tables its row names (`tables`), no other. Every API operation of
the schema and every page of the URL configuration must have a row, so a new endpoint
lands with its rows. Placeholders such as `{a1}` are filled from the test's context.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

# The example tree (tests/factories.py): ceo manages org; lead-a manages prog-a (a1, a2);
# pi-a1 manages the project a1; ann is a member of a1, bob of a2; lead-b manages prog-b.
USERS = {
    "anonymous": None,
    "no_role": "newcomer",
    "member": "ann",
    "project_lead": "pi-a1",
    "program_manager": "lead-a",
    "other_manager": "lead-b",
    "head": "ceo",
    "staff": "ops",
    "superuser": "root",
}
ROLES = list(USERS)
SIGNED_IN = [r for r in ROLES if r != "anonymous"]
PARTICIPANTS = [r for r in SIGNED_IN if r != "no_role"]
GOVERN_A = {"program_manager", "head", "superuser"}  # govern a1, a2 (below prog-a)
MANAGE_A1 = GOVERN_A | {"project_lead"}  # manage a1 or a node above it


@dataclass(frozen=True)
class Row:
    method: str
    path: str
    expected: dict[str, int]  # role -> status
    body: dict = field(default_factory=dict)
    # which roles' requests change the tables (None: every role that gets a 2xx/3xx on a
    # write; reads never change anything)
    changes: frozenset[str] | None = None
    # the tables (by name) those requests change, exactly; every other table, and every
    # table on a read, a refusal or an invalid request, is left as it was
    tables: frozenset[str] = frozenset()

    @property
    def key(self) -> str:
        return f"{self.method.upper()} {self.path}"

    def writes(self, role: str) -> bool:
        if self.changes is not None:
            return role in self.changes
        return self.method != "get" and self.expected[role] < 400


def readers(status: int = 200, anonymous: int = 401) -> dict[str, int]:
    """Participants read; a user without a role is refused (403)."""
    return {r: anonymous if r == "anonymous" else 403 if r == "no_role" else status for r in ROLES}


def signed_in(status: int = 200, anonymous: int = 401) -> dict[str, int]:
    return {r: anonymous if r == "anonymous" else status for r in ROLES}


def allowed(ok: int, roles: set[str], anonymous: int = 401, refused: int = 403) -> dict[str, int]:
    return {r: anonymous if r == "anonymous" else ok if r in roles else refused for r in ROLES}


def public(status: int = 200) -> dict[str, int]:
    return dict.fromkeys(ROLES, status)


STAFF = {"staff", "superuser"}


def admin_view(staff: int) -> dict[str, int]:
    """An admin page: superusers 200, staff `staff`, everyone else the admin's sign-in."""
    return allowed(200, {"superuser"}, anonymous=302, refused=302) | {"staff": staff}


NEVER: frozenset[str] = frozenset()

# The tables each kind of write changes, exactly (by table name; every other table of the
# database must stay as it was). The audit trail is part of each: a change of the tree is a
# budget event with an item per node whose share moves, a job's change a job event, a
# host's or a cluster's its own event table; a tracked row's insert, update or delete is
# also a django-pghistory event with its context.
# a node added, renamed or reweighted (the tree's version moves)
TREE_WRITE = frozenset({
    "budgets_budgetnode", "budgets_budgetnodeevent", "budgets_treestate",
    "budgets_budgetevent", "budgets_budgeteventitem", "pghistory_context",
})  # fmt: skip
ROLE_GRANTED = frozenset({
    "budgets_membership", "budgets_membershipevent",
    "budgets_budgetevent", "budgets_budgeteventitem", "pghistory_context",
})  # fmt: skip
ROLE_REMOVED = ROLE_GRANTED  # the same tables: the row goes, its history records the delete
SCHEDULED_CANCELLED = frozenset({"budgets_scheduledchange", "budgets_budgetevent"})
TOKENS = frozenset({"accounts_apitoken", "accounts_tokenevent"})  # each made or ended: an event
JOB_WRITE = frozenset({"scheduler_job", "scheduler_jobevent"})  # submitted, or pending cancelled
RUNNING_JOB_CANCELLED = JOB_WRITE | {"scheduler_attempt"}  # the attempt is asked to stop
POLICY = frozenset({"scheduler_cluster", "scheduler_clusterpolicyevent"})
METRICS_SOURCE = frozenset({"scheduler_clustermetrics", "scheduler_clusterpolicyevent"})
HOST_HEALTH = frozenset({"scheduler_host", "scheduler_hostevent"})
PREVIEW = frozenset({"scheduler_preview"})
SIGN_OUT = frozenset({"django_session"})
SIGN_IN = frozenset({"django_session", "auth_user"})

ROWS: list[Row] = [
    # the budget tree, shares, history, memberships: participants read
    Row("get", "/api/v1/nodes/", readers()),
    Row("get", "/api/v1/nodes/{a1}/", readers()),
    Row("get", "/api/v1/tree/", readers()),
    Row("get", "/api/v1/budget-changes/", readers()),
    Row("get", "/api/v1/budget-changes/{import_event}/", readers()),
    Row("get", "/api/v1/memberships/", readers()),
    # structure and weights: a manager above the node (adding: of the parent or above)
    Row(
        "post",
        "/api/v1/nodes/",
        allowed(201, GOVERN_A),
        {"parent": "{prog_a}", "name": "a3", "reason": "r"},
        tables=TREE_WRITE,
    ),  # fmt: skip
    Row(
        "patch",
        "/api/v1/nodes/{a1}/",
        allowed(200, GOVERN_A),
        {"name": "a1-renamed", "reason": "r"},
        tables=TREE_WRITE,
    ),  # fmt: skip
    Row(
        "post",
        "/api/v1/budget-changes/",
        allowed(201, GOVERN_A),
        {"reason": "r", "changes": [{"node": "{a1}", "weight": 5}]},
        tables=TREE_WRITE,
    ),  # fmt: skip
    Row(
        "post",
        "/api/v1/budget-changes/",
        allowed(201, {"other_manager", "head", "superuser"}),
        {"reason": "r", "changes": [{"node": "{b1}", "weight": 5}]},
        tables=TREE_WRITE,
    ),  # fmt: skip
    # one change under each program: only a manager of both may (no partial write)
    Row(
        "post",
        "/api/v1/budget-changes/",
        allowed(201, {"head", "superuser"}),
        {"reason": "r", "changes": [{"node": "{a1}", "weight": 5}, {"node": "{b1}", "weight": 5}]},
        tables=TREE_WRITE,
    ),  # fmt: skip
    # invalid once let through (a sibling's name): refused and nothing written
    Row(
        "patch",
        "/api/v1/nodes/{a1}/",
        allowed(400, GOVERN_A),
        {"name": "a2", "reason": "r"},
    ),  # fmt: skip
    Row(
        "post",
        "/api/v1/budget-changes/{scheduled}/cancel/",
        allowed(201, GOVERN_A),
        {"reason": "r"},
        tables=SCHEDULED_CANCELLED,
    ),  # fmt: skip
    # roles: members by a manager of the project or above, managers by a manager above
    Row(
        "post",
        "/api/v1/memberships/",
        allowed(201, MANAGE_A1),
        {"user": "bob", "node": "{a1}", "role": "member"},
        tables=ROLE_GRANTED,
    ),  # fmt: skip
    Row(
        "post",
        "/api/v1/memberships/",
        allowed(201, GOVERN_A),
        {"user": "bob", "node": "{a1}", "role": "manager"},
        tables=ROLE_GRANTED,
    ),  # fmt: skip
    Row(
        "post",
        "/api/v1/memberships/",
        allowed(201, {"other_manager", "head", "superuser"}),
        {"user": "bob", "node": "{b1}", "role": "member"},
        tables=ROLE_GRANTED,
    ),  # fmt: skip
    Row(
        "post",
        "/api/v1/memberships/",
        allowed(201, {"other_manager", "head", "superuser"}),
        {"user": "bob", "node": "{b1}", "role": "manager"},
        tables=ROLE_GRANTED,
    ),  # fmt: skip
    # invalid once let through (ann is already a member of a1)
    Row(
        "post",
        "/api/v1/memberships/",
        allowed(400, MANAGE_A1),
        {"user": "ann", "node": "{a1}", "role": "member"},
    ),  # fmt: skip
    Row("delete", "/api/v1/memberships/{ann_a1}/", allowed(204, MANAGE_A1), tables=ROLE_REMOVED),
    Row("delete", "/api/v1/memberships/{pi_a1}/", allowed(204, GOVERN_A), tables=ROLE_REMOVED),
    # tokens: a password gives one; each user sees and revokes only their own
    Row(
        "post",
        "/api/v1/auth/token/",
        public(),
        {"username": "bob", "password": "pw"},
        tables=TOKENS,
    ),  # fmt: skip
    Row("get", "/api/v1/auth/tokens/", signed_in()),
    Row(  # only ceo holds a token
        "delete",
        "/api/v1/auth/tokens/",
        signed_in(204),
        changes=frozenset({"head"}),
        tables=TOKENS,
    ),  # fmt: skip
    Row(  # a session sends no token: keeping the one in use keeps none
        "delete",
        "/api/v1/auth/tokens/?keep_current=true",
        signed_in(204),
        changes=frozenset({"head"}),
        tables=TOKENS,
    ),  # fmt: skip
    Row(
        "delete",
        "/api/v1/auth/tokens/{ceo_token}/",
        {**signed_in(404), "head": 204},
        tables=TOKENS,
    ),  # fmt: skip
    # jobs: participants read (specs: submitter, managers of the project or above,
    # staff); members and managers of the project or above submit; the submitter, those
    # managers and staff cancel. {job} is ann's in a1, {job_a2} bob's in a2 (pending).
    Row("get", "/api/v1/jobs/", readers()),
    Row(
        "post",
        "/api/v1/jobs/",
        allowed(201, MANAGE_A1 | {"member"}),
        {"project": "{a1}", "cluster": "gpu", "gpus": 1, "min_runtime_s": 0},
        tables=JOB_WRITE,
    ),  # fmt: skip
    Row(
        "post",
        "/api/v1/jobs/",
        allowed(201, {"other_manager", "head", "superuser"}),
        {"project": "{b1}", "cluster": "gpu", "gpus": 1, "min_runtime_s": 0},
        tables=JOB_WRITE,
    ),  # fmt: skip
    Row("get", "/api/v1/jobs/{job}/", readers()),
    Row(
        "post",
        "/api/v1/jobs/{job}/cancel/",
        allowed(200, MANAGE_A1 | {"member", "staff"}),
        tables=JOB_WRITE,
    ),  # fmt: skip
    Row(  # ann's, running in a1: its attempt is asked to stop
        "post",
        "/api/v1/jobs/{job_running}/cancel/",
        allowed(200, MANAGE_A1 | {"member", "staff"}),
        tables=RUNNING_JOB_CANCELLED,
    ),  # fmt: skip
    Row(
        "post",
        "/api/v1/jobs/{job_a2}/cancel/",
        allowed(200, GOVERN_A | {"staff"}),
        tables=JOB_WRITE,
    ),  # fmt: skip
    Row(
        "post",
        "/api/v1/jobs/{job_b1}/cancel/",
        allowed(200, {"other_manager", "head", "staff", "superuser"}),
        tables=JOB_WRITE,
    ),  # fmt: skip
    Row("get", "/api/v1/queue/?cluster=gpu", readers()),
    Row("get", "/api/v1/waits/?cluster=gpu", readers()),
    Row("get", "/api/v1/usage/?cluster=gpu&project={a1}", readers()),
    Row("get", "/api/v1/occupancy/?cluster=gpu&step=day", readers()),
    Row("get", "/api/v1/fairshare/?cluster=gpu", readers()),
    Row("get", "/api/v1/clusters/", readers()),
    Row("get", "/api/v1/clusters/{cluster}/", readers()),
    Row(
        "patch",
        "/api/v1/clusters/{cluster}/",
        allowed(200, STAFF),
        {"cycle_s": 5, "reason": "r"},
        tables=POLICY,
    ),  # fmt: skip
    # where its GPU metrics are read: staff, like the policy (the service decides)
    Row(
        "patch",
        "/api/v1/clusters/{cluster}/metrics/",
        allowed(200, STAFF),
        {
            "prometheus_url": "http://prom:9090",
            "gpu_label": "gpu_index",
            "bearer_token": "t",
            "reason": "r",
        },
        tables=METRICS_SOURCE,
    ),  # fmt: skip
    Row("get", "/api/v1/hosts/", readers()),
    Row("get", "/api/v1/hosts/{host}/", readers()),
    Row(
        "patch",
        "/api/v1/hosts/{host}/",
        allowed(200, STAFF),
        {"health": "draining", "reason": "r"},
        tables=HOST_HEALTH,
    ),  # fmt: skip
    # what-if previews: whoever may change the weights under the node, and its requester
    Row(
        "post",
        "/api/v1/previews/",
        allowed(201, GOVERN_A),
        {"node": "{prog_a}", "cluster": "gpu", "weights": [{"node": "{a1}", "weight": 3}]},
        tables=PREVIEW,
    ),  # fmt: skip
    Row(
        "post",
        "/api/v1/previews/",
        allowed(201, {"other_manager", "head", "superuser"}),
        {"node": "{prog_b}", "cluster": "gpu", "weights": [{"node": "{b1}", "weight": 3}]},
        tables=PREVIEW,
    ),  # fmt: skip
    Row("get", "/api/v1/previews/{preview}/", allowed(200, GOVERN_A)),
    # public and operators' endpoints
    Row("get", "/api/schema/", public()),
    Row("get", "/api/docs/", public()),
    # health is public; /healthz is 503 here because no beat or worker runs in this test
    Row("get", "/healthz", public(503)),
    Row("get", "/healthz/web", public()),
    Row("get", "/favicon.ico", public(301)),  # to the static icon
    Row("get", "/metrics", public()),  # by network (tests come from 127.0.0.1)
    # pages: participants; the edit form where you govern every child
    Row("get", "/", public(302)),  # to /budgets/; without a role to /me/ (test_side_doors)
    Row("get", "/accounts/login/", public()),
    # a sign-in: a new session, the user's last sign-in
    Row(
        "post",
        "/accounts/login/",
        public(302),
        {"username": "bob", "password": "pw"},
        tables=SIGN_IN,
    ),
    # the session of a signed-in role ends
    Row("post", "/accounts/logout/", public(302), changes=frozenset(SIGNED_IN), tables=SIGN_OUT),
    Row("get", "/budgets/", readers(anonymous=302)),
    Row("get", "/budgets/history/", readers(anonymous=302)),
    Row("get", "/budgets/nodes/{prog_a}/edit/", allowed(200, GOVERN_A, anonymous=302)),
    Row(  # the form's save: to the history page
        "post",
        "/budgets/nodes/{prog_a}/edit/",
        allowed(302, GOVERN_A, anonymous=302),
        {"weight-{a1}": "7", "weight-{a2}": "1", "reason": "r"},
        frozenset(GOVERN_A),
        tables=TREE_WRITE,
    ),  # fmt: skip
    Row(
        "post",
        "/budgets/nodes/{prog_a}/preview/",
        allowed(200, GOVERN_A, anonymous=302),
        changes=NEVER,
    ),  # fmt: skip
    Row(
        "post",
        "/budgets/nodes/{prog_a}/whatif/",
        allowed(200, GOVERN_A, anonymous=302),
        {"cluster": "gpu", "weight-{a1}": "3", "weight-{a2}": "30"},
        frozenset(GOVERN_A),
        tables=PREVIEW,
    ),  # fmt: skip
    Row("get", "/budgets/whatif/{preview}/", allowed(200, GOVERN_A, anonymous=302)),
    Row(
        "post",
        "/budgets/scheduled/{scheduled}/cancel/",
        allowed(302, GOVERN_A, anonymous=302),
        {"reason": "r"},
        frozenset(GOVERN_A),
        tables=SCHEDULED_CANCELLED,
    ),  # fmt: skip
    Row("get", "/planner/", readers(anonymous=302)),
    Row("get", "/planner/{scenario}/", readers(anonymous=302)),
    Row("get", "/dashboards/", readers(anonymous=302)),
    Row("get", "/dashboards/occupancy/?cluster=gpu", readers(anonymous=302)),
    Row("get", "/dashboards/efficiency/?cluster=gpu", readers(anonymous=302)),
    Row("get", "/dashboards/delivery/?cluster=gpu&format=csv", readers(anonymous=302)),
    Row("get", "/dashboards/fairshare/?cluster=gpu", readers(anonymous=302)),
    Row("get", "/dashboards/waits/?cluster=gpu", readers(anonymous=302)),
    Row("get", "/me/", signed_in(200, anonymous=302)),
    # your own API tokens' page: anyone signed in; another user's token is a 404, as the API
    Row("get", "/me/tokens/", signed_in(200, anonymous=302)),
    Row(
        "post",
        "/me/tokens/{ceo_token}/revoke/",
        {**signed_in(404, anonymous=302), "head": 302},
        changes=frozenset({"head"}),
        tables=TOKENS,
    ),  # fmt: skip
    Row(  # only ceo holds a token
        "post",
        "/me/tokens/revoke-all/",
        signed_in(302, anonymous=302),
        changes=frozenset({"head"}),
        tables=TOKENS,
    ),  # fmt: skip
    Row("get", "/jobs/{job}/", readers(anonymous=302)),  # the spec: test_job_page.py
    # the job page's "why it waits" part (htmx); 204 once the job no longer waits
    Row("get", "/jobs/{job}/waiting/", readers(anonymous=302)),
    Row("get", "/now/", readers(anonymous=302)),
    # the cluster queue page: the API queue's rule (a role)
    # (/queue/ sends a reader on to a cluster's queue: an unknown cluster shows the gate
    # passed without a redirect the documented table would read as a sign-in)
    Row("get", "/queue/?cluster=nope", readers(400, anonymous=302)),
    Row("get", "/clusters/{cluster}/queue/", readers(anonymous=302)),
    Row("get", "/clusters/{cluster}/queue/?mine=1&state=all", readers(anonymous=302)),
    # the admin: staff (its views apply the same services and rules); every model's
    # change view: superusers, staff where Allot gives them a read-only view (the audit
    # trail, jobs, hosts), 403 elsewhere without Django permissions; others sign in
    Row("get", "/admin/", allowed(200, STAFF, anonymous=302, refused=302)),
    Row("get", "/admin/budgets/membership/", admin_view(staff=403)),
    *(
        Row("get", f"/admin/{model}/{{{obj}}}/change/", admin_view(staff))
        for model, obj, staff in [
            ("auth/user", "bob", 403),
            ("auth/group", "group", 403),
            ("accounts/apitoken", "ceo_token_pk", 403),
            ("accounts/tokenevent", "token_event", 200),
            ("axes/accessattempt", "access_attempt", 403),
            ("axes/accesslog", "access_log", 403),
            ("axes/accessfailurelog", "access_failure", 403),
            ("budgets/budgetnode", "a1", 403),
            ("budgets/membership", "ann_a1", 403),
            ("budgets/budgetevent", "import_event", 200),
            ("budgets/scheduledchange", "scheduled_change", 200),
            ("scheduler/cluster", "cluster", 403),
            ("scheduler/clusterpolicyevent", "policy_event", 200),
            ("scheduler/host", "host", 200),
            ("scheduler/hostevent", "host_event", 200),
            ("scheduler/job", "job", 200),
            ("scheduler/jobevent", "job_event", 200),
            ("scheduler/attempt", "attempt", 200),
            ("scheduler/cyclerecord", "cycle", 200),
            ("scheduler/idempotencykey", "idempotency_key", 200),
        ]
    ),
    Row(
        "post",
        "/admin/budgets/membership/",
        allowed(302, {"superuser"}, anonymous=302, refused=302) | {"staff": 403},
        {"action": "remove_roles", "_selected_action": "{ann_a1}"},
        frozenset({"superuser"}),
        tables=ROLE_REMOVED,
    ),  # fmt: skip
]


def operation_key(key: str) -> str:
    """`GET /api/v1/nodes/{node_id}/` and `GET /api/v1/nodes/{a1}/` are the same operation
    (and a row's query string is not part of it); the URL walk's sample ids too."""
    path = re.sub(r"\{[^}]+\}", "{}", key.partition("?")[0])
    return re.sub(r"/(1|sample)/", "/{}/", path)


def refused_operations(role: str) -> set[str]:
    """Operations (`operation_key`) that refuse `role` in every row (401 or 403): those
    not open to it."""
    statuses: dict[str, set[int]] = {}
    for row in ROWS:
        statuses.setdefault(operation_key(row.key), set()).add(row.expected[role])
    return {key for key, seen in statuses.items() if seen <= {401, 403}}
