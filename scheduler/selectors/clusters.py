"""Finding a cluster by what a person typed (its id or its name)."""

from __future__ import annotations

from typing import Any

from django.contrib.postgres.aggregates import ArrayAgg
from django.db.models import Q, Value

from config.errors import ApplicationError, ValidationFailed
from config.text import is_id_text
from scheduler.models import Cluster


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
    clusters = Cluster.objects.all()
    if with_host_sizes:
        clusters = clusters.annotate(
            host_sizes=ArrayAgg("hosts__gpus", filter=Q(hosts__isnull=False), default=Value([]))
        )
    if isinstance(value, str):
        cluster = clusters.filter(name=value).first()
        if cluster is None and is_id_text(value):
            cluster = clusters.filter(pk=int(value)).first()
    else:
        cluster = clusters.filter(pk=value).first()
    if cluster is None:
        names = ", ".join(Cluster.objects.values_list("name", flat=True)[:20]) or "none yet"
        raise missing(f"There is no cluster {value!r} (clusters: {names}).", field=field)
    return cluster


def cluster_list() -> list[Cluster]:
    """Every cluster, by name."""
    return list(Cluster.objects.order_by("name"))
