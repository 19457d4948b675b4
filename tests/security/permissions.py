"""Who may do what: one row per endpoint or page, the status each role gets.

README's "Who may see what" table is this table in words. Every API operation of the
OpenAPI schema must have a row (tests/security/test_permissions.py checks it), so a new
endpoint lands with its row. Add rows for new endpoints to `ROWS`; a placeholder such as
`{a1}` in a path or body is filled from `context()` (extend it for new objects).
"""

from __future__ import annotations

from dataclasses import dataclass, field

# anonymous; ann: member of project a1; lead-b: manages program prog-b (not prog-a);
# lead-a: manages program prog-a (a1, a2); root: superuser.
ROLES = ["anonymous", "member", "other_manager", "manager", "superuser"]
USERS = {
    "anonymous": None,
    "member": "ann",
    "other_manager": "lead-b",
    "manager": "lead-a",
    "superuser": "root",
}


@dataclass(frozen=True)
class Row:
    method: str
    path: str
    expected: dict[str, int]  # role -> status
    body: dict = field(default_factory=dict)

    @property
    def key(self) -> str:
        return f"{self.method.upper()} {self.path}"


def everyone(status: int, anonymous: int = 401) -> dict[str, int]:
    return {role: (anonymous if role == "anonymous" else status) for role in ROLES}


def governed(ok: int, anonymous: int = 401, refused: int = 403) -> dict[str, int]:
    """Allowed to lead-a (governs prog-a's projects) and superusers."""
    return {
        "anonymous": anonymous,
        "member": refused,
        "other_manager": refused,
        "manager": ok,
        "superuser": ok,
    }


