"""The two database roles (deploy/postgres/roles.sql, ops/dbroles.py), on the real
PostgreSQL: migrations run as the owner, the application runs as the runtime role, and
the runtime role can neither disable the append-only triggers nor change audit rows."""

from __future__ import annotations

import os
import secrets
import shutil
import subprocess
import sys
from pathlib import Path

import psycopg
import pytest
from django.db import connection
from psycopg import errors

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.django_db(transaction=True)

APP_WRITES = """
from django.contrib.auth import get_user_model
from budgets import services
from budgets.models import BudgetNode
from tests.factories import EXAMPLE_TREE
services.budget_tree_import(data=EXAMPLE_TREE)
ceo = get_user_model().objects.get(username="ceo")
a1 = BudgetNode.objects.get(name="a1")
services.budget_change_create(actor=ceo, reason="Q4 review", changes=[{"node": a1.pk, "weight": 40}])
print("wrote", BudgetNode.objects.get(name="a1").weight)
"""


def _url(user: str, dbname: str) -> str:
    s = connection.settings_dict
    return f"postgresql://{user}@{s['HOST'] or '127.0.0.1'}:{s['PORT'] or 5432}/{dbname}"


def _manage(database_url: str, *args: str, **env: str) -> str:
    done = subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=ROOT,
        env={
            **os.environ,
            "DJANGO_SETTINGS_MODULE": "config.settings.test",
            "DATABASE_URL": database_url,
            **env,
        },
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


@pytest.fixture
def roles_database():
    """A database made by deploy/postgres/roles.sql: (owner, app, dbname); dropped after."""
    psql = shutil.which("psql")
    if psql is None:
        pytest.skip("psql (postgresql-client) is not installed")
    suffix = secrets.token_hex(3)
    owner, app, dbname = f"allot_owner_{suffix}", f"allot_app_{suffix}", f"allot_roles_{suffix}"
    admin = _url(connection.settings_dict["USER"], "postgres")
    subprocess.run(
        [psql, "--quiet", "--no-psqlrc", admin, "-f", str(ROOT / "deploy/postgres/roles.sql")]
        + ["-v", f"owner={owner}", "-v", "owner_password=owner-pw", "-v", f"app={app}"]
        + ["-v", "app_password=app-pw", "-v", f"dbname={dbname}"],
        check=True,
        capture_output=True,
    )
    try:
        yield owner, app, dbname
    finally:
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{dbname}" WITH (FORCE)')
            conn.execute(f'DROP ROLE IF EXISTS "{app}"')
            conn.execute(f'DROP ROLE IF EXISTS "{owner}"')


def _refused(conn: psycopg.Connection, statement: str) -> str:
    """Run `statement` as the runtime role; the error PostgreSQL refuses it with."""
    with pytest.raises(errors.InsufficientPrivilege) as refused, conn.transaction():
        conn.execute(statement)
    return str(refused.value)


def _audit(conn: psycopg.Connection) -> list[tuple]:
    return conn.execute(
        "SELECT e.id, e.kind, e.reason, i.node_path, i.old_weight, i.new_weight "
        "FROM budgets_budgetevent e JOIN budgets_budgeteventitem i ON i.event_id = e.id "
        "ORDER BY e.id, i.id"
    ).fetchall()


def test_the_runtime_role_cannot_disable_the_triggers_or_rewrite_audit_rows(roles_database):
    owner, app, dbname = roles_database
    _manage(_url(owner, dbname), "migrate", "--noinput", ALLOT_DB_RUNTIME_ROLE=app)
    # the application's own writes work as the runtime role (tree, weight change, history)
    assert "wrote 40" in _manage(_url(app, dbname), "shell", "-c", APP_WRITES)

    with psycopg.connect(_url(app, dbname)) as conn:
        conn.autocommit = True
        before = _audit(conn)
        assert [row[1] for row in before].count("applied") >= 1
        assert "must be owner" in _refused(
            conn, "ALTER TABLE budgets_budgetevent DISABLE TRIGGER USER"
        )
        assert "must be owner" in _refused(
            conn, "ALTER TABLE scheduler_jobevent DISABLE TRIGGER ALL"
        )
        trigger = conn.execute(
            "SELECT tgname FROM pg_trigger WHERE tgrelid = 'budgets_budgetevent'::regclass "
            "AND NOT tgisinternal"
        ).fetchone()[0]
        assert "must be owner" in _refused(conn, f"DROP TRIGGER {trigger} ON budgets_budgetevent")
        for table in ("budgets_budgetevent", "budgets_budgeteventitem", "budgets_budgetnodeevent"):
            assert "permission denied" in _refused(conn, f"UPDATE {table} SET id = id")
            assert "permission denied" in _refused(conn, f"DELETE FROM {table}")
            assert "permission denied" in _refused(conn, f"TRUNCATE {table}")
        # asking django-pgtrigger to skip the triggers does not help: no UPDATE privilege
        conn.execute("SET pgtrigger.ignore = '{budgets_budgetevent:" + trigger + "}'")
        assert "permission denied" in _refused(conn, "UPDATE budgets_budgetevent SET reason = 'x'")
        assert "permission denied" in _refused(conn, "SET session_replication_role = replica")
        assert "permission denied" in _refused(conn, "CREATE TABLE public.sneaky (id int)")
        assert "permission denied" in _refused(conn, "DELETE FROM django_migrations")
        assert _audit(conn) == before
        # what it may do: change the rows the application changes
        conn.execute("UPDATE budgets_budgetnode SET weight = weight WHERE name = 'a1'")
