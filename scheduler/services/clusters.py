"""Adding clusters (`manage.py cluster_add`) and changing their scheduling policy
(`manage.py cluster_set`, `PATCH /api/v1/clusters/{id}/`).

Adding: validate, provision, store with the hosts.
Provisioning is per adapter kind (`PROVISIONERS`): it talks to the cluster (outside any
database transaction) and returns the hosts the cluster has. For a simulated cluster
that means creating the cluster in the simulated cluster process (idempotent: the same
name and shape is the same cluster); a Slurm cluster imports its nodes.

The policy's rules (`POLICY_RULES`, `clean_policy`) are the same for both; a change is an
append-only `ClusterPolicyEvent` with the actor, the reason and each field's before and
after.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from django.contrib.auth import get_user_model
from django.db import IntegrityError, transaction
from django.utils import timezone

from budgets import permissions
from config.errors import (
    Conflict,
    NotFound,
    PermissionDenied,
    ValidationFailed,
)
from config.text import clean_reason
from scheduler.adapters.base import AdapterError, AdapterUnavailable, ClusterHost
from scheduler.adapters.simcluster import configured_url
from scheduler.adapters.simulated import SimulatedClusterAdapter, registration_for
from scheduler.cycle_requests import request_cycle
from scheduler.models import (
    DAY_S,
    HOUR_S,
    RESERVATION_ADMIT_DEFAULT_MIN,
    RESERVATION_ADMIT_MAX_MIN,
    AdapterKind,
    Cluster,
    ClusterPolicyEvent,
    Host,
    HostHealth,
)
from scheduler.services.cluster_drafts import ClusterDraft, ClusterUnreachable
from scheduler.services.slurm import slurm_provision

NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$")
MAX_HOSTS = 4096
MAX_GPUS_PER_HOST = 1024
MAX_SPEED = 1e6


def _provision_simulated(draft: ClusterDraft) -> list[ClusterHost]:
    """Create the cluster in the simulated cluster process; its hosts."""
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
            "'python -m scheduler.adapters.simcluster serve' (make run starts it) or pass its URL",
            field="adapter_url",
        ) from None
    except AdapterError as exc:
        raise Conflict(str(exc), field="name") from None
    finally:
        adapter.close()


def _provision_slurm(draft: ClusterDraft) -> list[ClusterHost]:
    """The nodes of a Slurm cluster (scheduler.services.slurm)."""
    return slurm_provision(draft)


# Adapter kind -> provisioner. The Slurm adapter registers its own (nodes from Slurm).
PROVISIONERS: dict[str, Callable[[ClusterDraft], list[ClusterHost]]] = {
    AdapterKind.SIMULATED: _provision_simulated,
    AdapterKind.SLURM: _provision_slurm,
}


def _shown(value: Any) -> str:
    """`value` for an error message (an API body may send a long string or a big object)."""
    text = repr(value)
    return text if len(text) <= 60 else f"{text[:57]}..."


def _integer(value: Any, *, field: str, low: int, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValidationFailed(
            f"{field}: must be a whole number between {low} and {high}, got {_shown(value)}",
            field=field,
        )
    if not low <= value <= high:
        raise ValidationFailed(
            f"{field}: must be between {low} and {high}, got {value}", field=field
        )
    return value


@dataclass(frozen=True)
class PolicyRule:
    """A policy field's values: a whole number from `low` to `high` (None too where
    `nullable`), or true/false where `boolean`."""

    low: int
    high: int
    nullable: bool = False
    means_none: str = ""  # what None stands for, in error messages
    boolean: bool = False


# The scheduling policy on `Cluster` (engine `Policy`, the fair-share window), field by
# field. `short_job_max_s` is also at most `max_min_runtime_s` (`clean_policy`).
POLICY_RULES: dict[str, PolicyRule] = {
    "cycle_s": PolicyRule(1, DAY_S),
    "grace_s": PolicyRule(0, DAY_S),
    "max_min_runtime_s": PolicyRule(1, 30 * DAY_S),
    "lookback_s": PolicyRule(HOUR_S, 365 * DAY_S),
    "half_life_s": PolicyRule(HOUR_S, 365 * DAY_S, nullable=True, means_none="no decay"),
    "short_reserve_hosts": PolicyRule(0, MAX_HOSTS),
    "short_reserve_auto": PolicyRule(0, 1, boolean=True),
    "short_job_max_s": PolicyRule(1, 30 * DAY_S),
    # the share floor (engine `Policy.share_floor`)
    "share_floor": PolicyRule(0, 1, boolean=True),
    # consolidation (engine `Policy.consolidate`; the live moves: `scheduler.cycle.moves`)
    "consolidate": PolicyRule(0, 1, boolean=True),
    # reservation admission, minutes (engine `Policy.reservation_admit_s`; 0: off)
    "reservation_admit_min": PolicyRule(0, RESERVATION_ADMIT_MAX_MIN),
    # idle-GPU reclaim (engine `Policy.idle_reclaim`; the idle test is
    # `scheduler.selectors.utilization.idle_attempt_ids`)
    "idle_reclaim": PolicyRule(0, 1, boolean=True),
    "idle_threshold_pct": PolicyRule(0, 100),
    "idle_reclaim_after_s": PolicyRule(60, DAY_S),
    "idle_notify_owner": PolicyRule(0, 1, boolean=True),
}
POLICY_FIELDS = tuple(POLICY_RULES)


def clean_policy(
    values: Mapping[str, Any], *, current: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """`values` (some or all policy fields) checked by `POLICY_RULES`, and the policy they
    make with `current` (the fields they leave as they are) checked as a whole:
    `short_job_max_s` is at most `max_min_runtime_s`. Raises ValidationFailed naming the
    field, what it allows and what was given; an unknown field is named too."""
    unknown = [name for name in values if name not in POLICY_RULES]
    if unknown:
        raise ValidationFailed(
            f"{unknown[0]}: not a policy field; the policy fields are {', '.join(POLICY_FIELDS)}",
            field=str(unknown[0]),
        )
    cleaned: dict[str, Any] = {}
    for name, rule in POLICY_RULES.items():
        if name not in values:
            continue
        value = values[name]
        if value is None and rule.nullable:
            cleaned[name] = None
            continue
        if rule.boolean:
            if not isinstance(value, bool):
                raise ValidationFailed(
                    f"{name}: must be true or false, got {_shown(value)}", field=name
                )
            cleaned[name] = value
            continue
        if rule.nullable and (isinstance(value, bool) or not isinstance(value, int)):
            raise ValidationFailed(
                f"{name}: must be null ({rule.means_none}) or a whole number between "
                f"{rule.low} and {rule.high}, got {_shown(value)}",
                field=name,
            )
        cleaned[name] = _integer(value, field=name, low=rule.low, high=rule.high)
    merged = {**(current or {}), **cleaned}
    longest, cap = merged.get("short_job_max_s"), merged.get("max_min_runtime_s")
    if longest is not None and cap is not None and longest > cap:
        if "short_job_max_s" in cleaned:
            raise ValidationFailed(
                f"short_job_max_s: must be between 1 and {cap}, got {longest} (at most "
                "max_min_runtime_s: no job may declare a longer minimum runtime)",
                field="short_job_max_s",
            )
        raise ValidationFailed(
            f"max_min_runtime_s: must be at least short_job_max_s ({longest}), got {cap}; "
            "lower short_job_max_s with it",
            field="max_min_runtime_s",
        )
    return cleaned


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
    if not permissions.may_add_cluster(actor):
        raise PermissionDenied("only staff may add clusters")


def _clean_cluster_name(name: Any) -> str:
    """The name, stripped; letters, digits, '.', '_' or '-' (ValidationFailed otherwise)."""
    name = (name or "").strip() if isinstance(name, str) else name
    if not isinstance(name, str) or not NAME_RE.match(name):
        raise ValidationFailed(
            f"name: letters, digits, '.', '_' or '-' (starting with a letter or digit), "
            f"at most 100 characters, got {name!r}",
            field="name",
        )
    return name


def _provisioner(adapter: Any) -> Callable[[ClusterDraft], list[ClusterHost]]:
    """The function that provisions a cluster of kind `adapter` (ValidationFailed for an
    unknown kind or one that cannot be added yet)."""
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
    return provision


def _clean_speed(speed: Any, adapter: str) -> float:
    """A simulated cluster's clock speed (simulated seconds per wall second)."""
    if adapter != AdapterKind.SIMULATED:
        raise ValidationFailed("speed: only simulated clusters have a clock speed", field="speed")
    if isinstance(speed, bool) or not isinstance(speed, int | float) or not 0 < speed <= MAX_SPEED:
        raise ValidationFailed(
            f"speed: must be a number > 0 and <= {MAX_SPEED:g}, got {speed!r}", field="speed"
        )
    return float(speed)


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
    short_reserve_auto: bool = True,
    share_floor: bool = True,
    consolidate: bool = True,
    reservation_admit_min: int = RESERVATION_ADMIT_DEFAULT_MIN,
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
    `short_job_max_s` (the engine's short-job reserve), more while `short_reserve_auto`
    (on by default) sizes it from the short work observed; `share_floor` and
    `consolidate` (on by default) are the engine's share floor and consolidation,
    `reservation_admit_min` (60; 0: off) its reservation admission. Raises
    ValidationFailed (field named), Conflict (the name is taken), PermissionDenied,
    ClusterUnreachable."""
    _check_actor(actor)
    name = _clean_cluster_name(name)
    provision = _provisioner(adapter)
    if hosts is not None:
        _integer(hosts, field="hosts", low=1, high=MAX_HOSTS)
    if gpus_per_host is not None:
        _integer(gpus_per_host, field="gpus_per_host", low=1, high=MAX_GPUS_PER_HOST)
    options = dict(adapter_options or {})
    if speed is not None:
        options["speed"] = _clean_speed(speed, adapter)
    policy = clean_policy(
        {
            "cycle_s": cycle_s,
            "grace_s": grace_s,
            "max_min_runtime_s": max_min_runtime_s,
            "short_reserve_hosts": short_reserve_hosts,
            "short_reserve_auto": short_reserve_auto,
            "share_floor": share_floor,
            "consolidate": consolidate,
            "reservation_admit_min": reservation_admit_min,
            "short_job_max_s": short_job_max_s,
        }
    )
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
    return _store(draft, cluster_hosts, policy)


def _store(
    draft: ClusterDraft, cluster_hosts: list[ClusterHost], policy: dict[str, Any]
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


def locked_for_policy_change(actor, cluster_id: int, what: str) -> Cluster:
    """The cluster, locked for the rest of the transaction, once `actor` may change its
    settings (staff; None: the system). `what` names them in the refusal ("the operators
    of"). Raises NotFound, PermissionDenied."""
    cluster = Cluster.objects.select_for_update().filter(pk=cluster_id).first()
    if cluster is None:
        raise NotFound(f"There is no cluster with id {cluster_id}.")
    if not permissions.may_change_cluster_policy(actor):
        raise PermissionDenied(f"Only staff may change {what} '{cluster.name}'.")
    return cluster


def record_policy_event(
    cluster: Cluster, actor, changes: dict[str, list[Any]], reason: str
) -> ClusterPolicyEvent:
    """The append-only audit row of a change to a cluster's settings:
    `{field: [before, after]}`, who (None: the system) and why."""
    return ClusterPolicyEvent.objects.create(
        cluster=cluster,
        at=timezone.now(),
        changes=changes,
        reason=reason,
        actor=actor,
        actor_name=actor.get_username() if actor is not None else "system",
    )


def cluster_policy_update(
    *, actor, cluster_id: int, changes: Mapping[str, Any], reason: Any
) -> Cluster:
    """Change some of a cluster's policy fields (`POLICY_FIELDS`) and record the change.

    Staff and superusers may; `actor` None is the system (`manage.py cluster_set`).
    `changes` maps each field to change to its new value; the policy it makes with the
    fields left as they are is checked as a whole (`clean_policy`). `reason` (1 to 500
    characters) is kept with the change. The fields that differ are saved with one
    append-only `ClusterPolicyEvent` (`{field: [before, after]}`, the actor, the reason),
    and a cycle of the cluster is asked for once it commits; a change to the values the
    cluster already has records nothing. Returns the cluster.

    Raises ValidationFailed (the field named: an unknown field, a value out of range, no
    change asked, no reason), NotFound, PermissionDenied."""
    if not isinstance(changes, Mapping) or not changes:
        raise ValidationFailed(
            f"changes: nothing to change; give one or more of {', '.join(POLICY_FIELDS)}",
            field="changes",
        )
    text = clean_reason(
        reason, required_message="A reason is required (why the policy changes).", max_length=500
    )
    with transaction.atomic():
        cluster = locked_for_policy_change(actor, cluster_id, "the policy of cluster")
        current = {name: getattr(cluster, name) for name in POLICY_FIELDS}
        cleaned = clean_policy(changes, current=current)
        diff = {
            name: [current[name], value]
            for name, value in cleaned.items()
            if current[name] != value
        }
        if not diff:
            return cluster
        for name, (_, after) in diff.items():
            setattr(cluster, name, after)
        cluster.save(update_fields=list(diff))
        record_policy_event(cluster, actor, diff, text)
        request_cycle(cluster.pk)  # on commit
    return cluster


def cluster_operators_set(*, actor, cluster_id: int, usernames: Any, reason: str) -> Cluster:
    """Set who operates a cluster (drains and resumes its hosts), audited like a policy
    change: one `ClusterPolicyEvent` with `{"operators": [before, after]}` (user names,
    sorted). Staff only (`actor` None: the system); setting the same people records
    nothing. Raises ValidationFailed (an unknown user), NotFound, PermissionDenied."""
    text = clean_reason(
        reason, required_message="A reason is required (why the operators change).", max_length=500
    )
    if isinstance(usernames, str) or not all(isinstance(u, str) for u in usernames):
        raise ValidationFailed("operators: a list of user names", field="operators")
    wanted = sorted(set(usernames))
    with transaction.atomic():
        cluster = locked_for_policy_change(actor, cluster_id, "the operators of")
        users = list(get_user_model().objects.filter(username__in=wanted))
        missing = sorted(set(wanted) - {u.get_username() for u in users})
        if missing:
            raise ValidationFailed(
                f"operators: there is no user named {missing[0]!r}", field="operators"
            )
        before = sorted(u.get_username() for u in cluster.operators.all())
        if before == wanted:
            return cluster
        cluster.operators.set(users)
        record_policy_event(cluster, actor, {"operators": [before, wanted]}, text)
    return cluster
