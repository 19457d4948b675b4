"""Model rows read with plain SQL, for the few statements every request runs.

Building and compiling an ORM query costs more CPU than PostgreSQL spends answering a
lookup by key (about 0.5-1 ms per statement in a web worker); the hot read paths (the
API token, the job a page or `GET /api/v1/jobs/{id}/` shows, its attempts) therefore
write their SQL once and turn rows into the same model instances the ORM would: every
concrete field, in `Model._meta` order, through each field's own database converters
(JSON, decimals, ...), so the objects behave exactly like `Model.objects.get()`'s.

    sql = f"SELECT {columns(Job, 'j')}, {columns(User, 'u')} FROM ... WHERE j.id = %s"
    row = fetch_one(sql, [pk])
    job, at = instance(Job, row, 0)
    user, _ = instance(User, row, at)
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Sequence
from typing import Any, TypeVar

from django.db import DEFAULT_DB_ALIAS, connection
from django.db.models import Model
from django.db.models.base import ModelState
from django.db.models.signals import post_init, pre_init
from psycopg.types.datetime import TimestamptzLoader

M = TypeVar("M", bound=Model)
Converter = Callable[[Any, Any, Any], Any]


@functools.cache
def columns(model: type[Model], alias: str) -> str:
    """The select list of `model`'s concrete fields, as `alias`."""
    return ", ".join(f'{alias}."{f.column}"' for f in model._meta.concrete_fields)


@functools.cache
def _layout(model: type[Model]) -> tuple[list[str], list[tuple[int, Any, list[Converter]]]]:
    """`model`'s attribute names in column order, and (position, field, converters) for
    each column whose database value needs converting."""
    fields = model._meta.concrete_fields
    converting = []
    for i, field in enumerate(fields):
        col = field.get_col(model._meta.db_table)
        found = connection.ops.get_db_converters(col) + col.get_db_converters(connection)
        if found:
            converting.append((i, col, found))
    return [f.attname for f in fields], converting


def instance(model: type[M], row: Sequence[Any], start: int = 0) -> tuple[M, int]:
    """The `model` instance in `row` from position `start` (its `columns`), and the
    position after it: what `Model.from_db` builds, with the values put in the
    instance's attributes at once rather than through `Model.__init__` (a setattr per
    field and two signals: most of the cost of the few objects a request reads); through
    `from_db` itself while anything listens to `pre_init` or `post_init`."""
    names, converting = _layout(model)
    end = start + len(names)
    values = list(row[start:end])
    for i, col, converters in converting:
        for convert in converters:
            values[i] = convert(values[i], col, connection)
    if pre_init.receivers or post_init.receivers:
        return model.from_db(DEFAULT_DB_ALIAS, names, values), end
    obj = model.__new__(model)
    obj.__dict__.update(zip(names, values, strict=True))
    obj._state = ModelState()
    obj._state.adding, obj._state.db = False, DEFAULT_DB_ALIAS
    return obj, end


def open_cursor(*, prepared: bool = False):
    """`connection.cursor()`; `prepared`: one whose statements are prepared once per
    connection and bound server-side (`config.postgres`: PostgreSQL parses and plans
    them once, not on every request; their SQL must name a type PostgreSQL cannot infer,
    `%s::jsonb`)."""
    if prepared and hasattr(connection, "prepared_cursor"):
        return connection.prepared_cursor()
    return connection.cursor()


def fetch_one(
    sql: str, params: Sequence[Any], *, native_times: bool = False, prepared: bool = False
) -> tuple | None:
    """The first row of `sql` (None without one); `native_times` and `prepared` as in
    `fetch_all`."""
    with open_cursor(prepared=prepared) as cursor:
        if native_times:
            cursor.cursor.adapters.register_loader("timestamptz", TimestamptzLoader)
        cursor.execute(sql, params)
        return cursor.fetchone()


def id_array(ids: Iterable[int]) -> str:
    """`ids` as one PostgreSQL array literal, for `= ANY(%s::bigint[])`: a single text
    parameter (psycopg quotes a list parameter element by element in Python: ~40 us for
    the 50 ids of a queue page, a third of the statement's CPU)."""
    return "{" + ",".join([str(int(i)) for i in ids]) + "}"


def next_ids(model: type[Model], count: int) -> list[int]:
    """`count` ids taken from `model`'s table sequence, ascending: the ids `count` inserts
    one by one would have taken, for rows created in bulk with their ids set."""
    sql = "SELECT nextval(pg_get_serial_sequence(%s, 'id')) FROM generate_series(1, %s) ORDER BY 1"
    return [row_id for (row_id,) in fetch_all(sql, [model._meta.db_table, count])]


def fetch_all(
    sql: str, params: Sequence[Any], *, native_times: bool = False, prepared: bool = False
) -> list[tuple]:
    """The rows of `sql`. `native_times`: timestamptz columns through psycopg's own (C)
    loader, not Django's (a Python subclass of psycopg's Python loader, some
    microseconds a value: most of reading 50 rows' times); the values are the same
    aware datetimes, in the connection's time zone (UTC, as Django sets it).
    `prepared`: prepared once per connection (`open_cursor`), for a statement every request
    of a kind runs."""
    with open_cursor(prepared=prepared) as cursor:
        if native_times:
            cursor.cursor.adapters.register_loader("timestamptz", TimestamptzLoader)
        cursor.execute(sql, params)
        return cursor.fetchall()