ROWS: list[Row] = [
    # budget tree, shares, history: everyone signed in reads
    Row("get", "/api/v1/nodes/", everyone(200)),
    Row("get", "/api/v1/nodes/{a1}/", everyone(200)),
    Row("get", "/api/v1/tree/", everyone(200)),
    Row("get", "/api/v1/budget-changes/", everyone(200)),
    Row("get", "/api/v1/budget-changes/{import_event}/", everyone(200)),
    Row("get", "/api/v1/memberships/", everyone(200)),
    # writes: the services' rules (the manager of a node governs the nodes below it)
    Row(
        "post", "/api/v1/nodes/", governed(201), {"parent": "{prog_a}", "name": "a3", "reason": "r"}
    ),
    Row("patch", "/api/v1/nodes/{a1}/", governed(200), {"name": "a1-renamed", "reason": "r"}),
    Row(
        "post",
        "/api/v1/budget-changes/",
        governed(201),
        {"reason": "r", "changes": [{"node": "{a1}", "weight": 5}]},
    ),
    Row("post", "/api/v1/budget-changes/{scheduled}/cancel/", governed(201), {"reason": "r"}),
    Row(
        "post",
        "/api/v1/memberships/",
        governed(201),
        {"user": "bob", "node": "{a1}", "role": "member"},
    ),
    Row("delete", "/api/v1/memberships/{ann_a1}/", governed(204)),
    # tokens: only their owner; nobody sees or revokes another user's
    Row(
        "post",
        "/api/v1/auth/token/",
        everyone(200, anonymous=200),
        {"username": "bob", "password": "pw"},
    ),
    Row("get", "/api/v1/auth/tokens/", everyone(200)),
    Row("delete", "/api/v1/auth/tokens/", everyone(204)),
    Row("delete", "/api/v1/auth/tokens/{ceo_token}/", everyone(404)),
    # jobs: everyone signed in reads them (the spec only its submitter, the managers of
    # its project and staff: tests/live/test_api.py); members and the managers above
    # submit; the submitter, those managers and staff cancel. {job} is ann's, in a1.
    Row("get", "/api/v1/jobs/", everyone(200)),
    Row(
        "post",
        "/api/v1/jobs/",
        {**governed(201), "member": 201},
        {"project": "{a1}", "cluster": "gpu", "gpus": 1, "min_runtime_s": 0},
    ),
    Row("get", "/api/v1/jobs/{job}/", everyone(200)),
    Row("post", "/api/v1/jobs/{job}/cancel/", {**governed(200), "member": 200}),
    Row("get", "/api/v1/queue/?cluster=gpu", everyone(200)),
    # dashboards' figures: everyone signed in reads (aggregates only, no job names)
    Row("get", "/api/v1/waits/?cluster=gpu", everyone(200)),
    # the ledger's figures: everyone signed in reads (aggregates per project and cluster)
    Row("get", "/api/v1/usage/?cluster=gpu&project={a1}", everyone(200)),
    Row("get", "/api/v1/occupancy/?cluster=gpu&step=day", everyone(200)),
    Row("get", "/api/v1/fairshare/?cluster=gpu", everyone(200)),
    Row("get", "/api/v1/clusters/", everyone(200)),
    Row("get", "/api/v1/clusters/{cluster}/", everyone(200)),
    # a cluster's policy: staff only (superusers here)
    Row(
        "patch",
        "/api/v1/clusters/{cluster}/",
        {**governed(200), "manager": 403},
        {"cycle_s": 5, "reason": "r"},
    ),
    Row("get", "/api/v1/hosts/", everyone(200)),
    Row("get", "/api/v1/hosts/{host}/", everyone(200)),
    # drains: staff and the cluster's operators only
    Row(
        "patch",
        "/api/v1/hosts/{host}/",
        {**governed(200), "manager": 403},
        {"health": "draining", "reason": "r"},
    ),
    # what-if previews: whoever may change the weights under the node asks and reads
    Row(
        "post",
        "/api/v1/previews/",
        governed(201),
        {"node": "{prog_a}", "cluster": "gpu", "weights": [{"node": "{a1}", "weight": 3}]},
    ),
    Row("get", "/api/v1/previews/{preview}/", governed(200)),
    # the schema and its docs are public; operators' endpoints
    Row("get", "/api/schema/", everyone(200, anonymous=200)),
    Row("get", "/api/docs/", everyone(200, anonymous=200)),
    # health is public; /healthz is 503 here because no beat or worker runs in this test
    Row("get", "/healthz", everyone(503, anonymous=503)),
    Row("get", "/healthz/web", everyone(200, anonymous=200)),
    Row("get", "/metrics", everyone(200, anonymous=200)),  # by network (tests come from 127.0.0.1)
    # pages: signed-in users; the edit form only where you govern every child
    Row("get", "/budgets/", everyone(200, anonymous=302)),
    Row("get", "/budgets/history/", everyone(200, anonymous=302)),
    Row("get", "/budgets/nodes/{prog_a}/edit/", governed(200, anonymous=302)),
    Row("post", "/budgets/nodes/{prog_a}/preview/", governed(200, anonymous=302)),
    Row("post", "/budgets/nodes/{prog_a}/whatif/", governed(200, anonymous=302)),
    Row("get", "/budgets/whatif/{preview}/", governed(200, anonymous=302)),
    Row(
        "post",
        "/budgets/scheduled/{scheduled}/cancel/",
        governed(302, anonymous=302),
        {"reason": "r"},
    ),
    Row("get", "/planner/", everyone(200, anonymous=302)),
    Row("get", "/dashboards/", everyone(200, anonymous=302)),
    Row("get", "/dashboards/occupancy/?cluster=gpu", everyone(200, anonymous=302)),
    Row("get", "/dashboards/delivery/?cluster=gpu&format=csv", everyone(200, anonymous=302)),
    Row("get", "/dashboards/fairshare/?cluster=gpu", everyone(200, anonymous=302)),
    Row("get", "/dashboards/waits/?cluster=gpu", everyone(200, anonymous=302)),
    Row("get", "/me/", everyone(200, anonymous=302)),
    Row("get", "/jobs/{job}/", everyone(200, anonymous=302)),  # the spec: test_job_page.py
    Row(
        "get",
        "/admin/",
        {"anonymous": 302, "member": 302, "other_manager": 302, "manager": 302, "superuser": 200},
    ),
]
