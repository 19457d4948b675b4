"""The clusters on the budget pages, which know nothing of the scheduler: the tree page's
entitled GPU-hours per cluster and the edit page's what-if form (its cluster choice and
the preview routes, `scheduler.views.whatif`)."""

from __future__ import annotations

from django import template
from django.conf import settings

from scheduler.models import Cluster
from scheduler.selectors.clusters import cluster_list

register = template.Library()

HOURS_PER_WEEK = 168


@register.simple_tag
def clusters() -> list[Cluster]:
    """`{% clusters as clusters %}`: every cluster, by name."""
    return cluster_list()


@register.filter
def entitled_gpu_hours_per_week(entitled: float, cluster: Cluster) -> float:
    """Entitled GPU-hours per week on a cluster: entitled share x its GPUs x 168."""
    return entitled * cluster.gpu_capacity * HOURS_PER_WEEK


@register.inclusion_tag("scheduler/_whatif_form.html")
def whatif_form(node) -> dict:
    """The what-if section of the budget edit form, for the children of `node`."""
    return {"node": node, "clusters": cluster_list(), "whatif_days": settings.ALLOT_PREVIEW_DAYS}
