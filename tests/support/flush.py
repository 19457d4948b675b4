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
tests/conftest.py; `tests/test_flush.py` checks that every table ends empty.

The content types and permissions: the flush emptied them and post_migrate wrote the
same rows back (under new ids), 0.06 CPU-s and 0.15-0.2 s of each transactional test's
teardown. Where both tables hold exactly the rows the last post_migrate wrote (a digest
of every row, ids included) they are kept and post_migrate is not sent: the end state is
the one the flush made, the same rows. A test that changed them gets the whole flush,
as does a flush asked to send no post_migrate (it empties every table)."""

from __future__ import annotations

import pytest
from django.core.management.commands import flush
from django.core.management.sql import emit_post_migrate_signal
from django.core.management.sql import sql_flush as truncate_all
from django.db import connections

# Rows only post_migrate writes (create_contenttypes, create_permissions).
WRITTEN_BACK = ("django_content_type", "auth_permission")
REPLICA = "SET LOCAL session_replication_role = replica"


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
    return [REPLICA] + [f"DELETE FROM {quote(table)}" for table in tables]


def written_back_digest(connection) -> str:
    """One digest of every row (ids included) of the tables post_migrate writes."""
    quote = connection.ops.quote_name
    parts = ", ".join(
        f"(SELECT md5(coalesce(string_agg(t::text, E'\\n' ORDER BY t.id), '')) FROM {quote(table)} t)"
        for table in WRITTEN_BACK
    )
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT ARRAY[{parts}]")
        return repr(cursor.fetchone()[0])


class KeepWrittenBack:
    """The flush command's `sql_flush` and `emit_post_migrate_signal` for the tests: the
    DELETEs of `delete_all`, less those of WRITTEN_BACK and the post_migrate signal when
    those tables hold what the last post_migrate wrote and the flush may send it."""

    def __init__(self) -> None:
        self.written: dict[str, str] = {}  # database alias -> digest after post_migrate
        self.may_keep = False  # the flush command running sends post_migrate
        self.kept = False  # this flush kept the tables: no post_migrate

    def handle(self, original):
        def handle(command, *args, **options):
            self.may_keep = not options.get("inhibit_post_migrate", False)
            try:
                return original(command, *args, **options)
            finally:
                self.may_keep = self.kept = False

        return handle

    def sql_flush(self, style, connection, reset_sequences=True, allow_cascade=False):
        statements = delete_all(style, connection, reset_sequences, allow_cascade)
        self.kept = (
            self.may_keep
            and statements[:1] == [REPLICA]
            and connection.alias in self.written
            and written_back_digest(connection) == self.written[connection.alias]
        )
        if not self.kept:
            return statements
        kept = {f"DELETE FROM {connection.ops.quote_name(table)}" for table in WRITTEN_BACK}
        return [s for s in statements if s not in kept]

    def emit_post_migrate_signal(self, verbosity, interactive, database, **kwargs):
        if self.kept:
            return
        emit_post_migrate_signal(verbosity, interactive, database, **kwargs)
        self.written[database] = written_back_digest(connections[database])


@pytest.fixture(autouse=True, scope="session")
def _flush_with_delete():
    keep = KeepWrittenBack()
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(flush, "sql_flush", keep.sql_flush)
        patch.setattr(flush, "emit_post_migrate_signal", keep.emit_post_migrate_signal)
        patch.setattr(flush.Command, "handle", keep.handle(flush.Command.handle))
        yield
