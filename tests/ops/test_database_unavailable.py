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


def test_the_health_check_runs_no_statement_on_a_quiet_connection(monkeypatch):
    """A persistent connection that nothing happened to is usable without `SELECT 1`
    (a round trip on every request otherwise)."""
    from django.db import connections
    from django.db.backends.postgresql import base as django_postgresql

    connection.ensure_connection()
    assert type(connections["default"]).__module__ == "config.postgres.base"

    def select_one(self):
        raise AssertionError("the check ran a statement")

    monkeypatch.setattr(django_postgresql.DatabaseWrapper, "is_usable", select_one)
    assert connection.is_usable()


def test_the_health_check_finds_a_connection_the_server_closed():
    """PostgreSQL ended the connection's backend (as a restart or a failover does): the
    check says unusable, so the next request opens a new connection."""
    import time

    import psycopg

    connection.ensure_connection()
    pid = connection.connection.info.backend_pid
    with psycopg.connect(connection.connection.info.dsn, autocommit=True) as other:
        other.execute("SELECT pg_terminate_backend(%s)", [pid])
    deadline = time.monotonic() + 5
    while connection.is_usable() and time.monotonic() < deadline:
        time.sleep(0.01)  # the server's goodbye reaches the socket
    assert not connection.is_usable()
    connection.close()
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1")
        assert cursor.fetchone() == (1,)


def test_the_health_check_asks_the_server_when_something_arrived(monkeypatch):
    """Anything on the socket of an idle connection (here a notification) makes the check
    ask the server with Django's `SELECT 1`; the connection stays usable."""
    import select

    import psycopg
    from django.db.backends.postgresql import base as django_postgresql

    asked = []
    select_one = django_postgresql.DatabaseWrapper.is_usable
    monkeypatch.setattr(
        django_postgresql.DatabaseWrapper,
        "is_usable",
        lambda self: asked.append(1) or select_one(self),
    )

    connection.ensure_connection()
    connection.connection.execute("LISTEN allot_health_check_test")
    with psycopg.connect(connection.connection.info.dsn, autocommit=True) as other:
        other.execute("NOTIFY allot_health_check_test")
    select.select([connection.connection.pgconn.socket], [], [], 5)
    assert connection.is_usable() and asked == [1]
    connection.connection.execute("UNLISTEN *")
