"""The what-if preview of the budget edit page (htmx): queue a replay of the typed
weights and poll its progress and result. The form and its permission are the budget
edit page's (`budgets.forms`); the preview is the scheduler's (`services.previews`).
The routes keep their place under /budgets/ (`scheduler.urls`)."""

from __future__ import annotations

from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render
from django.utils.cache import patch_vary_headers
from django.utils.dateparse import parse_datetime
from django.views.decorators.http import require_POST

from allot_common.figures import change_text
from budgets.forms import posted_weights, weight_form_context
from budgets.selectors import tree_index
from config.access import participant_page, participant_required
from config.errors import ApplicationError, PermissionDenied
from config.text import is_id_text
from dashboards.charts import leaf_label, short_label
from ops.context_processors import read_banners
from scheduler.models import PreviewState
from scheduler.services.previews import preview_get, preview_request


def _per_minute(seconds: float | None) -> float | None:
    return None if seconds is None else seconds / 60


def _percent(fraction: float | None) -> float | None:
    return None if fraction is None else fraction * 100


def _whatif_row(r: dict) -> dict:
    """One project's figures as the table shows them (percent, minutes, the change):
    the ledger's record, the replay with today's weights and the one with the proposed."""
    before, after = r.get("delivered_gpu_h_before"), r.get("delivered_gpu_h_after")
    difference = r.get("replay_difference")
    return {
        **r,
        "delivered_gpu_h_before": before,
        "delivered_gpu_h_after": after,
        # the Change column: the difference of the two as the table shows them
        "change_gpu_h": change_text(before, after, 1),
        "p90_before_min": _per_minute(r.get("p90_replay_wait_s_before")),
        "p90_after_min": _per_minute(r.get("p90_replay_wait_s_after")),
        "share_before": r.get("entitled_share_before") or 0,
        "share_after": r.get("entitled_share_after") or 0,
        "difference_pct": _percent(difference),
        # the ratios as fractions, written by the dashboards' `percent` (one rounding)
        **{key: r.get(key) for key in ("ratio_recorded", "ratio_before", "ratio_after")},
    }


def _whatif_context(preview) -> dict:
    """The what-if partial's context: progress (and, while it waits, whether a background
    worker is alive to run it: the page banner's cached read), or the per-project table
    and chart data."""
    result = preview.result or {}
    waiting = preview.state in (PreviewState.QUEUED, PreviewState.RUNNING)
    rows = [_whatif_row(r) for r in result.get("projects", [])]
    chart = {
        "projects": [r["project"] for r in rows],
        # the axis's labels, shortened by the rule of every chart (dashboards.charts)
        "labels": [short_label(r["project"]) for r in rows],
        "narrow_labels": [leaf_label(r["project"]) for r in rows],
        "recorded": [r.get("delivered_gpu_h_recorded") for r in rows],
        "before": [r["delivered_gpu_h_before"] for r in rows],
        "after": [r["delivered_gpu_h_after"] for r in rows],
        "entitled_before": [r.get("capped_entitled_gpu_h_before") for r in rows],
        "entitled_after": [r.get("capped_entitled_gpu_h_after") for r in rows],
        "days": preview.window_days,
    }
    return {
        "preview": preview,
        "percent": round(preview.progress * 100),
        "rows": rows,
        "chart": chart,
        "result": result,
        "fidelity_pct": _percent((result.get("fidelity") or {}).get("worst")),
        "chart_id": f"whatif-data-{preview.pk}",
        "window_end": parse_datetime(result.get("window_end") or ""),
        "idle": _idle_context(result),
        "no_background_worker": waiting and bool(read_banners().background),
    }


def _idle_context(result: dict) -> dict | None:
    """What the replays say about idle GPUs (docs/concepts.md,
    allocated-but-idle-gpu-hours): reclaim on or off in each, the jobs replayed idle, the
    allocated-but-idle GPU-h and the idle reclaims of each; None for a preview made
    before it was reported."""
    reclaim = result.get("idle_reclaim")
    if not reclaim or result.get("empty"):
        return None
    rows = result.get("projects", [])
    before_reclaims, after_reclaims = result.get("idle_reclaims") or (0, 0)
    return {
        "before": reclaim.get("before"),
        "after": reclaim.get("after"),
        "jobs": result.get("idle_jobs", 0),
        "gpu_h_before": sum(r.get("idle_gpu_h_before") or 0.0 for r in rows),
        "gpu_h_after": sum(r.get("idle_gpu_h_after") or 0.0 for r in rows),
        "reclaims_before": before_reclaims,
        "reclaims_after": after_reclaims,
    }


# the form's idle-GPU reclaim choice -> preview_request's idle_reclaim (None: the policy)
IDLE_RECLAIM_CHOICES: dict[str, bool | None] = {"": None, "on": True, "off": False}


@participant_required
@require_POST
def whatif_start(request: HttpRequest, node_id: int) -> HttpResponse:
    """htmx: queue a what-if preview of the typed weights; answers with its progress."""
    try:
        context = weight_form_context(request, node_id)
    except PermissionDenied as exc:
        return HttpResponse(exc.message, status=403)
    edits, errors, changes = posted_weights(request, context["children"])
    if errors:
        return render(request, "scheduler/_whatif.html", {"error": next(iter(errors.values()))})
    days = request.POST.get("days", "").strip()
    idle_reclaim = IDLE_RECLAIM_CHOICES.get(request.POST.get("idle_reclaim", ""), "invalid")
    try:
        preview = preview_request(
            actor=request.user,
            node=node_id,
            weights=changes,
            cluster=request.POST.get("cluster", ""),
            days=int(days) if is_id_text(days) else None,
            idle_reclaim=idle_reclaim,
        )
    except ApplicationError as exc:
        message = exc.message
        if exc.field == "weights":
            message = "Change at least one weight, or choose idle-GPU reclaim on or off, to preview its effect."
        return render(request, "scheduler/_whatif.html", {"error": message})
    preview.refresh_from_db()
    return render(request, "scheduler/_whatif.html", _whatif_context(preview))


@participant_page
def whatif_status(request: HttpRequest, preview_id: int) -> HttpResponse:
    """htmx (polled while it runs): a preview's progress, or its result when done.
    Opened directly (a link, a reload), the same in the site's layout, with a way back
    to the weights it previews; a refusal is the site's page too."""
    partial = bool(request.headers.get("HX-Request"))
    try:
        preview = preview_get(actor=request.user, preview_id=preview_id)
    except ApplicationError as exc:
        if partial:
            return HttpResponse(exc.message, status=exc.status_code)
        if exc.status_code == 404:
            raise Http404(exc.message) from exc
        return render(request, "403.html", {"message": exc.message}, status=exc.status_code)
    context = _whatif_context(preview)
    if partial:
        response = render(request, "scheduler/_whatif.html", context)
    else:
        context["path"] = tree_index().path(preview.node_id)
        response = render(request, "scheduler/whatif_page.html", context)
    patch_vary_headers(response, ["HX-Request"])  # one URL, two answers
    return response
