"""Pages: the manager dashboards (one htmx partial per chart, each with a CSV download)
and a researcher's own page. Thin: parse the period, call selectors, render."""

from __future__ import annotations

import csv
from collections.abc import Callable
from typing import Any
from urllib.parse import urlencode

from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.utils import timezone

from budgets.selectors import tree_index
from config.access import participant_required
from config.errors import ApplicationError
from dashboards import charts, selectors
from ledger import selectors as ledger_selectors
from scheduler.selectors.protection import jobs_protected_until
from scheduler.selectors.standing import job_standings
from scheduler.selectors.utilization import jobs_utilization
from scheduler.services.eta import eta_refresh_request

TABLE_PAGE_SIZE = 50
JOBS_PAGE_SIZE = 25
CSV_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


def _period_args(request: HttpRequest) -> dict[str, Any]:
    return {
        "cluster": request.GET.get("cluster"),
        "days": request.GET.get("days"),
        "since": request.GET.get("since"),
        "until": request.GET.get("until"),
        "step": request.GET.get("step"),
    }


def _query(period: ledger_selectors.Period, **extra: Any) -> str:
    args = {"cluster": period.cluster.pk, "days": period.days, "step": period.step, **extra}
    return urlencode(args)


def _csv_cell(value: Any) -> Any:
    """User text that a spreadsheet would run as a formula is quoted (CSV injection)."""
    if isinstance(value, str) and value.startswith(CSV_FORMULA_START):
        return "'" + value
    return value


