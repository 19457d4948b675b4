"""The banners every page shows while the scheduler is not cycling, or, to people signed
in, while no worker runs the background queue (templates/base.html). Both come from one health read
(`scheduling_health`: the background queue's liveness from the same heartbeats and
freshness `/healthz` uses), kept a few seconds for every page and the preview poll."""

from __future__ import annotations

from dataclasses import dataclass

from django.conf import settings
from django.core.cache import cache
from django.utils.functional import SimpleLazyObject

from ops.checks import BACKGROUND_WORKER
from ops.selectors import SchedulingHealth, scheduling_health

BANNER_CACHE_KEY = "ops:banners"
BANNER_CACHE_S = 5  # pages within a few seconds share one health read

_CAUSES = {
    "beat": "Celery beat is not running, so no cycle is asked for",
    "worker": "no Celery worker is running, so no cycle runs",
    "cluster adapter": "the cluster cannot be reached",
    "cycles": "cycles fail or wait behind other work",
}
BACKGROUND_TEXT = (
    "No background worker is running: what-if previews stay queued, job ETAs are not "
    "refreshed and GPU utilization is not collected (jobs are still started and stopped); "
    "operators: see /healthz."
)


@dataclass(frozen=True)
class Banners:
    scheduling: str = ""  # "" when all is well
    background: str = ""

    def __bool__(self) -> bool:
        return bool(self.scheduling or self.background)


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


def background_text(health: SchedulingHealth) -> str:
    """What stops while no worker of the background queue is alive ("" while one is)."""
    alive = health.queue(settings.BACKGROUND_QUEUE, BACKGROUND_WORKER).ok
    return "" if alive else BACKGROUND_TEXT


def read_banners() -> Banners:
    """The banners, from one health read kept BANNER_CACHE_S seconds (none when the
    cache or the read fails: a page renders anyway)."""
    try:
        cached = cache.get(BANNER_CACHE_KEY)
        if cached is None:
            health = scheduling_health()
            cached = (banner_text(health), background_text(health))
            cache.set(BANNER_CACHE_KEY, cached, BANNER_CACHE_S)
        return Banners(*cached)
    except Exception:
        return Banners()


def page_banners(request) -> dict:
    """`banners` (its `scheduling` and `background` sentences), read only when a template
    shows them: on every page. The background one only to people signed in (members
    whose ETAs go stale, managers whose previews wait, staff who can start the worker):
    nothing of it is a signed-out visitor's, on the sign-in page or elsewhere."""
    return {"banners": SimpleLazyObject(lambda: _for_reader(read_banners(), request))}


def _for_reader(banners: Banners, request) -> Banners:
    """`banners` as the reader of `request` sees them (no background one signed out)."""
    user = getattr(request, "user", None)
    if user is not None and user.is_authenticated:
        return banners
    return Banners(scheduling=banners.scheduling)
