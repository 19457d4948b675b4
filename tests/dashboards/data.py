"""Hand-built history for the dashboard tests: ledger rows, jobs, attempts and events."""

from __future__ import annotations

import datetime as dt
import itertools

from django.utils import timezone

from ledger.models import ClusterHour, ProjectHour
from scheduler.models import (
    Attempt,
    AttemptState,
    HostEvent,
    HostHealth,
    Job,
    JobEvent,
    JobState,
)

_attempt_numbers = itertools.count(1)


def hour_ago(hours: int) -> dt.datetime:
    now = timezone.now().replace(minute=0, second=0, microsecond=0)
    return now - dt.timedelta(hours=hours)


def cluster_hours(cluster, hours: int, **buckets: float) -> list[ClusterHour]:
    """`hours` consecutive ClusterHour rows ending at the current hour; the buckets not
    given are 0 and idle fills the rest up to the cluster's capacity."""
    capacity = float(cluster.gpu_capacity)
    rows = []
    for h in range(hours):
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


def project_hours(cluster, project, hours: int, **values: float) -> list[ProjectHour]:
    rows = [
        ProjectHour(cluster=cluster, project=project, hour=hour_ago(h), **values)
        for h in range(hours)
    ]
    return ProjectHour.objects.bulk_create(rows)


def job(cluster, project, user, *, submitted_at, kind="training", state=JobState.PENDING, name="j"):
    return Job.objects.create(
        cluster=cluster,
        project=project,
        submitter=user,
        name=name,
        gpus=1,
        min_runtime_s=60,
        kind=kind,
        state=state,
        submitted_at=submitted_at,
        queued_at=submitted_at,
    )


def attempt(the_job, *, started_at, ended_at=None, number=1) -> Attempt:
    return Attempt.objects.create(
        job=the_job,
        number=number,
        attempt_id=f"att-{next(_attempt_numbers)}-{the_job.pk}-{number}",
        cluster=the_job.cluster,
        project=the_job.project,
        gpus=the_job.gpus,
        allocated=True,
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
