"""No secret (password, API token) appears in the logs or in the audit trail."""

import json
import logging

import pytest
from django.db import connection

from tests.factories import UserFactory

pytestmark = pytest.mark.django_db

PASSWORD = "Correct-Horse-7e1b"
WRONG_PASSWORD = "Wrong-Battery-93f0"


def audit_text() -> str:
    """Every row of the audit tables and the row history, as text."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = 'public' "
            "AND (table_name LIKE 'budgets_budgetevent%%' OR table_name LIKE '%%event' "
            "OR table_name LIKE 'pghistory_%%')"
        )
        tables = [row[0] for row in cursor.fetchall()]
        dump = []
        for table in tables:
            cursor.execute(f'SELECT * FROM "{table}"')
            dump.extend(json.dumps(row, default=str) for row in cursor.fetchall())
    assert any("budgetevent" in t for t in tables) and "pghistory_context" in tables
    return "\n".join(dump)


def test_passwords_and_tokens_stay_out_of_logs_and_audit(tree, client, api_client, caplog):
    caplog.set_level(logging.DEBUG)
    user = tree.user("lead-a")
    user.set_password(PASSWORD)
    user.save()
    UserFactory(username="ann")

    client.post("/accounts/login/", {"username": "lead-a", "password": WRONG_PASSWORD})
    assert (
        client.post("/accounts/login/", {"username": "lead-a", "password": PASSWORD}).status_code
        == 302
    )
    api_client.post("/api/v1/auth/token/", {"username": "lead-a", "password": WRONG_PASSWORD})
    token = api_client.post(
        "/api/v1/auth/token/", {"username": "lead-a", "password": PASSWORD}, format="json"
    ).json()["token"]
    api_client.credentials(HTTP_AUTHORIZATION=f"Token {token}")
    assert (
        api_client.post(
            "/api/v1/budget-changes/",
            {"reason": "rebalance", "changes": [{"node": tree.node("a1").pk, "weight": 3}]},
            format="json",
        ).status_code
        == 201
    )
    api_client.post(
        "/api/v1/memberships/",
        {"user": "ann", "node": tree.node("a2").pk, "role": "member"},
        format="json",
    )
    assert api_client.delete("/api/v1/auth/tokens/").status_code == 204
    assert api_client.get("/api/v1/nodes/").status_code == 401  # logged as a warning

    secrets = [PASSWORD, WRONG_PASSWORD, token, token[15:]]
    logged = "\n".join(
        f"{r.getMessage()} {r.args!r} {getattr(r, 'request', '')!r}" for r in caplog.records
    )
    assert caplog.records and "Unauthorized: /api/v1/nodes/" in logged
    audit = audit_text()
    assert "rebalance" in audit
    for secret in secrets:
        assert secret not in logged
        assert secret not in audit
