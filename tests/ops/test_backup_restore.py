"""Backup and restore (README "Backup and restore"): pg_dump, then pg_restore into a
fresh database, keeps the audit history intact and still append-only."""

from __future__ import annotations

import importlib.util
import shutil
import subprocess
from pathlib import Path

import psycopg
import pytest
from django.db import connection

from budgets import services

pytestmark = pytest.mark.django_db(transaction=True)


def _tool(name: str, server_major: int) -> str | None:
    """A client tool at least as new as the server (pg_dump refuses older ones)."""
    candidates = [shutil.which(name)]
    spec = importlib.util.find_spec("pgserver")  # the embedded server's own tools
    if spec is not None and spec.origin:
        candidates.append(str(Path(spec.origin).parent / "pginstall" / "bin" / name))
    for path in filter(None, candidates):
        if not Path(path).exists():
            continue
        version = subprocess.run([path, "--version"], capture_output=True, text=True).stdout
        if int(version.split()[-1].split(".")[0]) >= server_major:
            return path
    return None


def _conninfo(dbname: str) -> str:
    params = connection.get_connection_params()
    params["dbname"] = dbname
    params.pop("cursor_factory", None)
    params.pop("context", None)
    return psycopg.conninfo.make_conninfo(
        **{k: v for k, v in params.items() if isinstance(v, str | int)}
    )


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
    pg_dump, pg_restore = _tool("pg_dump", server_major), _tool("pg_restore", server_major)
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
            f"--dbname={_conninfo(source)}",
        ],
        check=True,
        capture_output=True,
    )
    with psycopg.connect(_conninfo(source), autocommit=True) as admin:
        admin.execute(f'DROP DATABASE IF EXISTS "{restored}"')
        admin.execute(f'CREATE DATABASE "{restored}"')
    try:
        subprocess.run(
            [
                pg_restore,
                "--no-owner",
                "--exit-on-error",
                f"--dbname={_conninfo(restored)}",
                str(dump),
            ],
            check=True,
            capture_output=True,
        )
        with (
            psycopg.connect(_conninfo(source)) as before,
            psycopg.connect(_conninfo(restored)) as after,
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
                for statement in (f'UPDATE "{table}" SET id = id', f'DELETE FROM "{table}"'):
                    if not after.execute(f'SELECT 1 FROM "{table}" LIMIT 1').fetchone():
                        continue  # an empty table: the statement touches no row
                    with pytest.raises(psycopg.errors.RaiseException), after.transaction():
                        after.execute(statement)
            assert len(_audit_rows(after)) == len(_audit_rows(before))
    finally:
        with psycopg.connect(_conninfo(source), autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{restored}" WITH (FORCE)')
