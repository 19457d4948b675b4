"""The statements every submission runs (the API token, the project and cluster lookup,
the INSERT) are prepared once per connection (config/postgres/base.py, issue 28); the
ORM's statements are not, and `PREPARED_STATEMENTS: False` (ALLOT_DB_PREPARED=false)
prepares nothing."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from rest_framework.test import APIClient

from accounts.services import token_create
from scheduler.models import Job
from tests.api.conftest import job_body

pytestmark = pytest.mark.django_db


def prepared() -> set[str]:
    """The statements prepared on this connection (PostgreSQL's own view of them; an
    earlier test on the same connection may have prepared some)."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT statement FROM pg_prepared_statements")
        return {row[0] for row in cursor.fetchall()}


def submit(client: APIClient, key: str):
    return client.post("/api/v1/jobs/", job_body(), format="json", HTTP_IDEMPOTENCY_KEY=key)


def test_a_submissions_statements_are_prepared_once_and_the_orms_never(world):
    client = APIClient()
    client.credentials(
        HTTP_AUTHORIZATION=f"Token {token_create(user=world.user('ann'), name='p')[1]}"
    )
    before = prepared()
    assert submit(client, "first").status_code == 201
    first = prepared()
    assert len(first - before) <= 3
    assert any('"accounts_apitoken"' in s for s in first)
    assert any("scheduler_host" in s for s in first)
    assert any("INSERT INTO scheduler_job" in s for s in first)
    with CaptureQueriesContext(connection) as captured:
        assert submit(client, "second").status_code == 201
    assert prepared() == first  # executed by name, not prepared again
    # the debug log shows each statement with its parameters in place
    assert any("x.name = 'gpu'" in q["sql"] for q in captured.captured_queries)
    for _ in range(10):
        list(Job.objects.filter(name="train").values_list("pk"))
    assert prepared() == first
    assert connection.connection.prepare_threshold is None  # psycopg's automatic mode off
    assert Job.objects.filter(name="train").count() == 2


def test_without_prepared_statements_nothing_is_prepared(world):
    client = APIClient()
    client.credentials(
        HTTP_AUTHORIZATION=f"Token {token_create(user=world.user('ann'), name='p')[1]}"
    )
    before = prepared()
    connection.settings_dict["PREPARED_STATEMENTS"] = False
    try:
        assert submit(client, "first").status_code == 201
        assert submit(client, "first").status_code == 201  # the retry, answered as before
    finally:
        del connection.settings_dict["PREPARED_STATEMENTS"]
    assert prepared() == before
    assert Job.objects.filter(name="train").count() == 1
