"""Pages of the scheduler app: a job's page, the operators' "now" page, the window
planner's plans side by side."""

from __future__ import annotations

from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render

from config.access import participant_page
from scheduler.core.planner.views_data import list_scenarios, step_text
from scheduler.selectors.jobs import job_detail as job_detail_selector
from scheduler.selectors.jobs import job_page, job_stored_queue
from scheduler.selectors.now import clusters_now
from scheduler.services.eta import eta_refresh_request
from scheduler.services.planner import PAGE_TIME_LIMIT_S, scenario_plans


@participant_page
def planner_list(request: HttpRequest) -> HttpResponse:
    return render(request, "scheduler/planner_list.html", {"scenarios": list_scenarios()})


@participant_page
def planner_detail(request: HttpRequest, name: str) -> HttpResponse:
    found = scenario_plans(name)
    if found is None:
        raise Http404(f"No scenario named {name!r}")
    scenario, plans = found
    return render(
        request,
        "scheduler/planner_detail.html",
        {
            "scenario": scenario,
            "plans": plans,
            "time_limit": PAGE_TIME_LIMIT_S,
            "step": step_text(scenario["step_s"]),
        },
    )


@participant_page
def job_detail(request: HttpRequest, job_id: int) -> HttpResponse:
    """A job's state, attempts and events; for a pending job its ranked blockers."""
    context = _job_page(request, job_id)
    return render(request, "scheduler/job_detail.html", context)


@participant_page
def job_waiting(request: HttpRequest, job_id: int) -> HttpResponse:
    """htmx: the job page's "Why it waits" part again (its place, estimated start and
    blockers), which the page asks for every few seconds; once the job no longer waits,
    the whole page reloads (HX-Refresh) to show what happened."""
    context = _job_page(request, job_id)
    if not context["queue"]:
        response = HttpResponse(status=204)
        response["HX-Refresh"] = "true"
        return response
    return render(request, "scheduler/_job_waiting.html", context)


def _job_page(request: HttpRequest, job_id: int) -> dict:
    """The job page's context: the job read once, its ETA refresh asked for (an eager
    one runs here) before the page reads the ETA."""
    job = job_detail_selector(job_id=job_id)
    if job is None:
        raise Http404(f"No job {job_id}")
    stored = job_stored_queue(job)  # with the last cycle the ETA check needs
    current = eta_refresh_request(
        jobs=[job], last_cycles={job.cluster_id: stored.last_cycle_id} if stored else None
    )
    return job_page(
        actor=request.user, job=job, current_etas=current, stored=stored, stored_read=True
    )


NOW_REFRESH_S = 10


@participant_page
def now(request: HttpRequest) -> HttpResponse:
    """Every cluster as it is now (what on-call opens first); the cards refresh
    themselves every NOW_REFRESH_S seconds (htmx asks for the cards alone)."""
    context = {"clusters": clusters_now(actor=request.user), "refresh_s": NOW_REFRESH_S}
    if request.headers.get("HX-Request"):
        return render(request, "scheduler/_now_clusters.html", context)
    return render(request, "scheduler/now.html", context)
