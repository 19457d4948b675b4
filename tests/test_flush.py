"""The flush that ends each transactional test (tests/support/flush.py) leaves every
table empty, the audited (append-only) ones included, as Django's TRUNCATE did; then the
content types and permissions are written back, or kept where they are what
post_migrate wrote."""

import pytest
from django.contrib.auth.models import Permission
from django.contrib.contenttypes.models import ContentType
from django.core.management import call_command
from django.core.management.color import no_style
from django.db import connection

from ops.dbroles import audited_tables
from tests.factories import ClusterFactory
from tests.support.flush import WRITTEN_BACK, delete_all
from tests.support.tree import example_tree

pytestmark = pytest.mark.django_db(transaction=True)


def non_empty_tables() -> set[str]:
    tables = connection.introspection.django_table_names(only_existing=True, include_views=False)
    quote = connection.ops.quote_name
    with connection.cursor() as cursor:
        cursor.execute(
            " UNION ALL ".join(f"SELECT %s, EXISTS (SELECT 1 FROM {quote(t)})" for t in tables),
            tables,
        )
        return {table for table, rows in cursor.fetchall() if rows}


def test_the_flush_empties_every_table_the_audited_ones_too():
    example_tree()  # budget events (append-only) and the row history of nodes
    ClusterFactory(name="gpu", host_count=2, gpus_per_host=8)
    before = non_empty_tables()
    assert before & set(audited_tables()), before  # the triggers would refuse a DELETE
    statements = delete_all(no_style(), connection, reset_sequences=False)
    assert not any(s.startswith("TRUNCATE") for s in statements)  # the DELETEs run here
    call_command(
        "flush", verbosity=0, interactive=False, reset_sequences=False,
        allow_cascade=False, inhibit_post_migrate=True,
    )  # fmt: skip
    assert non_empty_tables() == set()
    call_command("flush", verbosity=0, interactive=False, reset_sequences=False)
    assert ContentType.objects.filter(app_label="budgets").exists()  # written back


def _flush() -> None:
    call_command("flush", verbosity=0, interactive=False, reset_sequences=False)


def written_back() -> list[tuple]:
    return [
        *ContentType.objects.order_by("pk").values_list(),
        *Permission.objects.order_by("pk").values_list(),
    ]


def test_the_written_back_rows_are_kept_only_while_they_are_what_post_migrate_wrote():
    _flush()  # post_migrate wrote them (or they are what it last wrote)
    rows = written_back()
    example_tree()
    _flush()
    assert non_empty_tables() == set(WRITTEN_BACK)
    assert written_back() == rows  # kept as they were: the same rows, the same ids
    extra = Permission.objects.create(
        codename="extra", name="extra", content_type=ContentType.objects.first()
    )
    ContentType.objects.create(app_label="gone", model="gone")
    _flush()  # changed by the test: emptied, and post_migrate writes them back
    assert non_empty_tables() == set(WRITTEN_BACK)
    assert not Permission.objects.filter(pk=extra.pk).exists()
    assert not ContentType.objects.filter(app_label="gone").exists()
    assert natural(written_back()) == natural(rows)  # new ids, the rows post_migrate writes


def natural(rows: list[tuple]) -> list[tuple]:
    """The rows without their ids (a permission by its content type's app and model)."""
    types = {row[0]: row[1:] for row in rows if len(row) == 3}
    return sorted(row[1:] if len(row) == 3 else (row[1], row[3], *types[row[2]]) for row in rows)
