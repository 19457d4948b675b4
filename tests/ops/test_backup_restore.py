"""Backup and restore (docs/operations.md "Backup and restore"): pg_dump, then pg_restore into a
fresh database, keeps the audit history intact and still append-only."""

from __future__ import annotations

import subprocess

import psycopg
import pytest
from django.db import connection

from budgets import services
from tests.support.postgres import conninfo, pg_tool

pytestmark = pytest.mark.django_db(transaction=True)
# how the append-only triggers refuse: pgtrigger's Protect, and pghistory_context's
# (ops/migrations/0002_history_context_append_only.py)
REFUSED = (psycopg.errors.RaiseException, psycopg.errors.InsufficientPrivilege)


def _protected_tables(conn) -> list[str]:
    """Tables with an append-only trigger (django-pgtrigger's Protect, pghistory's)."""
    rows = conn.execute(
        "SELECT DISTINCT c.relname FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid "
        "WHERE NOT t.tgisinternal AND (t.tgname LIKE '%%append_only%%' OR t.tgname LIKE '%%protect%%')"
    ).fetchall()
    return sorted(r[0] for r in rows)


def _audit_rows(conn) -> list[tuple]:
    return conn.execute(
        "SELECT e.id, e.kind, e.actor_name, e.reason, e.tree_version, i.node_path, "
        "i.old_weight, i.new_weight FROM budgets_budgetevent e "
        "LEFT JOIN budgets_budgeteventitem i ON i.event_id = e.id ORDER BY e.id, i.id"
    ).fetchall()


def test_dump_and_restore_keep_the_audit_history_intact_and_append_only(tmp_path, tree):
    services.budget_change_create(
        actor=tree.user("ceo"),
        reason="Q4 review",
        changes=[{"node": tree.node("a1").pk, "weight": 40}],
    )
    services.membership_add(
        actor=tree.user("lead-a"), node_id=tree.node("a2").pk, username="ann", role="member"
    )
    server_major = connection.pg_version // 10000
    pg_dump, pg_restore = pg_tool("pg_dump", server_major), pg_tool("pg_restore", server_major)
    if not (pg_dump and pg_restore):
        pytest.skip(f"no pg_dump/pg_restore for PostgreSQL {server_major} on this machine")

    source = connection.settings_dict["NAME"]
    restored = f"{source}_restored"
    dump = tmp_path / "allot.dump"
    subprocess.run(
        [
            pg_dump,
            "--format=custom",
            "--no-owner",
            f"--file={dump}",
            f"--dbname={conninfo(source)}",
        ],
        check=True,
        capture_output=True,
    )
    with psycopg.connect(conninfo(source), autocommit=True) as admin:
        admin.execute(f'DROP DATABASE IF EXISTS "{restored}"')
        admin.execute(f'CREATE DATABASE "{restored}"')
    try:
        subprocess.run(
            [
                pg_restore,
                "--no-owner",
                "--exit-on-error",
                f"--dbname={conninfo(restored)}",
                str(dump),
            ],
            check=True,
            capture_output=True,
        )
        with (
            psycopg.connect(conninfo(source)) as before,
            psycopg.connect(conninfo(restored)) as after,
        ):
            assert _audit_rows(after) == _audit_rows(before)
            assert [r[1] for r in _audit_rows(after) if r[1] in ("applied", "role_granted")] == [
                "applied",
                "applied",  # a1 and a2 items of the Q4 review
                "role_granted",
            ]
            protected = _protected_tables(after)
            assert protected == _protected_tables(before)
            assert {"budgets_budgetevent", "budgets_budgeteventitem"} <= set(protected)
            for table in protected:
                (column,) = after.execute(
                    "SELECT column_name FROM information_schema.columns"
                    " WHERE table_name = %s ORDER BY ordinal_position LIMIT 1",
                    (table,),
                ).fetchone()  # `id`, or `pgh_id` for a history table
                rewrite = f'UPDATE "{table}" SET "{column}" = "{column}"'
                if table == "pghistory_context":  # its rows may gain metadata keys, no more
                    rewrite = "UPDATE pghistory_context SET metadata = '{}'"
                for statement in (
                    rewrite,
                    f'DELETE FROM "{table}"',
                ):
                    if not after.execute(f'SELECT 1 FROM "{table}" LIMIT 1').fetchone():
                        continue  # an empty table: the statement touches no row
                    with pytest.raises(REFUSED), after.transaction():
                        after.execute(statement)
            assert len(_audit_rows(after)) == len(_audit_rows(before))
    finally:
        with psycopg.connect(conninfo(source), autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{restored}" WITH (FORCE)')
