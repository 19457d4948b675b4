"""Celery tasks of the ledger: keep the recent hourly rollups current."""

from __future__ import annotations

import datetime as dt

from celery import shared_task
from django.utils import timezone

from ledger.services import floor_hour, rollups_refresh
from scheduler.models import Cluster


@shared_task(name="ledger.refresh_recent_rollups", ignore_result=True)
def refresh_recent_rollups() -> int:
    """Recompute the previous and the current hour of every cluster (cheap: two hours
    of attempts, jobs and host events per cluster). Returns the clusters refreshed."""
    now = timezone.now()
    since = floor_hour(now) - dt.timedelta(hours=1)
    count = 0
    for cluster_id in Cluster.objects.values_list("pk", flat=True):
        rollups_refresh(cluster_id=cluster_id, since=since, until=now, now=now)
        count += 1
    return count
