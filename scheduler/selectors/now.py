"""What an on-call operator opens first: each cluster as it is now.

Per cluster: GPUs running, free and waited for; jobs pending and running; the last
cycle's age and duration (and whether cycles are late); the cluster adapter's errors of
recent cycles; hosts down or draining with their reason and what still runs there; and
what the short-job reserve holds (`short_reserve_now`, the one place that reads it);
the switchable scheduling rules, share floor, consolidation and idle-GPU reclaim (`policy_now`: the
settings the engine reads and their last audited change). Reads only; everything comes from the records the cycle writes.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from django.db import connection
from django.db.models import Count, Q, Sum
from django.utils import timezone

from budgets import permissions
from ops.selectors import ClusterHealth, scheduling_health
from scheduler.models import (
    ACTIVE_STATES,
    Cluster,
    ClusterPolicyEvent,
    CycleRecord,
    Host,
    HostHealth,
    Job,
    JobState,
    QueueSnapshot,
    SlurmAdoption,
)
from scheduler.selectors.clusters import cluster_counts, gpus_in_use
from scheduler.selectors.translate import policy_for_cluster

ERROR_WINDOW = dt.timedelta(hours=1)  # adapter errors of the cycles this recent
MAX_ERRORS = 10
MAX_SBATCH_REFUSALS = 20  # refused governed sbatch jobs shown per cluster
RESERVE_WINDOW = dt.timedelta(days=7)  # the short-job reserve's cost is summed this far back


def clusters_now(*, actor: Any, now: dt.datetime | None = None) -> list[dict[str, Any]]:
    """`cluster_now` of every cluster, by name, as `actor` reads it."""
    at = now or timezone.now()
    health = {c.name: c for c in scheduling_health(now=at).clusters}
    return [
        cluster_now(cluster=c, actor=actor, now=at, health=health.get(c.name))
        for c in Cluster.objects.order_by("name")
    ]


def cluster_now(
    *,
    cluster: Cluster,
    actor: Any,
    now: dt.datetime | None = None,
    health: ClusterHealth | None = None,
) -> dict[str, Any]:
    """One cluster as it is now (see the module's docstring) as `actor` reads it (the
    refused sbatch jobs they may read: `sbatch_refusals`); whether it is being
    scheduled is `/healthz`'s and the page banner's answer (`ops.selectors`)."""
    at = now or timezone.now()
    if health is None:
        health = next(
            (c for c in scheduling_health(now=at).clusters if c.name == cluster.name), None
        )
    hosts = list(Host.objects.filter(cluster=cluster).order_by("name"))
    in_use = {name: n for (_, name), n in gpus_in_use(hosts).items()}
    counts = cluster_counts([cluster.pk])[cluster.pk]
    return {
        "cluster": cluster,
        "hosts": counts["hosts"],
        "gpus": counts["gpus"],
        "healthy_gpus": counts["healthy_gpus"],
        "running_gpus": sum(in_use.values()),
        "free_gpus": sum(
            max(0, h.gpus - in_use.get(h.name, 0)) for h in hosts if h.health == HostHealth.HEALTHY
        ),
        "pending_jobs": counts["pending_jobs"],
        "pending_gpus": counts["pending_gpus"],
        "running_jobs": counts["running_jobs"],
        "cycle": last_cycle(cluster=cluster, now=at, health=health),
        "errors": adapter_errors(cluster=cluster, now=at),
        "unhealthy_hosts": [
            {
                "name": h.name,
                "health": h.health,
                "health_label": h.get_health_display(),
                "reason": h.health_reason,
                "since": h.health_changed_at,
                "gpus": h.gpus,
                "gpus_in_use": in_use.get(h.name, 0),
                "ready_for_repair": h.ready_for_repair_at is not None,
            }
            for h in hosts
            if h.health != HostHealth.HEALTHY
        ],
        "short_reserve": short_reserve_now(cluster=cluster, now=at),
        "policy": policy_now(cluster=cluster),
        "sbatch_refusals": sbatch_refusals(cluster=cluster, actor=actor),
    }


def last_cycle(
    *, cluster: Cluster, now: dt.datetime, health: ClusterHealth | None
) -> dict[str, Any] | None:
    """The cluster's last cycle: when, how long ago, how long it took, what it did, and
    whether the cluster is being scheduled (`health`: stale, with its cause)."""
    record = CycleRecord.objects.filter(cluster=cluster).order_by("-started_at", "-id").first()
    if record is None:
        return None
    return {
        "record": record,
        "started_at": record.started_at,
        "age_s": max(0.0, (now - record.started_at).total_seconds()),
        "duration_ms": record.duration_ms,
        "late": bool(health and health.stale),
        "cause": health.cause if health else "",
        "stale_after_s": health.stale_after_s if health else None,
        "last_read_age_s": health.last_read_age_s if health else None,
        "period_s": cluster.cycle_s,
    }


def adapter_errors(*, cluster: Cluster, now: dt.datetime) -> list[dict[str, Any]]:
    """The errors the cycles of the last ERROR_WINDOW recorded (adapter unreachable,
    starts refused ...), newest first, each text once with how often it came."""
    records = (
        CycleRecord.objects.filter(cluster=cluster, started_at__gte=now - ERROR_WINDOW)
        .exclude(errors=[])
        .order_by("-started_at")
        .values_list("started_at", "errors")
    )
    seen: dict[str, dict[str, Any]] = {}
    for at, errors in records:
        for text in errors or []:
            entry = seen.setdefault(str(text), {"text": str(text), "last_at": at, "count": 0})
            entry["count"] += 1
    return list(seen.values())[:MAX_ERRORS]


def sbatch_refusals(
    *, cluster: Cluster, actor: Any, limit: int = MAX_SBATCH_REFUSALS
) -> list[dict[str, Any]]:
    """The latest governed sbatch jobs Allot refused to adopt (and cancelled in Slurm)
    that `actor` may read (`permissions.readable_sbatch_refusals`: staff and the
    cluster's operators every one, others their own and their managed projects'),
    newest first: Slurm id, Slurm user, account, when and why."""
    rows = SlurmAdoption.objects.filter(cluster=cluster).exclude(refused="")
    readable = permissions.readable_sbatch_refusals(actor, cluster)
    if readable is not None:
        users, accounts = readable
        rows = rows.filter(Q(slurm_user__in=users) | Q(account__in=accounts))
    rows = rows.order_by("-at", "-id").values(
        "slurm_job_id", "slurm_user", "account", "at", "refused"
    )[:limit]
    return [{**row, "reason": row.pop("refused")} for row in rows]


def short_reserve_now(*, cluster: Cluster, now: dt.datetime | None = None) -> dict[str, Any]:
    """What the short-job reserve holds now and what it cost: its policy (adaptive, the
    default, or not: the cluster's `short_reserve_auto`; the fixed hosts kept for jobs
    with a short minimum runtime, and that limit), the hosts and GPUs the last planned
    cycle held, its cost over the last 7 days (`short_reserve_cost`), and the short
    jobs running and waiting. Three queries."""
    limit = cluster.short_job_max_s
    short = Job.objects.filter(
        cluster=cluster, min_runtime_s__gt=0, min_runtime_s__lte=limit
    ).aggregate(
        running=Count("id", filter=Q(state__in=ACTIVE_STATES)),
        running_gpus=Sum("gpus", filter=Q(state__in=ACTIVE_STATES)),
        waiting=Count("id", filter=Q(state=JobState.PENDING)),
    )
    last = (
        QueueSnapshot.objects.filter(cluster_id=cluster.pk)
        .select_related("cycle")
        .only("computed_at", "cycle__short_reserve_hosts", "cycle__short_reserve_gpus")
        .first()
    )
    cycle = last.cycle if last else None
    adaptive = cluster.short_reserve_auto
    return {
        "enabled": adaptive or cluster.short_reserve_hosts > 0,
        "adaptive": adaptive,
        "hosts": cluster.short_reserve_hosts,
        "max_min_runtime_s": limit,
        "held_hosts": list(cycle.short_reserve_hosts or []) if cycle else [],
        "held_gpus": cycle.short_reserve_gpus if cycle else 0,
        "as_of": last.computed_at if last else None,
        **short_reserve_cost(cluster=cluster, now=now),
        "running_jobs": short["running"] or 0,
        "running_gpus": short["running_gpus"] or 0,
        "waiting_jobs": short["waiting"] or 0,
    }


def policy_now(*, cluster: Cluster) -> dict[str, Any]:
    """The cluster's switchable scheduling rules as the engine's policy reads them
    (`policy_for_cluster`), each with its last audited change (`changed_at`,
    `changed_by`, `reason`; None where never changed): `share_floor`
    (docs/concepts.md#share-floor), `consolidate` (#consolidation),
    `reservation_admit_min` (#reservation-admission, with the bound in seconds as the
    engine reads it) and `idle_reclaim` (#idle-reclaim, with its threshold and how long
    GPUs must stay idle). One query."""
    policy = policy_for_cluster(cluster)
    last: dict[str, Any] = {}
    names = ("share_floor", "consolidate", "reservation_admit_min", "idle_reclaim")
    events = ClusterPolicyEvent.objects.filter(
        changes__has_any_keys=list(names), cluster_id=cluster.pk
    ).only("at", "actor_name", "reason", "changes")
    for event in events:  # newest first
        for name in names:
            if name in event.changes and name not in last:
                last[name] = event
        if len(last) == len(names):
            break

    def changed(name: str) -> dict[str, Any]:
        event = last.get(name)
        return {
            "changed_at": event.at if event else None,
            "changed_by": (event.actor_name or "system") if event else None,
            "reason": event.reason if event else None,
        }

    return {
        "share_floor": {"on": policy.share_floor, **changed("share_floor")},
        "consolidate": {"on": policy.consolidate, **changed("consolidate")},
        "reservation_admit_min": {
            "on": policy.reservation_admit_s > 0,
            "within_s": policy.reservation_admit_s,
            **changed("reservation_admit_min"),
        },
        "idle_reclaim": {
            "on": policy.idle_reclaim,
            "threshold_pct": cluster.idle_threshold_pct,
            "after_s": policy.idle_reclaim_after_s,
            **changed("idle_reclaim"),
        },
    }


# Each cycle's unused held GPUs count for the time until the cluster's next cycle, at
# most the cluster's cycle period (`short_reserve_cost`); the last one until now.
_RESERVE_COST_SQL = """
    SELECT COALESCE(SUM(unused * LEAST(GREATEST(EXTRACT(EPOCH FROM
               COALESCE(next_at, %(now)s) - started_at), 0), %(period)s)), 0),
           COALESCE(SUM(starts), 0)
    FROM (SELECT short_reserve_unused_gpus AS unused, short_reserve_starts AS starts,
                 started_at, LEAD(started_at) OVER (ORDER BY started_at, id) AS next_at
          FROM {cycle} WHERE cluster_id = %(cluster)s AND started_at >= %(since)s) c
"""


def short_reserve_cost(*, cluster: Cluster, now: dt.datetime | None = None) -> dict[str, Any]:
    """The short-job reserve's cost and benefit over the last `RESERVE_WINDOW` (7 days),
    from the cycle records (docs/concepts.md, short-job-reserve-cost):
    `reserve_cost_gpu_h`, the GPU-hours of held GPUs that no short job used while longer
    allocated work waited, and `short_waits_saved`, the short jobs started on held hosts
    while that work waited. One query.

    A cycle's unused GPUs stay so until the next cycle decides again, so each cycle counts
    for the real time until the cluster's next one (the last: until `now`). Submissions,
    cancels and host changes run extra cycles between the periodic ones, so counting each
    cycle as a whole period (`cycle_s`) overcounted. The time is capped at the cycle
    period: beat runs a cycle at least that often, so a longer gap is an outage (no worker,
    the lock held, scheduling paused) in which the reserve decided nothing, and its cost
    there would be the outage's. The cap also keeps the figure at most what a cycle per
    period would give."""
    at = now or timezone.now()
    with connection.cursor() as cursor:
        cursor.execute(
            _RESERVE_COST_SQL.format(cycle=connection.ops.quote_name(CycleRecord._meta.db_table)),
            {"cluster": cluster.pk, "since": at - RESERVE_WINDOW, "now": at,
             "period": float(cluster.cycle_s)},
        )  # fmt: skip
        gpu_s, starts = cursor.fetchone()
    return {
        "reserve_cost_gpu_h": round(float(gpu_s) / 3600.0, 2),
        "short_waits_saved": int(starts),
        "window_days": RESERVE_WINDOW.days,
    }
