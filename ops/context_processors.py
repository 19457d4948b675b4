"""The banner every page shows while the scheduler is not cycling (templates/base.html)."""

from __future__ import annotations

from django.core.cache import cache
from django.utils.functional import SimpleLazyObject

from ops.selectors import SchedulingHealth, scheduling_health

BANNER_CACHE_KEY = "ops:scheduling-banner"
BANNER_CACHE_S = 5  # pages within a few seconds share one health read

_CAUSES = {
    "beat": "Celery beat is not running, so no cycle is asked for",
    "worker": "no Celery worker is running, so no cycle runs",
    "cluster adapter": "the cluster cannot be reached",
    "cycles": "cycles fail or wait behind other work",
}


def banner_text(health: SchedulingHealth) -> str:
    """One sentence for people: what is not happening and why ("" when all is well)."""
    if health.ok:
        return ""
    if health.paused:
        return (
            "Scheduling is paused: no job is started or stopped until an operator "
            "reconciles the clusters (manage.py reconcile_restore)."
        )
    if "no cluster" in health.stale:
        return "No cluster is configured: jobs can be submitted but none will start."
    stale = [c for c in health.clusters if c.stale]
    if not stale:
        return ""
    names = ", ".join(c.name for c in stale)
    cause = _CAUSES.get(stale[0].cause, "")
    periods = round(stale[0].stale_after_s)
    return (
        f"Scheduling has stalled on {names}: no cycle for more than {periods} s"
        + (f" ({cause})" if cause else "")
        + ". Jobs are neither started nor stopped; operators: see /healthz."
    )


def _cached_banner() -> str:
    try:  # a page renders even when the cache or the health read fails
        text = cache.get(BANNER_CACHE_KEY)
        if text is None:
            text = banner_text(scheduling_health())
            cache.set(BANNER_CACHE_KEY, text, BANNER_CACHE_S)
        return text
    except Exception:
        return ""


def scheduling_banner(request) -> dict:
    """`scheduling_banner`: the text, read only when a template shows it."""
    return {"scheduling_banner": SimpleLazyObject(_cached_banner)}
