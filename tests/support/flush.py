"""The flush that ends every transactional test (`django_db(transaction=True)`, the
`live_server` tests): each table emptied with DELETE instead of one TRUNCATE of all of
them. The end state is the same, every table empty (the sequences go on, as with
pytest-django's default `reset_sequences=False`); then the flush command's post_migrate
signal writes the content types and permissions back, as before.

Why: TRUNCATE gives each of the ~40 tables and their indexes new files, synced at
commit; with the few rows a test writes that took 1.8-2.7 s per test on the shared
machine (a dozen test files of ~75 such tests), the DELETEs 0.02 s.

The DELETEs run with `session_replication_role = replica` (for that transaction only),
as TRUNCATE does not fire them either: no foreign-key check (tables are emptied in any
order), no append-only trigger (`pgtrigger.Protect` refuses a DELETE on the audited
tables), no row-history trigger (pghistory would write an event per deleted row).
That needs a superuser, as the test database's owner is under `make test`; another
user, or a flush that resets the sequences, keeps Django's TRUNCATE. A plugin of
tests/conftest.py; `tests/test_flush.py` checks that every table ends empty."""

from __future__ import annotations

import pytest
from django.core.management.commands import flush
from django.core.management.sql import sql_flush as truncate_all


def is_superuser(connection) -> bool:
    with connection.cursor() as cursor:
        cursor.execute("SELECT rolsuper FROM pg_roles WHERE rolname = current_user")
        row = cursor.fetchone()
    return bool(row and row[0])


def delete_all(style, connection, reset_sequences=True, allow_cascade=False) -> list[str]:
    """`sql_flush`'s statements: DELETE from every table where that empties them as
    TRUNCATE would, else Django's TRUNCATE."""
    if connection.vendor != "postgresql" or reset_sequences or not is_superuser(connection):
        return truncate_all(
            style, connection, reset_sequences=reset_sequences, allow_cascade=allow_cascade
        )
    tables = connection.introspection.django_table_names(only_existing=True, include_views=False)
    quote = connection.ops.quote_name
    return ["SET LOCAL session_replication_role = replica"] + [
        f"DELETE FROM {quote(table)}" for table in tables
    ]


@pytest.fixture(autouse=True, scope="session")
def _flush_with_delete():
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(flush, "sql_flush", delete_all)
        yield
