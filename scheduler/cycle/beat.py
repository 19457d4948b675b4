"""What beat asks about cycles: which clusters are due one, and the records' retention."""

from __future__ import annotations

import datetime as dt

from django.db.models import Exists, OuterRef, Subquery
from django.utils import timezone

from scheduler.models import Cluster, CycleRecord, JobEvent


def clusters_due(*, now: dt.datetime | None = None) -> list[int]:
    """Ids of the clusters whose last cycle started `cycle_s` ago or more (or never)."""
    now = now or timezone.now()
    last = (
        CycleRecord.objects.filter(cluster=OuterRef("pk"))
        .order_by("-started_at")
        .values("started_at")[:1]
    )
    rows = Cluster.objects.annotate(last=Subquery(last)).values_list("pk", "cycle_s", "last")
    return [
        pk
        for pk, cycle_s, last in rows
        if last is None or (now - last).total_seconds() >= cycle_s - 0.5
    ]


def cycle_records_prune(*, days: float = 30, now: dt.datetime | None = None) -> int:
    """Delete cycle records older than `days`. Records that a job event names (cycles
    that started or stopped something) stay with the append-only job history."""
    cutoff = (now or timezone.now()) - dt.timedelta(days=days)
    named = JobEvent.objects.filter(cycle=OuterRef("pk"))
    old = CycleRecord.objects.filter(started_at__lt=cutoff).exclude(Exists(named))
    deleted = 0
    while True:
        batch = list(old.values_list("pk", flat=True)[:5000])
        if not batch:
            return deleted
        deleted += (
            CycleRecord.objects.filter(pk__in=batch).delete()[1].get("scheduler.CycleRecord", 0)
        )
