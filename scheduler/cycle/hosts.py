"""Hosts mirrored from the cluster's report into `Host` rows, with a `HostEvent` per
change. A drain made in Allot is pushed to the cluster with a reason starting
`ALLOT_REASON_PREFIX`; a drain made on the cluster itself is mirrored."""

from __future__ import annotations

from collections.abc import Sequence

from scheduler.adapters import ClusterHost, HostHealthState
from scheduler.cycle.context import CycleContext
from scheduler.models import Host, HostEvent, HostHealth

# Drains Allot pushes to the cluster carry this reason prefix, so that a drain the
# cluster reports is told apart from one made on the cluster itself (which is mirrored).
ALLOT_REASON_PREFIX = "allot: "

HealthPush = tuple[str, HostHealthState, str]  # host name, health, reason


def reconcile_hosts(ctx: CycleContext, reported: Sequence[ClusterHost]) -> list[HealthPush]:
    """Mirror the cluster's hosts (inside the reconcile's transaction); returns the
    drains and resumes to push to it."""
    rows = {h.name: h for h in Host.objects.select_for_update().filter(cluster=ctx.cluster)}
    pushes: list[HealthPush] = []
    seen = set()
    for ch in reported:
        seen.add(ch.name)
        host = rows.get(ch.name)
        if host is None:
            Host.objects.create(
                cluster=ctx.cluster,
                name=ch.name,
                gpus=ch.gpus,
                health=str(ch.health),
                health_reason=ch.reason[:500],
                health_changed_at=ctx.at,
            )
            continue
        before = (host.health, host.gpus, host.ready_for_repair_at)
        push = _host_change(ctx, host, ch)
        if push is not None:
            pushes.append(push)
        if ch.gpus != host.gpus:
            host.gpus = ch.gpus
        if host.health == HostHealth.HEALTHY:
            host.ready_for_repair_at = None
        if (host.health, host.gpus, host.ready_for_repair_at) != before:
            host.save()
    for name, host in rows.items():
        if name not in seen and host.health != HostHealth.DOWN:
            _host_event(ctx, host, HostHealth.DOWN, "no longer reported by the cluster")
            host.save()
    return pushes


def _host_event(ctx: CycleContext, host: Host, to: str, reason: str) -> None:
    HostEvent.objects.create(
        host=host,
        at=ctx.at,
        from_health=host.health,
        to_health=to,
        reason=reason[:500],
        actor_name="cluster",
    )
    host.health = to
    host.health_reason = reason[:500]
    host.health_changed_at = ctx.at
    if to == HostHealth.HEALTHY:
        host.ready_for_repair_at = None


def _host_change(ctx: CycleContext, host: Host, ch: ClusterHost) -> HealthPush | None:
    """Apply the cluster's view of one host; a push when Allot's view must win."""
    theirs, ours = str(ch.health), host.health
    if theirs == ours:
        return None
    ours_allot = ch.reason.startswith(ALLOT_REASON_PREFIX)
    if theirs == HostHealth.DOWN or ours == HostHealth.DOWN:
        what = "reported down by the cluster" if theirs == HostHealth.DOWN else "back up"
        _host_event(ctx, host, theirs, f"{what}{': ' + ch.reason if ch.reason else ''}")
        return None
    if ours == HostHealth.DRAINING:  # an Allot drain the cluster has not applied yet
        reason = ALLOT_REASON_PREFIX + (host.health_reason or "drained in Allot")
        return (host.name, HostHealthState.DRAINING, reason)
    if ours_allot:  # healthy in Allot, still drained by Allot on the cluster
        return (host.name, HostHealthState.HEALTHY, ALLOT_REASON_PREFIX + "drain ended")
    _host_event(ctx, host, theirs, f"drained on the cluster: {ch.reason or 'no reason'}")
    return None
