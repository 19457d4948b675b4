"""Each test database is a copy of one migrated template (`CREATE DATABASE ... TEMPLATE`)
instead of migrating it again: under `make test` every xdist worker migrated its own
database at the same time, four times the same ~10 CPU-seconds of Django and PostgreSQL
work on two cores, before any of them could run a database test.

The template is named after the test database and a digest of every migration file of
every installed app (`test_<name>_template_<digest>`): a changed, added or removed
migration, or another Django, gives another name, so a template is never out of date; it
is kept for the next run (as `--reuse-db` keeps a test database), and a template of the
same name with another digest is dropped when a new one is made. The first worker to
need it builds it (migrated under another name, then renamed, so no run ever copies a
half-migrated one) while the others wait on a file lock; each then copies it in well
under a second. pytest-django's `migrate` still runs on the copy (nothing left to apply,
the post_migrate handlers as before), so the database a test sees is the one a fresh
migration makes. A plugin of tests/conftest.py (`django_db_modify_db_settings`)."""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import importlib
import os
import tempfile
from pathlib import Path

from django.apps import apps
from django.core.management import call_command
from django.db import DatabaseError
from django.db.migrations.loader import MigrationLoader

TEMPLATE_KEY = "TEMPLATE"
NAME_LIMIT = 63  # PostgreSQL's identifiers


def migrations_digest() -> str:
    """A digest of the migration files of every installed app (path within the app and
    content), the project's and Django's and the libraries' alike."""
    digest = hashlib.sha256()
    for app in sorted(apps.get_app_configs(), key=lambda a: a.label):
        module, _ = MigrationLoader.migrations_module(app.label)
        try:
            folders = getattr(importlib.import_module(module), "__path__", []) if module else []
        except ImportError:  # an app without migrations (a module is not a package of them)
            folders = []
        for path in sorted(p for folder in folders for p in Path(folder).glob("*.py")):
            digest.update(f"{app.label}/{path.name}\n".encode())
            digest.update(path.read_bytes())
    return digest.hexdigest()[:12]


def template_name(connection) -> str:
    base = f"test_{connection.settings_dict['NAME']}_template_"
    return base[: NAME_LIMIT - 12] + migrations_digest()


def _exists(cursor, name: str) -> bool:
    cursor.execute("SELECT 1 FROM pg_database WHERE datname = %s", [name])
    return cursor.fetchone() is not None


def _migrate_into(connection, name: str) -> None:
    """Run the migrations (as `create_test_db` runs them) on database `name`."""
    saved = connection.settings_dict["NAME"]
    connection.close()
    connection.settings_dict["NAME"] = name
    try:
        call_command(
            "migrate", verbosity=0, interactive=False, database=connection.alias, run_syncdb=True
        )
    finally:
        connection.close()
        connection.settings_dict["NAME"] = saved


def _build(connection, name: str) -> None:
    """Make template `name`: migrated under a name of its own, then renamed; older
    templates of this test database dropped."""
    quote = connection.ops.quote_name
    building = f"{name[: NAME_LIMIT - 10]}_b{os.getpid() % 10**8}"
    with connection.creation._nodb_cursor() as cursor:
        cursor.execute(f"DROP DATABASE IF EXISTS {quote(building)}")
        cursor.execute(f"CREATE DATABASE {quote(building)}")
    try:
        _migrate_into(connection, name=building)
        with connection.creation._nodb_cursor() as cursor:
            cursor.execute(f"ALTER DATABASE {quote(building)} RENAME TO {quote(name)}")
    except BaseException:
        with connection.creation._nodb_cursor() as cursor:
            cursor.execute(f"DROP DATABASE IF EXISTS {quote(building)}")
        raise
    _drop_older(connection, name)


def _drop_older(connection, name: str) -> None:
    """Drop the templates of this test database with another digest (one in use by a
    copy being made elsewhere stays: it is dropped next time)."""
    prefix = name[:-12]
    with connection.creation._nodb_cursor() as cursor:
        cursor.execute(
            "SELECT datname FROM pg_database WHERE left(datname, %s) = %s AND datname <> %s",
            [len(prefix), prefix, name],
        )
        for (old,) in cursor.fetchall():
            if len(old) == len(name):
                with contextlib.suppress(DatabaseError):  # in use: left for the next run
                    cursor.execute(f"DROP DATABASE IF EXISTS {connection.ops.quote_name(old)}")


def use_template(connection) -> str | None:
    """Make sure the migrated template exists and have the test database copied from it
    (PostgreSQL only); its name, or None where the database is another or
    ALLOT_TEST_DB_TEMPLATE=0 asks for a migration of each test database, as before."""
    if connection.vendor != "postgresql" or os.environ.get("ALLOT_TEST_DB_TEMPLATE") == "0":
        return None
    name = template_name(connection)
    lock = Path(tempfile.gettempdir()) / f"allot-{name}.lock"
    with lock.open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)  # one builder; the other workers wait for it
        try:
            with connection.creation._nodb_cursor() as cursor:
                missing = not _exists(cursor, name)
            if missing:
                _build(connection, name)
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)
    connection.settings_dict["TEST"][TEMPLATE_KEY] = name
    return name