def csv_response(rows: list[list[Any]], filename: str) -> HttpResponse:
    response = HttpResponse(content_type="text/csv; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="{filename}"'
    writer = csv.writer(response)
    for row in rows:
        writer.writerow([_csv_cell(v) for v in row])
    return response


def _error(request: HttpRequest, error: ApplicationError) -> HttpResponse:
    return render(
        request, "dashboards/_error.html", {"message": error.message}, status=error.status_code
    )


def _partial(name: str, build: Callable[[HttpRequest, ledger_selectors.Period], HttpResponse]):
    """A chart's partial view: parses the period, renders or answers CSV."""

    @participant_required
    def view(request: HttpRequest) -> HttpResponse:
        try:
            period = ledger_selectors.resolve_period(**_period_args(request))
            return build(request, period)
        except ApplicationError as error:
            return _error(request, error)

    view.__name__ = name
    return view


@participant_required
def dashboard(request: HttpRequest) -> HttpResponse:
    clusters = selectors.cluster_list()
    context: dict[str, Any] = {"clusters": clusters, "days_choices": ledger_selectors.DAYS_CHOICES}
    if clusters:
        try:
            period = ledger_selectors.resolve_period(**_period_args(request))
        except ApplicationError as error:
            context["error"] = error.message
            return render(request, "dashboards/dashboard.html", context, status=error.status_code)
        context.update(period=period, query=_query(period))
    return render(request, "dashboards/dashboard.html", context)


def _occupancy(request: HttpRequest, period: ledger_selectors.Period) -> HttpResponse:
    data = ledger_selectors.occupancy(period, viewer=request.user)
    if request.GET.get("format") == "csv":
        return csv_response(charts.occupancy_csv(data), f"occupancy-{period.cluster.name}.csv")
    return render(
        request,
        "dashboards/_occupancy.html",
        {
            "period": period,
            "data": data,
            "figure": charts.occupancy_figure(
                data, step=period.step, partial=charts.partial_steps(period, timezone.now())
            ),
            "query": _query(period),
        },
    )


def _delivery(request: HttpRequest, period: ledger_selectors.Period) -> HttpResponse:
    data = selectors.delivery(period, user=request.user)
    fmt = request.GET.get("format")
    if fmt == "csv":
        return csv_response(charts.delivery_csv(data), f"delivery-{period.cluster.name}.csv")
    if fmt == "csv-time":
        return csv_response(
            charts.delivery_over_time_csv(data), f"delivery-over-time-{period.cluster.name}.csv"
        )
    page = Paginator(data["projects"], TABLE_PAGE_SIZE).get_page(request.GET.get("page"))
    return render(
        request,
        "dashboards/_delivery.html",
        {
            "period": period,
            "data": data,
            "figures": charts.delivery_figures(
                data, step=period.step, partial=charts.partial_steps(period, timezone.now())
            ),
            "page": page,
            "query": _query(period),
            "good_ratio": selectors.GOOD_RATIO,
            "max_bars": charts.MAX_DELIVERY_BARS,
        },
    )


def _fairshare(request: HttpRequest, period: ledger_selectors.Period) -> HttpResponse:
    # as of the cluster's last cycle: the queue's figures, its time beside them
    board = selectors.fairshare_now(viewer=request.user, cluster=period.cluster)
    rows = board["rows"]
    if request.GET.get("format") == "csv":
        return csv_response(charts.fairshare_csv(rows), f"fairshare-{period.cluster.name}.csv")
    return render(
        request,
        "dashboards/_fairshare.html",
        {"period": period, "query": _query(period), **board},
    )


def _waits(request: HttpRequest, period: ledger_selectors.Period) -> HttpResponse:
    waits = selectors.wait_rows(period)
    preemptions = selectors.preemption_rows(period)
    drains = selectors.drain_rows(period)
    fmt, name = request.GET.get("format"), period.cluster.name
    if fmt == "csv":
        return csv_response(charts.waits_csv(waits), f"waits-{name}.csv")
    if fmt == "csv-preemptions":
        return csv_response(charts.preemptions_csv(preemptions), f"preemptions-{name}.csv")
    if fmt == "csv-drains":
        return csv_response(charts.drains_csv(drains), f"drains-{name}.csv")
    return render(
        request,
        "dashboards/_waits.html",
        {
            "period": period,
            "waits": waits,
            "preemptions": preemptions,
            "drains": drains,
            "figures": charts.waits_figures(
                waits,
                preemptions,
                step=period.step,
                partial=charts.partial_steps(period, timezone.now()),
            ),
            "query": _query(period),
        },
    )


def _efficiency(request: HttpRequest, period: ledger_selectors.Period) -> HttpResponse:
    pyramid = ledger_selectors.pyramid(period, viewer=request.user)
    index = tree_index()  # read once for both
    projects = ledger_selectors.efficiency(
        period, viewer=request.user, mine=selectors.my_project_ids(request.user, index), index=index
    )
    if request.GET.get("format") == "csv":
        return csv_response(
            charts.efficiency_csv(projects), f"efficiency-{period.cluster.name}.csv"
        )
    page = Paginator(projects, TABLE_PAGE_SIZE).get_page(request.GET.get("page"))
    return render(
        request,
        "dashboards/_efficiency.html",
        {
            "period": period,
            "pyramid": pyramid,
            "page": page,
            "figure": charts.pyramid_figure(
                pyramid, step=period.step, partial=charts.partial_steps(period, timezone.now())
            ),
            "query": _query(period),
        },
    )


occupancy = _partial("occupancy", _occupancy)
efficiency = _partial("efficiency", _efficiency)
delivery = _partial("delivery", _delivery)
fairshare = _partial("fairshare", _fairshare)
waits = _partial("waits", _waits)


@login_required
def me(request: HttpRequest) -> HttpResponse:
    jobs = Paginator(selectors.my_jobs(user=request.user), JOBS_PAGE_SIZE).get_page(
        request.GET.get("page")
    )
    span = ledger_selectors.resolve_span()  # the default reporting period
    projects = selectors.my_projects(user=request.user, span=span)
    if request.GET.get("format") == "csv":
        rows: list[list[Any]] = [
            [
                "project",
                "cluster",
                "capped_entitled_gpu_h",
                "delivered_gpu_h",
                "ratio",
                "demand_gpu_h",
            ]
        ]
        for p in projects:
            for c in p["clusters"]:
                rows.append(
                    [
                        p["path"],
                        c["cluster"],
                        round(c["entitled_gpu_h"], 3),
                        round(c["delivered_gpu_h"], 3),
                        "" if c["ratio"] is None else round(c["ratio"], 4),
                        round(c["demand_gpu_h"], 3),
                    ]
                )
        return csv_response(rows, "my-projects.csv")
    eta_refresh_request(jobs=jobs.object_list)
    standings = job_standings(jobs.object_list)
    used = jobs_utilization(job.pk for job in jobs.object_list)
    protected = jobs_protected_until(jobs.object_list)
    rows = [
        {
            "job": job,
            "standing": standings.get(job.pk),
            "utilization": used.get(job.pk),
            "holds_gpus": job.pk in protected,
            "protected_until": protected.get(job.pk),
        }
        for job in jobs
    ]
    return render(
        request,
        "dashboards/me.html",
        {
            "jobs": jobs,
            "rows": rows,
            "projects": projects,
            "figure": charts.my_projects_figure(projects),
            "span": span,
        },
    )
