"""Draining and resuming hosts (SPEC 1.4), audited.

An operator (staff, or one of the cluster's `operators`) sets a host DRAINING (it takes
no new work; the engine stops what runs there once its minimum runtime is over) or
HEALTHY again. Each change is an append-only `HostEvent` with the actor and reason, and
asks for a cycle of the cluster, which tells the adapter. DOWN is what the cluster
reports; a down host's health follows the cluster until it is back.
"""

from __future__ import annotations

from typing import Any

from django.db import transaction
from django.utils import timezone

from budgets import permissions
from config.errors import Conflict, NotFound, PermissionDenied, ValidationFailed
from config.text import clean_reason
from scheduler.cycle_requests import request_cycle
from scheduler.models import Host, HostEvent, HostHealth

REASON_MAX_LENGTH = 500
SETTABLE = (HostHealth.DRAINING, HostHealth.HEALTHY)


def host_set_health(*, actor, host_id: int, health: Any, reason: Any) -> Host:
    """Start (`draining`) or end (`healthy`) a drain of a host. Setting the health it
    already has changes nothing and records nothing."""
    if health not in SETTABLE:
        raise ValidationFailed(
            f"health must be 'draining' or 'healthy' (got {health!r}); 'down' is reported "
            "by the cluster.",
            field="health",
        )
    text = clean_reason(
        reason,
        required_message="A reason is required (what is wrong with the host, or why it is back).",
        max_length=REASON_MAX_LENGTH,
    )
    with transaction.atomic():
        host = Host.objects.select_for_update().select_related("cluster").filter(pk=host_id).first()
        if host is None:
            raise NotFound(f"There is no host with id {host_id}.")
        if not permissions.may_operate_hosts(actor, host.cluster):
            raise PermissionDenied(
                f"You may not drain or resume hosts of cluster '{host.cluster.name}': only "
                "staff and the cluster's operators may."
            )
        if host.health == health:
            return host
        if host.health == HostHealth.DOWN:
            raise Conflict(
                f"Host {host.name} is down ({host.health_reason or 'reported by the cluster'}); "
                "its health follows the cluster until it is back up.",
                field="health",
            )
        now = timezone.now()
        HostEvent.objects.create(
            host=host,
            at=now,
            from_health=host.health,
            to_health=health,
            reason=text,
            actor=actor,
            actor_name=actor.get_username(),
        )
        host.health = health
        host.health_reason = text
        host.health_changed_at = now
        if health == HostHealth.HEALTHY:
            host.ready_for_repair_at = None
        host.save(
            update_fields=["health", "health_reason", "health_changed_at", "ready_for_repair_at"]
        )
        request_cycle(host.cluster_id)
    return host
