"""Every write endpoint and page refuses a session request without a CSRF token.

The URL configuration is walked, so new endpoints are covered as they land."""

import json

import pytest
from django.test import Client

from tests.factories import SuperUserFactory
from tests.security.urls import all_paths

pytestmark = pytest.mark.django_db

# Sign-in with credentials (no session is used; a token is the answer).
CSRF_EXEMPT = {"/api/v1/auth/token/"}
UNSAFE_METHODS = ["post", "put", "patch", "delete"]


def test_the_walk_sees_the_api_the_pages_and_the_admin():
    paths = all_paths()
    assert {"/api/v1/budget-changes/", "/budgets/", "/accounts/login/", "/admin/"} <= set(paths)
    assert "/api/v1/nodes/1/" in paths and "/budgets/nodes/1/edit/" in paths


@pytest.mark.parametrize("method", UNSAFE_METHODS)
def test_session_writes_without_csrf_token_are_refused_everywhere(method):
    client = Client(enforce_csrf_checks=True)
    client.force_login(SuperUserFactory(username="root"))
    accepted = []
    for path in all_paths():
        if path in CSRF_EXEMPT:
            continue
        response = getattr(client, method)(path, json.dumps({}), content_type="application/json")
        if response.status_code != 403:
            accepted.append((path, response.status_code))
        elif response["Content-Type"] == "application/json":
            body = response.json()
            assert body["code"] == "permission_denied" and "CSRF" in body["detail"], (path, body)
    assert accepted == []


def test_the_same_write_with_the_csrf_token_goes_through(tree):
    from budgets.models import BudgetNode

    client = Client(enforce_csrf_checks=True)
    client.force_login(tree.user("lead-a"))
    client.get("/budgets/")
    token = client.cookies["csrftoken"].value
    a1 = tree.node("a1")
    response = client.post(
        "/api/v1/budget-changes/",
        json.dumps({"reason": "with a token", "changes": [{"node": a1.pk, "weight": 5}]}),
        content_type="application/json",
        headers={"X-CSRFToken": token},
    )
    assert response.status_code == 201
    assert BudgetNode.objects.get(pk=a1.pk).weight == 5
