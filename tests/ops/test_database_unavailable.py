"""While the database cannot be reached (a restart, a failover) requests get a 503 with
Retry-After, never a 500; the next request after it is back works."""

import pytest
from django.db import connection
from django.test import Client

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def unreachable_database():
    """The default connection pointed at a port nothing listens on, then restored."""
    saved = dict(connection.settings_dict)
    connection.close()
    connection.settings_dict["HOST"] = "127.0.0.1"
    connection.settings_dict["PORT"] = "1"
    yield
    connection.close()
    connection.settings_dict.clear()
    connection.settings_dict.update(saved)


def test_api_and_pages_answer_503_while_the_database_is_unreachable(unreachable_database):
    client = Client(raise_request_exception=False)
    response = client.get("/api/v1/jobs/", HTTP_AUTHORIZATION="Token whatever")
    assert response.status_code == 503
    assert response["Retry-After"] == "5"
    assert response.json()["code"] == "unavailable"
    client.cookies["sessionid"] = "a-session"  # reading it needs the database
    page = client.get("/budgets/")
    assert page.status_code == 503 and b"briefly unavailable" in page.content
