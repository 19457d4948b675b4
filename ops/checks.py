"""The built-in health checks: database, broker, cache, and the scheduler's cycles."""

from __future__ import annotations

import redis
from django.conf import settings
from django.db import connection
from django.utils import timezone

from ops.health import register_check

TIMEOUT_S = 2.0


def database() -> dict:
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1")
        cursor.fetchone()
    return {"ok": True}


def broker() -> dict:
    url = settings.CELERY_BROKER_URL
    if not url.startswith(("redis://", "rediss://")):
        return {"ok": True, "note": "not a Redis broker; not checked"}
    client = redis.Redis.from_url(url, socket_timeout=TIMEOUT_S, socket_connect_timeout=TIMEOUT_S)
    try:
        return {"ok": bool(client.ping())}
    finally:
        client.close()


def cycles() -> dict:
    """Age of each cluster's last scheduling cycle; stale when older than 3 periods
    (at least 60 s). Not critical: web requests still work without the scheduler."""
    from django.db.models import Max

    from scheduler.models import Cluster

    now = timezone.now()
    clusters = {}
    ok = True
    for cluster in Cluster.objects.annotate(last=Max("cycles__started_at")).order_by("name"):
        limit = max(3 * cluster.cycle_s, 60)
        age = (now - cluster.last).total_seconds() if cluster.last else None
        stale = age is None or age > limit
        ok = ok and not stale
        clusters[cluster.name] = {
            "last_cycle_age_s": None if age is None else round(age, 1),
            "stale_after_s": limit,
            "stale": stale,
        }
    return {"ok": ok, "clusters": clusters}


register_check("database", database, critical=True)
register_check("broker", broker, critical=True)
register_check("cycles", cycles, critical=False)
