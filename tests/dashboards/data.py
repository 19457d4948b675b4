"""Hand-built history for the dashboard tests: ledger rows, jobs, attempts and events."""

from __future__ import annotations

import datetime as dt
import itertools
import math

from django.utils import timezone

from ledger.models import ClusterHour, ProjectHour
from scheduler.models import (
    Attempt,
    AttemptState,
    HostEvent,
    HostHealth,
    JobEvent,
    JobState,
)
from tests.factories import AttemptFactory, HostFactory, JobFactory

_attempt_numbers = itertools.count(1)


def hour_ago(hours: int) -> dt.datetime:
    now = timezone.now().replace(minute=0, second=0, microsecond=0)
    return now - dt.timedelta(hours=hours)


def cluster_hours(cluster, hours: int, *, first: int = 1, **buckets: float) -> list[ClusterHour]:
    """`hours` consecutive ClusterHour rows ending at the last complete hour (`first` 0:
    at the current, partial hour, which no reporting window shows); the buckets not
    given are 0 and idle fills the rest up to the cluster's capacity."""
    capacity = float(cluster.gpu_capacity)
    rows = []
    for h in range(first, first + hours):
        values = {b: 0.0 for b in ClusterHour.BUCKETS} | buckets
        values["idle_gpu_h"] = capacity - sum(v for k, v in values.items() if k != "idle_gpu_h")
        rows.append(
            ClusterHour(
                cluster=cluster,
                hour=hour_ago(h),
                capacity_gpu_h=capacity,
                healthy_gpu_h=capacity - values["down_gpu_h"] - values["draining_gpu_h"],
                computed_at=timezone.now(),
                **values,
            )
        )
    return ClusterHour.objects.bulk_create(rows)


def project_hours(
    cluster, project, hours: int, *, first: int = 1, **values: float
) -> list[ProjectHour]:
    """`hours` consecutive rows ending at the last complete hour (`first` 0: at the
    current, partial hour)."""
    rows = [
        ProjectHour(cluster=cluster, project=project, hour=hour_ago(h), **values)
        for h in range(first, first + hours)
    ]
    return ProjectHour.objects.bulk_create(rows)


def job(cluster, project, user, *, submitted_at, kind="training", state=JobState.PENDING, name="j"):
    return JobFactory(
        cluster=cluster,
        project=project,
        submitter=user,
        name=name,
        min_runtime_s=60,
        kind=kind,
        state=state,
        submitted_at=submitted_at,
    )


def attempt(the_job, *, started_at, ended_at=None, number=1) -> Attempt:
    return AttemptFactory(
        job=the_job,
        number=number,
        attempt_id=f"att-{next(_attempt_numbers)}-{the_job.pk}-{number}",
        state=AttemptState.ENDED if ended_at else AttemptState.RUNNING,
        created_at=started_at,
        started_at=started_at,
        ended_at=ended_at,
    )


def preemption(the_job, *, at, rule: str) -> JobEvent:
    return JobEvent.objects.create(
        job=the_job,
        at=at,
        from_state=JobState.RUNNING,
        to_state=JobState.STOPPING,
        reason=f"preempted ({rule})",
        rule=rule,
    )


def health_change(host, *, at, to: str, reason="maintenance") -> HostEvent:
    event = HostEvent.objects.create(
        host=host, at=at, from_health=host.health, to_health=to, reason=reason
    )
    host.health = to
    host.save(update_fields=["health"])
    return event


__all__ = [
    "HostHealth",
    "attempt",
    "cluster_hours",
    "health_change",
    "hour_ago",
    "job",
    "preemption",
    "project_hours",
]


def history(tree, cluster) -> None:
    """A week of varied ledger hours, jobs, preemptions and a drain."""
    _ledger_hours(tree, cluster)
    _jobs(tree, cluster)
    host = HostFactory(cluster=cluster, name="gpu-node-07")
    health_change(host, at=hour_ago(40), to="draining", reason="ECC errors on GPU 3")
    health_change(host, at=hour_ago(31), to="healthy", reason="GPU replaced")


def _ledger_hours(tree, cluster) -> None:
    """A week of cluster and project hours: a daily wave of use, a few hours down, idle
    demand at night, GPU utilization measured for a1 and b1 only."""
    capacity = float(cluster.gpu_capacity)
    projects = [tree.node("a1"), tree.node("a2"), tree.node("b1")]
    shares = [0.35, 0.15, 0.5]
    cluster_rows, project_rows = [], []
    for h in range(1, 7 * 24 + 1):  # the complete hours of the last 7 days
        wave = 0.5 + 0.4 * math.sin(h / 9.0)
        used = capacity * wave
        within, borrowed = used * 0.8, used * 0.1
        unallocated, down = capacity * 0.05, 8.0 if 30 < h < 40 else 0.0
        idle_demand = capacity * 0.05 if h % 24 < 6 else 0.0
        idle = capacity - within - borrowed - unallocated - down - idle_demand
        cluster_rows.append(
            ClusterHour(
                cluster=cluster,
                hour=hour_ago(h),
                capacity_gpu_h=capacity,
                healthy_gpu_h=capacity - down,
                within_entitlement_gpu_h=within,
                borrowed_gpu_h=borrowed,
                unallocated_gpu_h=unallocated,
                idle_demand_gpu_h=idle_demand,
                idle_gpu_h=idle,
                down_gpu_h=down,
                computed_at=timezone.now(),
            )
        )
        for i, (project, share) in enumerate(zip(projects, shares, strict=True)):
            entitled = min(share * capacity, used * (0.4 + 0.3 * i))
            held = entitled * (0.8 + 0.1 * i) + 1.0
            # GPU utilization: measured for a1 and b1 (a2 has no metrics: unknown), gaps
            # some hours (metrics missing)
            measured = 0.0 if i == 1 or h % 11 == 0 else held
            project_rows.append(
                ProjectHour(
                    cluster=cluster,
                    project=project,
                    hour=hour_ago(h),
                    entitled_gpu_h=entitled,
                    allocated_gpu_h=entitled * (0.8 + 0.1 * i),
                    demand_gpu_h=entitled * 1.5,
                    unallocated_gpu_h=1.0,
                    measured_gpu_h=measured,
                    utilized_gpu_h=measured * (0.85 if i == 0 else 0.3 + 0.2 * wave),
                )
            )
    ClusterHour.objects.bulk_create(cluster_rows)
    ProjectHour.objects.bulk_create(project_rows)


def _jobs(tree, cluster) -> None:
    """Finished debug and training runs every 5 hours (some preempted), three waiting."""
    ann = tree.user("ann")
    for h in range(0, 7 * 24, 5):
        for kind, wait_min in (("debug", 2 + h % 7), ("training", 20 + h % 40)):
            started = hour_ago(h) + dt.timedelta(minutes=10)
            j = job(
                cluster,
                tree.node("a1"),
                ann,
                kind=kind,
                state=JobState.SUCCEEDED,
                submitted_at=started - dt.timedelta(minutes=wait_min),
                name=f"{kind}-run-{h}",
            )
            attempt(j, started_at=started, ended_at=started + dt.timedelta(minutes=30))
            if h % 20 == 0:
                preemption(
                    j,
                    at=started + dt.timedelta(minutes=5),
                    rule="fair_share" if kind == "training" else "unallocated",
                )
    for i in range(3):
        job(
            cluster,
            tree.node("a1"),
            ann,
            submitted_at=hour_ago(1),
            name=f"waiting-{i}",
            state=JobState.PENDING,
        )
