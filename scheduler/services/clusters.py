"""Adding clusters (`manage.py cluster_add`): validate, provision, store with the hosts.

Provisioning is per adapter kind (`PROVISIONERS`): it talks to the cluster (outside any
database transaction) and returns the hosts the cluster has. For a simulated cluster
that means creating the cluster in the simulated cluster process (idempotent: the same
name and shape is the same cluster); a Slurm cluster imports its nodes.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from django.db import IntegrityError, transaction
from django.utils import timezone

from config.errors import ApplicationError, Conflict, PermissionDenied, ValidationFailed
from scheduler.adapters.base import AdapterError, AdapterUnavailable, ClusterHost
from scheduler.models import HOUR_S, AdapterKind, Cluster, Host, HostHealth

NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$")
MAX_HOSTS = 4096
MAX_GPUS_PER_HOST = 1024
MAX_SPEED = 1e6
DAY_S = 86400


class ClusterUnreachable(ApplicationError):
    """The cluster (or the simulated cluster process) could not be reached."""

    status_code = 503
    code = "cluster_unreachable"


@dataclass(frozen=True)
class ClusterDraft:
    """A validated cluster about to be provisioned and stored."""

    name: str
    adapter: str
    host_count: int | None
    gpus_per_host: int | None
    adapter_url: str
    adapter_options: dict[str, Any] = field(default_factory=dict)
    reset: bool = False  # forget what the cluster runs (a simulated cluster's jobs)


def _provision_simulated(draft: ClusterDraft) -> list[ClusterHost]:
    """Create the cluster in the simulated cluster process; its hosts."""
    from scheduler.adapters.simulated import SimulatedClusterAdapter, registration_for
    from scheduler.simcluster import configured_url

    if draft.host_count is None:
        raise ValidationFailed("hosts: required for a simulated cluster", field="hosts")
    if draft.gpus_per_host is None:
        raise ValidationFailed(
            "gpus_per_host: required for a simulated cluster", field="gpus_per_host"
        )
    url = draft.adapter_url or configured_url()
    adapter = SimulatedClusterAdapter(
        base_url=url,
        cluster=draft.name,
        timeout_s=float(draft.adapter_options.get("timeout_s", 5.0)),
        registration=registration_for(draft),
    )
    try:
        if draft.reset:
            adapter.delete_cluster()
        hosts = adapter.ensure_cluster()
        orphans = [j for j in adapter.jobs() if j.attempt_id and not j.ended]
        if orphans:
            raise Conflict(
                f"name: the simulated cluster {draft.name!r} at {url} still runs "
                f"{len(orphans)} jobs started by another Allot database (attempt "
                f"{orphans[0].attempt_id}, ...): reset it to start it empty",
                field="name",
            )
        return hosts
    except AdapterUnavailable as exc:
        raise ClusterUnreachable(
            f"the simulated cluster process at {url} is not reachable ({exc}); start it with "
            "'python -m scheduler.simcluster serve' (make run starts it) or pass its URL",
            field="adapter_url",
        ) from None
    except AdapterError as exc:
        raise Conflict(str(exc), field="name") from None
    finally:
        adapter.close()


def _provision_slurm(draft: ClusterDraft) -> list[ClusterHost]:
    """The nodes of a Slurm cluster (scheduler.services.slurm)."""
    from scheduler.services.slurm import slurm_provision

    return slurm_provision(draft)


# Adapter kind -> provisioner. The Slurm adapter registers its own (nodes from Slurm).
PROVISIONERS: dict[str, Callable[[ClusterDraft], list[ClusterHost]]] = {
    AdapterKind.SIMULATED: _provision_simulated,
    AdapterKind.SLURM: _provision_slurm,
}


def _integer(value: Any, *, field: str, low: int, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValidationFailed(f"{field}: must be a whole number, got {value!r}", field=field)
    if not low <= value <= high:
        raise ValidationFailed(
            f"{field}: must be between {low} and {high}, got {value}", field=field
        )
    return value


def _clean_url(url: str) -> str:
    url = (url or "").strip()
    if url:
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValidationFailed(
                f"adapter_url: must be an http(s)://host:port URL, got {url!r}", field="adapter_url"
            )
    return url.rstrip("/")


def _check_actor(actor) -> None:
    if actor is not None and not (actor.is_superuser or actor.is_staff):
        raise PermissionDenied("only staff may add clusters")


def cluster_create(
    *,
    name: str,
    adapter: str = AdapterKind.SIMULATED,
    hosts: int | None = None,
    gpus_per_host: int | None = 8,
    speed: float | None = None,
    cycle_s: int = 10,
    grace_s: int = 30,
    max_min_runtime_s: int = 8 * HOUR_S,
    short_reserve_hosts: int = 0,
    short_job_max_s: int = 15 * 60,
    adapter_url: str = "",
    adapter_options: Mapping[str, Any] | None = None,
    reset: bool = False,
    actor=None,
) -> Cluster:
    """Add a cluster and its hosts. `actor` None is the system (a management command);
    a person must be staff. `speed` (simulated seconds per wall second) is for
    simulated clusters; a blank `adapter_url` means the configured simulated cluster
    (`ALLOT_SIMCLUSTER_URL`). `reset` empties a simulated cluster the process already
    has (a cluster that still runs jobs of another Allot database is refused without
    it). `short_reserve_hosts` hosts are held for jobs protected for at most
    `short_job_max_s` (the engine's short-job reserve). Raises ValidationFailed (field
    named), Conflict (the name
    is taken), PermissionDenied, ClusterUnreachable."""
    _check_actor(actor)
    name = (name or "").strip() if isinstance(name, str) else name
    if not isinstance(name, str) or not NAME_RE.match(name):
        raise ValidationFailed(
            f"name: letters, digits, '.', '_' or '-' (starting with a letter or digit), "
            f"at most 100 characters, got {name!r}",
            field="name",
        )
    if adapter not in AdapterKind.values:
        raise ValidationFailed(
            f"adapter: must be one of {', '.join(AdapterKind.values)}, got {adapter!r}",
            field="adapter",
        )
    provision = PROVISIONERS.get(adapter)
    if provision is None:
        raise ValidationFailed(
            f"adapter: clusters of kind {adapter!r} cannot be added yet", field="adapter"
        )
    if hosts is not None:
        _integer(hosts, field="hosts", low=1, high=MAX_HOSTS)
    if gpus_per_host is not None:
        _integer(gpus_per_host, field="gpus_per_host", low=1, high=MAX_GPUS_PER_HOST)
    options = dict(adapter_options or {})
    if speed is not None:
        if adapter != AdapterKind.SIMULATED:
            raise ValidationFailed(
                "speed: only simulated clusters have a clock speed", field="speed"
            )
        if (
            isinstance(speed, bool)
            or not isinstance(speed, int | float)
            or not 0 < speed <= MAX_SPEED
        ):
            raise ValidationFailed(
                f"speed: must be a number > 0 and <= {MAX_SPEED:g}, got {speed!r}", field="speed"
            )
        options["speed"] = float(speed)
    _integer(cycle_s, field="cycle_s", low=1, high=DAY_S)
    _integer(grace_s, field="grace_s", low=0, high=DAY_S)
    _integer(max_min_runtime_s, field="max_min_runtime_s", low=1, high=30 * DAY_S)
    _integer(short_reserve_hosts, field="short_reserve_hosts", low=0, high=MAX_HOSTS)
    _integer(short_job_max_s, field="short_job_max_s", low=1, high=max_min_runtime_s)
    if Cluster.objects.filter(name=name).exists():
        raise Conflict(f"name: a cluster named {name!r} already exists", field="name")

    draft = ClusterDraft(
        name=name,
        adapter=adapter,
        host_count=hosts,
        gpus_per_host=gpus_per_host,
        adapter_url=_clean_url(adapter_url),
        adapter_options=options,
        reset=reset,
    )
    cluster_hosts = provision(draft)  # cluster I/O, outside the transaction
    policy = {
        "cycle_s": cycle_s,
        "grace_s": grace_s,
        "max_min_runtime_s": max_min_runtime_s,
        "short_reserve_hosts": short_reserve_hosts,
        "short_job_max_s": short_job_max_s,
    }
    return _store(draft, cluster_hosts, policy)


def _store(
    draft: ClusterDraft, cluster_hosts: list[ClusterHost], policy: dict[str, int]
) -> Cluster:
    if not cluster_hosts:
        raise ValidationFailed("hosts: the cluster has no hosts", field="hosts")
    now = timezone.now()
    try:
        with transaction.atomic():
            cluster = Cluster.objects.create(
                name=draft.name,
                adapter=draft.adapter,
                host_count=len(cluster_hosts),
                gpus_per_host=max(h.gpus for h in cluster_hosts),
                adapter_url=draft.adapter_url,
                adapter_options=draft.adapter_options,
                created_at=now,
                **policy,
            )
            Host.objects.bulk_create(
                Host(
                    cluster=cluster,
                    name=h.name,
                    gpus=h.gpus,
                    health=HostHealth(str(h.health)),
                    health_reason=h.reason[:500],
                    health_changed_at=now,
                )
                for h in cluster_hosts
            )
    except IntegrityError:
        raise Conflict(
            f"name: a cluster named {draft.name!r} already exists", field="name"
        ) from None
    return cluster
