"""Issue 30: the documented table of who may do what (docs/api.md "The table", which the
README points to) says what the permission matrix (tests/security/permissions.py) tests.

Each row of the documented table covers the matrix rows `COVERS` names; each cell is
read as: "401"/"sign-in" (refused, asked to sign in: 401 on the API, the sign-in
redirect on pages and the admin), "403" (refused), "yes"/"read"/"any"/... (no covered
row refuses the role) or words that narrow the right ("below prog-a", "their own":
at least one covered row lets the role through, on its own team's objects). Every row of
the matrix is covered by one row of the table, so a new endpoint is described there too.
No database: the matrix's expected statuses are data."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.security.permissions import ROLES, ROWS, Row

TABLE = Path(__file__).resolve().parents[2] / "docs" / "api.md"

API_READS = r"^GET /api/v1/(nodes|tree|budget-changes|memberships|jobs|queue|clusters|hosts|usage|occupancy|fairshare|waits)/"  # noqa: E501
PAGE_READS = (
    r"^GET /(budgets/|budgets/history/|planner/.*|dashboards/.*|jobs/.*|now/"
    r"|queue/.*|clusters/\{cluster\}/queue/.*)$"
)

# the documented row (by the start of its "what" cell) -> the matrix rows it covers
COVERS: dict[str, str] = {
    "tree, nodes, shares": f"{API_READS}|{PAGE_READS}",
    "`/me/`, own API tokens": r"^GET /me/$|^(GET|POST) /me/tokens/"
    r"|^(GET|DELETE) /api/v1/auth/tokens/",
    "add a node": r"^(POST|PATCH) /api/v1/nodes/|^POST /api/v1/budget-changes/"
    r"|^POST /budgets/scheduled/",
    "grant or remove a member role": r"^POST /api/v1/memberships/ member$"
    r"|^DELETE /api/v1/memberships/\{ann_a1\}/",
    "grant or remove a manager role": r"^POST /api/v1/memberships/ manager$"
    r"|^DELETE /api/v1/memberships/\{pi_a1\}/",
    "edit-weights page": r"^(GET|POST) /budgets/(nodes|whatif)/|^(GET|POST) /api/v1/previews/",
    "submit a job": r"^POST /api/v1/jobs/$",
    "cancel a job": r"^POST /api/v1/jobs/\{[a-z0-9_]+\}/cancel/",
    "read a job's `spec`": r"$^",  # the rows of its own test (test_job_page.py, test_api)
    "drain or resume a host": r"^PATCH /api/v1/hosts/",
    "change a cluster's policy": r"^PATCH /api/v1/clusters/",
    "`/admin/`": r"^(GET|POST) /admin/",
    "`/api/schema/`": r"^GET /api/(schema|docs)/|^GET /(healthz|healthz/web|favicon.ico)$"
    r"|^POST /api/v1/auth/token/|^(GET|POST) /accounts/|^GET /$",
    "`/metrics`": r"^GET /metrics$",
}
EVERY = {"yes", "read", "any", "all", "everywhere", "anywhere"}
SIGN_IN = {"401", "sign-in", "401 / sign-in", "sign-in / 401"}


def documented_table() -> list[tuple[str, dict[str, str]]]:
    """(what, role -> cell) of each row of docs/api.md's table."""
    text = TABLE.read_text().split("### The table", 1)[1]
    lines = [line for line in text.splitlines() if line.startswith("| ")]
    header = [cell.strip() for cell in lines[0].strip("|").split("|")]
    assert len(header) == 1 + len(ROLES), header
    rows = []
    for line in lines[1:]:
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        rows.append((cells[0], dict(zip(ROLES, cells[1:], strict=False))))
    return rows


def matrix_key(row: Row) -> str:
    """The row's key, a membership grant with its role (`POST /api/v1/memberships/ member`)."""
    return f"{row.key} {row.body['role']}" if "role" in row.body else row.key


def covered(pattern: str) -> list[Row]:
    return [row for row in ROWS if re.search(pattern, matrix_key(row))]


def refused(row: Row, role: str) -> bool:
    """The matrix refuses `role` this row: 401/403, or a page's sign-in redirect."""
    status = row.expected[role]
    page_sign_in = (
        row.method == "get" and status == 302 and row.expected["anonymous"] == 302
        and row.path != "/"
    )  # fmt: skip
    return status in (401, 403) or page_sign_in


def asks_to_sign_in(row: Row, role: str) -> bool:
    status = row.expected[role]
    return status == 401 if row.path.startswith("/api/") else status == 302


def test_every_row_of_the_matrix_is_described_by_the_documented_table():
    described = {what for what, _ in documented_table()}
    for start in COVERS:
        assert any(what.startswith(start) for what in described), start
    for row in ROWS:
        owners = [start for start, pattern in COVERS.items() if re.search(pattern, matrix_key(row))]
        assert len(owners) == 1, (matrix_key(row), owners)


@pytest.mark.parametrize("what", list(COVERS))
def test_each_documented_cell_is_what_the_matrix_tests(what):
    (cells,) = [c for w, c in documented_table() if w.startswith(what)]
    rows = covered(COVERS[what])
    if what == "`/metrics`" or not rows:
        return  # by network, not by role (tests/ops/test_proxy.py); or tested elsewhere
    for role, cell in cells.items():
        where = (what, role, cell)
        if cell in SIGN_IN:
            assert all(asks_to_sign_in(row, role) for row in rows), where
        elif cell == "403":
            assert all(row.expected[role] == 403 for row in rows), where
        elif cell in EVERY:
            assert not any(refused(row, role) for row in rows), where
        else:  # a narrowed right: somewhere it holds, and never a sign-in for a signed-in role
            assert any(not refused(row, role) for row in rows), where
