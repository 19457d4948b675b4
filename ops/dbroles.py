"""The runtime database role's privileges, granted after every migration.

deploy/postgres/roles.sql creates two roles: the owner of the tables (migrations run as
it) and the runtime role the web and worker processes use. After each `migrate` run as
the owner with ALLOT_DB_RUNTIME_ROLE naming the runtime role (allot-migrate.service), this
gives the runtime role exactly what the application needs:

- SELECT, INSERT, UPDATE, DELETE on every table, except
- the audited tables (every model with an append-only `pgtrigger.Protect` trigger: budget
  and job events, host and cluster policy events, the row history of nodes and
  memberships): SELECT and INSERT only, so no UPDATE or DELETE reaches them even where a
  session asks pgtrigger to ignore its triggers;
- `django_migrations`: SELECT only;
- USAGE, SELECT, UPDATE on the sequences;
and never TRUNCATE, REFERENCES or TRIGGER. Owning nothing, the role cannot disable, drop
or replace a trigger (tests/ops/test_db_roles.py tries each).
"""

from __future__ import annotations

import logging

import pgtrigger
from django.conf import settings
from django.db import connections

log = logging.getLogger(__name__)
MIGRATIONS_TABLE = "django_migrations"


def audited_tables() -> list[str]:
    """Tables of models with an append-only trigger (UPDATE or DELETE refused)."""
    tables = set()
    for model, trigger in pgtrigger.registered():
        operation = str(getattr(trigger, "operation", "")).upper()
        if isinstance(trigger, pgtrigger.Protect) and (
            "UPDATE" in operation or "DELETE" in operation
        ):
            tables.add(model._meta.db_table)
    return sorted(tables)


def runtime_grants(role: str, *, using: str = "default") -> list[str]:
    """The statements that give `role` its privileges on every table this connection's
    user owns in the current schema."""
    connection = connections[using]
    quote = connection.ops.quote_name
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
            "WHERE c.relkind IN ('r', 'p') AND n.nspname = current_schema() "
            "AND pg_get_userbyid(c.relowner) = current_user ORDER BY c.relname"
        )
        tables = [row[0] for row in cursor.fetchall()]
    audited = set(audited_tables())
    grantee = quote(role)
    statements = []
    for table in tables:
        name = quote(table)
        statements.append(f"REVOKE ALL ON TABLE {name} FROM {grantee}")
        if table == MIGRATIONS_TABLE:
            granted = "SELECT"
        elif table in audited:
            granted = "SELECT, INSERT"
        else:
            granted = "SELECT, INSERT, UPDATE, DELETE"
        statements.append(f"GRANT {granted} ON TABLE {name} TO {grantee}")
    statements.append(f"GRANT USAGE, SELECT, UPDATE ON ALL SEQUENCES IN SCHEMA public TO {grantee}")
    return statements


def grant_runtime_role(*, using: str = "default", **kwargs) -> None:
    """post_migrate: apply `runtime_grants` when ALLOT_DB_RUNTIME_ROLE is set."""
    role = getattr(settings, "ALLOT_DB_RUNTIME_ROLE", "")
    if not role:
        return
    statements = runtime_grants(role, using=using)
    with connections[using].cursor() as cursor:
        for statement in statements:
            cursor.execute(statement)
    log.warning(
        "granted the runtime role %s its privileges on %d tables (%d audited: read and insert only)",
        role,
        len(statements) // 2,
        len(audited_tables()),
    )
