"""State metrics read from the database at scrape time."""

from __future__ import annotations

from collections.abc import Iterable

from django.conf import settings
from django.db.models import Count, Max, Sum
from django.utils import timezone
from prometheus_client.core import Metric

from accounts.models import ApiToken
from budgets.models import BudgetEvent, BudgetNode, Membership
from ledger.selectors import DEFAULT_DAYS, entitlement_ratios, last_hour_occupancy
from ops.metrics import StateCollector, gauge
from ops.selectors import heartbeat_stale_after_s, heartbeats, queue_workers_alive
from scheduler.models import ACTIVE_STATES, Cluster, Job, JobState


def budget_metrics() -> Iterable[Metric]:
    yield gauge(
        "allot_budget_nodes",
        "Budget tree nodes by kind",
        ["kind"],
        BudgetNode.objects.values_list("kind").annotate(n=Count("id")).order_by("kind"),
    )
    yield gauge(
        "allot_budget_events",
        "Audit events recorded, by kind",
        ["kind"],
        BudgetEvent.objects.values_list("kind").annotate(n=Count("id")).order_by("kind"),
    )
    yield gauge(
        "allot_memberships",
        "Roles on budget nodes, by role",
        ["role"],
        Membership.objects.values_list("role").annotate(n=Count("id")).order_by("role"),
    )
    yield gauge(
        "allot_api_tokens", "API tokens issued and not revoked", [], [(ApiToken.objects.count(),)]
    )


def scheduler_metrics() -> Iterable[Metric]:
    states = [JobState.PENDING, *sorted(ACTIVE_STATES)]
    rows = list(
        Job.objects.filter(state__in=states)
        .values_list("cluster__name", "project__slug", "state")
        .annotate(jobs=Count("id"), gpus=Sum("gpus"))
        .order_by("cluster__name", "project__slug", "state")
    )
    labels = ["cluster", "project", "state"]
    yield gauge(
        "allot_jobs",
        "Jobs pending or active, by cluster, project and state",
        labels,
        [r[:4] for r in rows],
    )
    yield gauge(
        "allot_job_gpus",
        "GPUs requested by jobs pending or active, by cluster, project and state",
        labels,
        [(*r[:3], r[4]) for r in rows],
    )
    now = timezone.now()
    clusters = Cluster.objects.annotate(last=Max("cycles__started_at")).order_by("name")
    yield gauge(
        "allot_cluster_gpus",
        "GPU capacity by cluster",
        ["cluster"],
        [(c.name, c.gpu_capacity) for c in clusters],
    )
    yield gauge(
        "allot_cycle_last_age_seconds",
        "Seconds since each cluster's last scheduling cycle started",
        ["cluster"],
        [(c.name, (now - c.last).total_seconds()) for c in clusters if c.last],
    )


def ledger_metrics() -> Iterable[Metric]:
    yield gauge(
        "allot_occupancy_gpu_hours",
        "GPU-hours of each cluster's last complete hour by occupancy bucket (they sum to "
        "its capacity)",
        ["cluster", "bucket"],
        last_hour_occupancy(),
    )
    yield gauge(
        "allot_entitlement_ratio",
        f"Delivered / entitled GPU-hours by cluster and project over the last "
        f"{DEFAULT_DAYS} days of complete hours (projects entitled to something)",
        ["cluster", "project"],
        entitlement_ratios(),
    )


def process_metrics() -> Iterable[Metric]:
    """Live workers per queue, by the heartbeats `/healthz` reads (ops.selectors)."""
    _, workers = heartbeats(timezone.now())
    fresh = heartbeat_stale_after_s()
    queues = (settings.CELERY_TASK_DEFAULT_QUEUE, settings.BACKGROUND_QUEUE)
    yield gauge(
        "allot_queue_workers_alive",
        "Celery workers of each queue whose heartbeat is fresh (0: nothing runs its tasks)",
        ["queue"],
        [(q, queue_workers_alive(workers, q, fresh)) for q in queues],
    )


# What `/metrics` reads from the database at every scrape, in this order.
STATE_COLLECTORS: tuple[StateCollector, ...] = (
    budget_metrics,
    scheduler_metrics,
    ledger_metrics,
    process_metrics,
)
