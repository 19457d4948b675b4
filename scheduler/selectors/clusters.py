"""Finding a cluster by what a person typed (its id or its name), and the counts every
surface shows of a cluster (`cluster_counts`: hosts and GPUs by health, jobs pending and
running; `gpus_in_use`: GPUs held per host), read by the API (`clusters/`, `hosts/`),
the CLI through it and the Now page (docs/concepts.md#now-page-figures)."""

from __future__ import annotations

import functools
from collections.abc import Iterable
from typing import Any

from django.db.models import Count, Q, Sum

from config.errors import ApplicationError, ValidationFailed
from config.plainsql import columns, fetch_all, fetch_one, instance
from config.text import is_id_text, refuse_control_characters
from scheduler.models import (
    ACTIVE_STATES,
    Attempt,
    AttemptState,
    Cluster,
    Host,
    HostHealth,
    Job,
    JobState,
)
from scheduler.selectors.queue import queue_seen_sql


def resolve_cluster(
    value: Any,
    *,
    field: str = "cluster",
    missing: type[ApplicationError] = ValidationFailed,
    with_host_sizes: bool = False,
    with_queue_seen: bool = False,
) -> Cluster:
    """A cluster by its id or its name; an unknown one raises `missing` (a 400 in a
    submission, a 404 where the cluster is what is read). `with_host_sizes` also reads
    its hosts' GPU counts (`cluster.host_sizes`) in the same query; `with_queue_seen`
    where its stored queue stands (`cluster.queue_seen`, for `stored_queue_seen`: a
    queue page then needs no statement of its own for the queue while this process
    holds that version)."""
    if isinstance(value, bool) or not isinstance(value, int | str) or value == "":
        raise ValidationFailed(f"{field} must be a cluster's id or name.", field=field)
    if isinstance(value, str):
        refuse_control_characters(value, field=field, multiline=False)  # a NUL: SQL refuses
    if with_host_sizes:
        find = _with_host_sizes
    else:
        find = functools.partial(_plain, queue_seen=with_queue_seen)
    if isinstance(value, str) and is_id_text(value) and not with_host_sizes:
        cluster = _plain_name_or_id(value, queue_seen=with_queue_seen)
    elif isinstance(value, str):
        cluster = find("name", value)
        if cluster is None and is_id_text(value):
            cluster = find("id", int(value))
    else:
        cluster = find("id", value)
    if cluster is None:
        names = ", ".join(Cluster.objects.values_list("name", flat=True)[:20]) or "none yet"
        raise missing(f"There is no cluster {value!r} (clusters: {names}).", field=field)
    return cluster


@functools.cache
def _select(queue_seen: bool) -> str:
    """The select list of a cluster's plain read, with where its stored queue stands."""
    seen = ", " + queue_seen_sql('c."id"') if queue_seen else ""
    return f'SELECT {columns(Cluster, "c")}{seen} FROM "{Cluster._meta.db_table}" c'


def _cluster(row: tuple, queue_seen: bool) -> Cluster:
    cluster, at = instance(Cluster, row)
    if queue_seen:
        cluster.queue_seen = row[at]
    return cluster


def _plain(column: str, value: Any, *, queue_seen: bool = False) -> Cluster | None:
    """The cluster whose `column` (id or name, both unique) is `value`, in one plain
    statement (config.plainsql: the queue and every cluster read ask)."""
    row = fetch_one(f'{_select(queue_seen)} WHERE c."{column}" = %s', [value])
    return None if row is None else _cluster(row, queue_seen)


def _plain_name_or_id(text: str, *, queue_seen: bool = False) -> Cluster | None:
    """The cluster named `text` (digits), else the one whose id it is, in one statement
    (the dashboards' chart requests name their cluster by id: two reads before)."""
    sql = f'{_select(queue_seen)} WHERE c."name" = %s OR c."id" = %s'
    ident = int(text) if int(text) < 2**63 else -1  # beyond bigint: no cluster has that id
    found = [_cluster(row, queue_seen) for row in fetch_all(sql, [text, ident])]
    return next((c for c in found if c.name == text), found[0] if found else None)


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


def cluster_counts(cluster_ids: Iterable[int]) -> dict[int, dict[str, int]]:
    """Per cluster id: `hosts`, `gpus`, `healthy_gpus` (GPUs of healthy hosts),
    `draining_hosts`, `down_hosts`, `pending_jobs`, `pending_gpus` (what the waiting jobs
    ask for) and `running_jobs` (starting, running or stopping). Two queries."""
    ids = list(cluster_ids)
    out = {
        pk: dict.fromkeys(
            ("hosts", "gpus", "healthy_gpus", "draining_hosts", "down_hosts", "pending_jobs",
             "pending_gpus", "running_jobs"),
            0,
        )
        for pk in ids
    }  # fmt: skip
    hosts = (
        Host.objects.filter(cluster_id__in=ids)
        .values("cluster_id")
        .annotate(
            n_hosts=Count("id"),
            n_gpus=Sum("gpus"),
            n_healthy_gpus=Sum("gpus", filter=Q(health=HostHealth.HEALTHY)),
            n_draining_hosts=Count("id", filter=Q(health=HostHealth.DRAINING)),
            n_down_hosts=Count("id", filter=Q(health=HostHealth.DOWN)),
        )
    )
    jobs = (
        Job.objects.filter(cluster_id__in=ids, state__in=[JobState.PENDING, *ACTIVE_STATES])
        .values("cluster_id")
        .annotate(
            n_pending_jobs=Count("id", filter=Q(state=JobState.PENDING)),
            n_pending_gpus=Sum("gpus", filter=Q(state=JobState.PENDING)),
            n_running_jobs=Count("id", filter=Q(state__in=ACTIVE_STATES)),
        )
    )
    for row in [*hosts, *jobs]:
        counts = out[row.pop("cluster_id")]
        counts.update({name.removeprefix("n_"): value or 0 for name, value in row.items()})
    return out


def gpus_in_use(hosts: Iterable[Host]) -> dict[tuple[int, str], int]:
    """GPUs held by open attempts, per (cluster id, host name) of the given hosts."""
    wanted = {(h.cluster_id, h.name) for h in hosts}
    if not wanted:
        return {}
    used: dict[tuple[int, str], int] = {}
    rows = (
        Attempt.objects.filter(cluster_id__in={c for c, _ in wanted})
        .exclude(state=AttemptState.ENDED)
        .values_list("cluster_id", "placements")
    )
    for cluster_id, placements in rows:
        for p in placements or []:
            key = (cluster_id, p.get("host"))
            if key in wanted:
                used[key] = used.get(key, 0) + len(p.get("gpu_indices", []))
    return used
