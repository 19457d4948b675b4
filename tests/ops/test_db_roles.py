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


@pytest.fixture(scope="module")
def roles_database():
    """A database made by deploy/postgres/roles.sql, migrated as the owner and written to
    by the application as the runtime role: (owner, app, dbname); dropped after."""
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
        _manage(_url(owner, dbname), "migrate", "--noinput", ALLOT_DB_RUNTIME_ROLE=app)
        # the application's own writes work as the runtime role (tree, weight change, history)
        assert "wrote 40" in _manage(_url(app, dbname), "shell", "-c", APP_WRITES)
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
        # (both formats pgtrigger has used: the trigger's name, and table:name)
        conn.execute(
            "SET pgtrigger.ignore = '{" + trigger + ",budgets_budgetevent:" + trigger + "}'"
        )
        assert "permission denied" in _refused(conn, "UPDATE budgets_budgetevent SET reason = 'x'")
        assert "permission denied" in _refused(conn, "SET session_replication_role = replica")
        assert "permission denied" in _refused(conn, "CREATE TABLE public.sneaky (id int)")
        assert "permission denied" in _refused(conn, "DELETE FROM django_migrations")
        assert _audit(conn) == before
        # what it may do: change the rows the application changes
        conn.execute("UPDATE budgets_budgetnode SET weight = weight WHERE name = 'a1'")


# the row-history triggers behind the audit of authority, budget nodes and memberships:
# (tracked table, history table)
HISTORY = (
    ("auth_user", "accounts_userauthorityevent"),
    ("budgets_budgetnode", "budgets_budgetnodeevent"),
    ("budgets_membership", "budgets_membershipevent"),
)
# one change of each tracked table that its history trigger records
TRACKED_CHANGES = {
    "auth_user": "UPDATE auth_user SET is_superuser = NOT is_superuser WHERE username = 'ann'",
    "budgets_budgetnode": "UPDATE budgets_budgetnode SET weight = weight + 1 WHERE name = 'b1'",
    "budgets_membership": (
        "UPDATE budgets_membership SET role = CASE role WHEN 'member' THEN 'manager' "
        "ELSE 'member' END WHERE user_id = (SELECT id FROM auth_user WHERE username = 'bob')"
    ),
}


def _count(conn: psycopg.Connection, table: str) -> int:
    return conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0]


def _trigger_names(conn: psycopg.Connection, table: str) -> list[str]:
    rows = conn.execute(
        "SELECT tgname FROM pg_trigger WHERE tgrelid = %s::regclass AND NOT tgisinternal",
        [table],
    ).fetchall()
    return [row[0] for row in rows]


@pytest.mark.parametrize(("tracked", "history"), HISTORY)
def test_the_runtime_role_cannot_skip_a_history_trigger_with_pgtrigger_ignore(
    roles_database, tracked, history
):
    """Issue 30/32: `SET LOCAL pgtrigger.ignore` named the history trigger and the change
    went unrecorded (a user made superuser with no authority event). Now the setting is
    honoured for the owner of the tables only: the change is recorded all the same."""
    owner, app, dbname = roles_database
    with psycopg.connect(_url(app, dbname)) as conn:
        names = _trigger_names(conn, tracked)
        assert names, f"no trigger on {tracked}"
        ignored = ",".join(names + [f"{tracked}:{name}" for name in names])
        before = _count(conn, history)
        with conn.transaction():
            conn.execute("SELECT set_config('pgtrigger.ignore', %s, true)", ["{" + ignored + "}"])
            changed = conn.execute(TRACKED_CHANGES[tracked]).rowcount
        assert changed == 1
        assert _count(conn, history) == before + 1, f"{tracked} changed without a {history} row"


