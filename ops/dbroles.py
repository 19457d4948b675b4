"""The runtime database role's privileges, granted after every migration.

deploy/postgres/roles.sql creates two roles: the owner of the tables (migrations run as
it) and the runtime role the web and worker processes use. After each `migrate` run as
the owner with ALLOT_DB_RUNTIME_ROLE naming the runtime role (allot-migrate.service), this
gives the runtime role exactly what the application needs:

- SELECT, INSERT, UPDATE, DELETE on every table, except
- the audited tables (every model with an append-only `pgtrigger.Protect` trigger: budget
  and job events, host and cluster policy events, the row history of nodes, memberships
  and user authority): SELECT and INSERT only, so no UPDATE or DELETE reaches them;
- `pghistory_context` (who made each recorded change): SELECT, INSERT and UPDATE of
  `metadata` and `updated_at` only, for pghistory's upsert; its append-only trigger
  (ops/migrations/0002_history_context_append_only.py) lets an update only add keys
  to the metadata;
- `django_migrations`: SELECT only;
- USAGE, SELECT, UPDATE on the sequences;
and never TRUNCATE, REFERENCES or TRIGGER, nor TEMPORARY on the database: the history
triggers insert into their tables by unqualified name, which a temporary table of the same
name would shadow. Owning nothing, the role cannot disable, drop or replace a trigger or a
function.

pgtrigger.ignore: every pgtrigger trigger (the append-only ones and pghistory's row
history) first asks `_pgtrigger_should_ignore` whether the session setting
`pgtrigger.ignore` names it, and any role may set that. `install_guarded_ignore` replaces
pgtrigger's function with one that honours the setting only for a member of the
function's owner (the migration role, or a superuser), so the runtime role cannot skip a
trigger. Each trigger migration reinstalls pgtrigger's own version, so this runs after
every `migrate` (post_migrate), whether or not a runtime role is named.
tests/ops/test_db_roles.py tries each way around.
"""

from __future__ import annotations

import logging

import pgtrigger
from django.conf import settings
from django.db import connections
from pghistory.models import Context
from pgtrigger.core import _ignore_func_name

log = logging.getLogger(__name__)
MIGRATIONS_TABLE = "django_migrations"
HISTORY_CONTEXT_TABLE = Context._meta.db_table
# what pghistory's _pgh_attach_context upserts (ON CONFLICT (id) DO UPDATE SET ...)
HISTORY_CONTEXT_UPDATABLE = ("metadata", "updated_at")

# pgtrigger's ignore function (pgtrigger/compiler.py, same name and signature), with one
# more condition: a trigger is skipped only for a member of the function's owner.
GUARDED_IGNORE_SQL = """
CREATE OR REPLACE FUNCTION {name}(trigger_name NAME) RETURNS BOOLEAN AS $$
    DECLARE
        _pgtrigger_ignore TEXT[];
    BEGIN
        BEGIN
            SELECT INTO _pgtrigger_ignore CURRENT_SETTING('pgtrigger.ignore');
            EXCEPTION WHEN OTHERS THEN
        END;
        IF _pgtrigger_ignore IS NULL OR NOT (trigger_name = ANY(_pgtrigger_ignore)) THEN
            RETURN FALSE;
        END IF;
        -- the runtime role owns nothing: pgtrigger.ignore is the owner's (migrations') tool
        RETURN pg_has_role(
            current_user,
            (SELECT proowner FROM pg_proc WHERE oid = '{name}(name)'::regprocedure),
            'MEMBER'
        );
    END;
$$ LANGUAGE plpgsql;
"""


def install_guarded_ignore(*, using: str = "default") -> None:
    """Replace pgtrigger's `_pgtrigger_should_ignore` with the guarded version."""
    with connections[using].cursor() as cursor:
        cursor.execute(GUARDED_IGNORE_SQL.format(name=_ignore_func_name()))


def audited_tables() -> list[str]:
    """Tables the runtime role may read and add to but not rewrite: the models with an
    append-only trigger (UPDATE or DELETE refused), and pghistory's context table."""
    tables = {HISTORY_CONTEXT_TABLE}
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
        cursor.execute("SELECT current_database()")
        database = cursor.fetchone()[0]
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
        if table == HISTORY_CONTEXT_TABLE:
            columns = ", ".join(quote(column) for column in HISTORY_CONTEXT_UPDATABLE)
            statements.append(f"GRANT UPDATE ({columns}) ON TABLE {name} TO {grantee}")
    statements.append(f"GRANT USAGE, SELECT, UPDATE ON ALL SEQUENCES IN SCHEMA public TO {grantee}")
    # no temporary table may shadow a history table the triggers insert into by name
    for holder in (grantee, "PUBLIC"):
        statements.append(f"REVOKE TEMPORARY ON DATABASE {quote(database)} FROM {holder}")
    return statements


def grant_runtime_role(*, using: str = "default", **kwargs) -> None:
    """post_migrate: install the guarded pgtrigger.ignore check, then apply
    `runtime_grants` when ALLOT_DB_RUNTIME_ROLE is set."""
    if connections[using].vendor != "postgresql":
        return
    install_guarded_ignore(using=using)
    role = getattr(settings, "ALLOT_DB_RUNTIME_ROLE", "")
    if not role:
        return
    statements = runtime_grants(role, using=using)
    with connections[using].cursor() as cursor:
        for statement in statements:
            cursor.execute(statement)
    log.warning(
        "granted the runtime role %s its privileges on %d tables (%d audited: read and add only)",
        role,
        sum(statement.startswith("REVOKE ALL ON TABLE") for statement in statements),
        len(audited_tables()),
    )
