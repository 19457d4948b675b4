"""Finding a cluster by what a person typed (its id or its name)."""

from __future__ import annotations

from typing import Any

from config.errors import ApplicationError, ValidationFailed
from config.plainsql import columns, fetch_all, fetch_one, instance
from config.text import is_id_text
from scheduler.models import Cluster, Host


def resolve_cluster(
    value: Any,
    *,
    field: str = "cluster",
    missing: type[ApplicationError] = ValidationFailed,
    with_host_sizes: bool = False,
) -> Cluster:
    """A cluster by its id or its name; an unknown one raises `missing` (a 400 in a
    submission, a 404 where the cluster is what is read). `with_host_sizes` also reads
    its hosts' GPU counts (`cluster.host_sizes`) in the same query."""
    if isinstance(value, bool) or not isinstance(value, int | str) or value == "":
        raise ValidationFailed(f"{field} must be a cluster's id or name.", field=field)
    find = _with_host_sizes if with_host_sizes else _plain
    if isinstance(value, str):
        cluster = find("name", value)
        if cluster is None and is_id_text(value):
            cluster = find("id", int(value))
    else:
        cluster = find("id", value)
    if cluster is None:
        names = ", ".join(Cluster.objects.values_list("name", flat=True)[:20]) or "none yet"
        raise missing(f"There is no cluster {value!r} (clusters: {names}).", field=field)
    return cluster


def _plain(column: str, value: Any) -> Cluster | None:
    """The cluster whose `column` (id or name, both unique) is `value`, in one plain
    statement (config.plainsql: the queue and every cluster read ask)."""
    sql = (
        f'SELECT {columns(Cluster, "c")} FROM "{Cluster._meta.db_table}" c WHERE c."{column}" = %s'
    )
    row = fetch_one(sql, [value])
    return None if row is None else instance(Cluster, row)[0]


_WITH_HOST_SIZES_SQL = """
    SELECT {columns}, ARRAY(SELECT h.gpus FROM {host} h WHERE h.cluster_id = c.id)
    FROM {cluster} c WHERE c.{column} = %s
"""


def _with_host_sizes(column: str, value: Any) -> Cluster | None:
    """The cluster with its hosts' GPU counts (`host_sizes`), in one plain statement
    (every submission reads it)."""
    sql = _WITH_HOST_SIZES_SQL.format(
        columns=columns(Cluster, "c"),
        host=Host._meta.db_table,
        cluster=Cluster._meta.db_table,
        column=column,
    )
    row = fetch_one(sql, [value])
    if row is None:
        return None
    cluster, at = instance(Cluster, row)
    cluster.host_sizes = row[at]
    return cluster


def cluster_list() -> list[Cluster]:
    """Every cluster, by name."""
    sql = f'SELECT {columns(Cluster, "c")} FROM "{Cluster._meta.db_table}" c ORDER BY c."name"'
    return [instance(Cluster, row)[0] for row in fetch_all(sql, [])]