def test_the_owner_may_still_ask_pgtrigger_to_skip_a_trigger(roles_database):
    """pgtrigger.ignore keeps working for the role that owns the tables (migrations)."""
    owner, app, dbname = roles_database
    with psycopg.connect(_url(owner, dbname)) as conn:
        names = _trigger_names(conn, "budgets_budgetnode")
        before = _count(conn, "budgets_budgetnodeevent")
        with conn.transaction():
            conn.execute(
                "SELECT set_config('pgtrigger.ignore', %s, true)", ["{" + ",".join(names) + "}"]
            )
            conn.execute(TRACKED_CHANGES["budgets_budgetnode"])
        assert _count(conn, "budgets_budgetnodeevent") == before


def test_the_runtime_role_cannot_shadow_a_history_table_with_a_temporary_one(roles_database):
    """The history triggers insert into their table by its unqualified name, and a session's
    temporary table of that name comes first: the runtime role may not create one."""
    owner, app, dbname = roles_database
    with psycopg.connect(_url(app, dbname)) as conn:
        conn.autocommit = True
        before = _count(conn, "public.accounts_userauthorityevent")
        try:
            conn.execute(
                "CREATE TEMPORARY TABLE accounts_userauthorityevent "
                "(LIKE public.accounts_userauthorityevent INCLUDING ALL)"
            )
        except errors.InsufficientPrivilege as refused:
            assert "temporary" in str(refused)
        conn.execute(TRACKED_CHANGES["auth_user"])
        assert _count(conn, "public.accounts_userauthorityevent") == before + 1


CONTEXT_WRITES = """
import pghistory
from budgets.models import BudgetNode
node = BudgetNode.objects.get(name="a2")
with pghistory.context(actor="ceo", reason="first") as context:
    node.weight += 1
    node.save()
    pghistory.context(ticket="T-1")  # pghistory adds to the context: an upsert of its row
    node.weight += 1
    node.save()
print("context", context.id)
"""


def test_the_runtime_role_cannot_delete_or_rewrite_history_context(roles_database):
    """pghistory_context holds who made each recorded change of nodes, memberships and
    authority: the runtime role adds rows and adds keys to a row's metadata (as pghistory
    does), and can neither delete a row nor change what it says."""
    owner, app, dbname = roles_database
    out = _manage(_url(app, dbname), "shell", "-c", CONTEXT_WRITES)
    context_id = out.split("context ", 1)[1].split()[0]
    with psycopg.connect(_url(app, dbname)) as conn:
        conn.autocommit = True
        metadata = conn.execute(
            "SELECT metadata FROM pghistory_context WHERE id = %s", [context_id]
        ).fetchone()[0]
        assert metadata == {"actor": "ceo", "reason": "first", "ticket": "T-1"}
        assert (
            conn.execute(
                "SELECT count(*) FROM budgets_budgetnodeevent WHERE pgh_context_id = %s",
                [context_id],
            ).fetchone()[0]
            == 2
        )
        before = conn.execute("SELECT id, metadata FROM pghistory_context ORDER BY id").fetchall()
        assert _refused(conn, "DELETE FROM pghistory_context")
        assert _refused(conn, "TRUNCATE pghistory_context")
        assert _refused(
            conn,
            "UPDATE pghistory_context SET metadata = jsonb_set(metadata, '{actor}', '\"nobody\"')",
        )
        assert _refused(conn, "UPDATE pghistory_context SET metadata = '{}'")
        assert _refused(conn, "UPDATE pghistory_context SET created_at = now()")
        assert _refused(
            conn, f"UPDATE pghistory_context SET id = gen_random_uuid() WHERE id = '{context_id}'"
        )
        # pgtrigger.ignore is no way around it either
        with pytest.raises(errors.InsufficientPrivilege), conn.transaction():
            conn.execute("SELECT set_config('pgtrigger.ignore', '{x}', true)")
            conn.execute("UPDATE pghistory_context SET metadata = '{}'")
        assert (
            conn.execute("SELECT id, metadata FROM pghistory_context ORDER BY id").fetchall()
            == before
        )
