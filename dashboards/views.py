"""Pages: the manager dashboards (every chart in the page; each also at its own URL, an
htmx partial for its table's pages, with its CSV downloads) and a researcher's own
page. Thin: parse the period, call selectors, render."""

from __future__ import annotations

import csv
import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode

from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.template.loader import render_to_string
from django.urls import reverse
from django.utils import timezone
from django.views.decorators.http import require_safe

from budgets.selectors import TreeIndex, tree_index
from config.access import participant_page
from config.errors import ApplicationError, NotFound, ValidationFailed
from dashboards import charts, selectors
from ledger import selectors as ledger_selectors
from scheduler.selectors.protection import jobs_protected_until
from scheduler.selectors.standing import job_standings
from scheduler.selectors.utilization import jobs_utilization
from scheduler.services.eta import eta_refresh_request

TABLE_PAGE_SIZE = 50
JOBS_PAGE_SIZE = 25
MY_JOBS_REFRESH_S = 20  # as the queue page's tables (scheduler.views.queue)
CSV_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


def _period_args(request: HttpRequest) -> dict[str, Any]:
    """The period's query parameters; a cluster the query names that does not exist is
    bad input (400 naming `cluster`, as the API's `usage/` answers), while no cluster at
    all is nothing to show (404)."""
    cluster = request.GET.get("cluster")
    return {
        "missing": ValidationFailed if cluster else NotFound,
        "cluster": cluster,
        "days": request.GET.get("days"),
        "since": request.GET.get("since"),
        "until": request.GET.get("until"),
        "step": request.GET.get("step"),
    }


def _query(period: ledger_selectors.Period, **extra: Any) -> str:
    args = {"cluster": period.cluster.pk, "days": period.days, "step": period.step, **extra}
    return urlencode(args)


def _table_page(request: HttpRequest, chart: str, rows: list[Any]) -> Any:
    """The page of a chart's table that `<chart>_page` asks for: each table pages on its
    own, on the dashboards page as on the chart's own URL."""
    return Paginator(rows, TABLE_PAGE_SIZE).get_page(request.GET.get(f"{chart}_page"))


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


# --- the charts: each one's template, context and CSV downloads --------------------------

Tree = Callable[[], TreeIndex]  # the budget tree, read at most once per answer


@dataclass(frozen=True)
class Chart:
    """A section of the dashboards: `context(request, period, tree)` is what `template`
    shows; `csv(request, period, tree, format)` answers a CSV download (None for another
    `format`). `tree()` reads the budget tree once for all the charts of an answer. The
    page shows every chart; each also has its own URL (the tables' pages, CSV)."""

    template: str
    context: Callable[[HttpRequest, ledger_selectors.Period, Tree], dict[str, Any]]
    csv: Callable[[HttpRequest, ledger_selectors.Period, Tree, str], HttpResponse | None]


def _occupancy_context(
    request: HttpRequest, period: ledger_selectors.Period, tree: Tree
) -> dict[str, Any]:
    data = ledger_selectors.occupancy(period, viewer=request.user)
    return {
        "period": period,
        "data": data,
        "figure": charts.occupancy_figure(
            data, step=period.step, partial=charts.partial_steps(period, timezone.now())
        ),
        "query": _query(period),
    }


def _occupancy_csv(
    request: HttpRequest, period: ledger_selectors.Period, tree: Tree, fmt: str
) -> HttpResponse | None:
    if fmt != "csv":
        return None
    data = ledger_selectors.occupancy(period, viewer=request.user)
    return csv_response(charts.occupancy_csv(data), f"occupancy-{period.cluster.name}.csv")


def _delivery_context(
    request: HttpRequest, period: ledger_selectors.Period, tree: Tree
) -> dict[str, Any]:
    data = selectors.delivery(period, user=request.user, index=tree())
    page = _table_page(request, "delivery", data["projects"])
    return {
        "period": period,
        "data": data,
        "figures": charts.delivery_figures(
            data, step=period.step, partial=charts.partial_steps(period, timezone.now())
        ),
        "page": page,
        "query": _query(period),
        "good_ratio": selectors.GOOD_RATIO,
        "max_bars": charts.MAX_DELIVERY_BARS,
    }


def _delivery_csv(
    request: HttpRequest, period: ledger_selectors.Period, tree: Tree, fmt: str
) -> HttpResponse | None:
    if fmt not in ("csv", "csv-time"):
        return None
    data = selectors.delivery(period, user=request.user, index=tree())
    if fmt == "csv":
        return csv_response(charts.delivery_csv(data), f"delivery-{period.cluster.name}.csv")
    return csv_response(
        charts.delivery_over_time_csv(data), f"delivery-over-time-{period.cluster.name}.csv"
    )


def _fairshare_context(
    request: HttpRequest, period: ledger_selectors.Period, tree: Tree
) -> dict[str, Any]:
    # as of the cluster's last cycle: the queue's figures, its time beside them
    board = selectors.fairshare_now(viewer=request.user, cluster=period.cluster, index=tree())
    return {"period": period, "query": _query(period), **board}


def _fairshare_csv(
    request: HttpRequest, period: ledger_selectors.Period, tree: Tree, fmt: str
) -> HttpResponse | None:
    if fmt != "csv":
        return None
    board = selectors.fairshare_now(viewer=request.user, cluster=period.cluster, index=tree())
    return csv_response(charts.fairshare_csv(board["rows"]), f"fairshare-{period.cluster.name}.csv")


def _waits_context(
    request: HttpRequest, period: ledger_selectors.Period, tree: Tree
) -> dict[str, Any]:
    waits = selectors.wait_rows(period)
    preemptions = selectors.preemption_rows(period)
    return {
        "period": period,
        "waits": waits,
        "preemptions": preemptions,
        "drains": selectors.drain_rows(period),
        "figures": charts.waits_figures(
            waits,
            preemptions,
            step=period.step,
            partial=charts.partial_steps(period, timezone.now()),
        ),
        "query": _query(period),
    }


def _waits_csv(
    request: HttpRequest, period: ledger_selectors.Period, tree: Tree, fmt: str
) -> HttpResponse | None:
    name = period.cluster.name
    if fmt == "csv":
        return csv_response(charts.waits_csv(selectors.wait_rows(period)), f"waits-{name}.csv")
    if fmt == "csv-preemptions":
        return csv_response(
            charts.preemptions_csv(selectors.preemption_rows(period)), f"preemptions-{name}.csv"
        )
    if fmt == "csv-drains":
        return csv_response(charts.drains_csv(selectors.drain_rows(period)), f"drains-{name}.csv")
    return None


def _efficiency_context(
    request: HttpRequest, period: ledger_selectors.Period, tree: Tree
) -> dict[str, Any]:
    pyramid = ledger_selectors.pyramid(period, viewer=request.user)
    page = _table_page(request, "efficiency", _efficiency_projects(request, period, tree))
    return {
        "period": period,
        "pyramid": pyramid,
        "page": page,
        "figure": charts.pyramid_figure(
            pyramid, step=period.step, partial=charts.partial_steps(period, timezone.now())
        ),
        "query": _query(period),
    }


def _efficiency_projects(
    request: HttpRequest, period: ledger_selectors.Period, tree: Tree
) -> list[dict[str, Any]]:
    index = tree()
    return ledger_selectors.efficiency(
        period, viewer=request.user, mine=selectors.my_project_ids(request.user, index), index=index
    )


def _efficiency_csv(
    request: HttpRequest, period: ledger_selectors.Period, tree: Tree, fmt: str
) -> HttpResponse | None:
    if fmt != "csv":
        return None
    return csv_response(
        charts.efficiency_csv(_efficiency_projects(request, period, tree)),
        f"efficiency-{period.cluster.name}.csv",
    )


# In the page's order (the section ids are the names).
CHARTS = {
    "occupancy": Chart("dashboards/_occupancy.html", _occupancy_context, _occupancy_csv),
    "efficiency": Chart("dashboards/_efficiency.html", _efficiency_context, _efficiency_csv),
    "delivery": Chart("dashboards/_delivery.html", _delivery_context, _delivery_csv),
    "fairshare": Chart("dashboards/_fairshare.html", _fairshare_context, _fairshare_csv),
    "waits": Chart("dashboards/_waits.html", _waits_context, _waits_csv),
}


def _partial(name: str) -> Callable[[HttpRequest], HttpResponse]:
    """A chart's own view (a table's other pages, CSV): parses the period, then answers
    the CSV that `format` asks for, the chart's section to htmx, or the section in the
    site's page to a browser that opened the URL itself (unstyled, times in UTC, else)."""
    chart = CHARTS[name]

    @participant_page
    def view(request: HttpRequest) -> HttpResponse:
        try:
            period = ledger_selectors.resolve_period(**_period_args(request))
            fmt = request.GET.get("format")
            tree = functools.cache(tree_index)
            answer = chart.csv(request, period, tree, fmt) if fmt else None
            if answer is not None:
                return answer
            context = chart.context(request, period, tree)
            if request.headers.get("HX-Request"):
                return render(request, chart.template, context)
            return render(request, "dashboards/section_page.html", _page_of(name, period, context))
        except ApplicationError as error:
            return _error(request, error)

    view.__name__ = name
    return view


def _page_of(name: str, period: ledger_selectors.Period, context: dict) -> dict:
    """The context of a section shown on a page of its own: the section's, the template
    to include and a link to every section of the period on the dashboards page."""
    url = f"{reverse('dashboards:dashboard')}?{_query(period)}#{name}"
    return {**context, "section_name": name, "section_template": CHARTS[name].template,
            "dashboards_url": url, "period": period}  # fmt: skip


@participant_page
def dashboard(request: HttpRequest) -> HttpResponse:
    """The page with every chart in it, as one answer (the charts' own URLs serve their
    tables' other pages and the CSV downloads)."""
    clusters = selectors.cluster_list()
    context: dict[str, Any] = {"clusters": clusters, "days_choices": ledger_selectors.DAYS_CHOICES}
    if clusters:
        args = _period_args(request)
        if not args["cluster"]:
            args["cluster"] = clusters[0]  # the first by name, as resolve_period picks it
        try:
            period = ledger_selectors.resolve_period(**args)
        except ApplicationError as error:
            context["error"] = error.message
            return render(request, "dashboards/dashboard.html", context, status=error.status_code)
        tree = functools.cache(tree_index)
        sections = [
            (name, _section(request, chart, period, tree)) for name, chart in CHARTS.items()
        ]
        context.update(period=period, query=_query(period), sections=sections)
    return render(request, "dashboards/dashboard.html", context)


def _section(
    request: HttpRequest, chart: Chart, period: ledger_selectors.Period, tree: Tree
) -> str:
    """A chart's section as its own URL renders it (an error in its place)."""
    try:
        return render_to_string(chart.template, chart.context(request, period, tree))
    except ApplicationError as error:
        return render_to_string("dashboards/_error.html", {"message": error.message})


occupancy = _partial("occupancy")
efficiency = _partial("efficiency")
delivery = _partial("delivery")
fairshare = _partial("fairshare")
waits = _partial("waits")


@login_required
@require_safe
def me(request: HttpRequest) -> HttpResponse:
    """A researcher's projects (the default reporting period) and jobs; htmx asks for the
    jobs' section alone every MY_JOBS_REFRESH_S seconds, so an estimate that was overtaken
    ("due now ... a new estimate follows") or still being computed is replaced in place."""
    jobs = Paginator(selectors.my_jobs(user=request.user), JOBS_PAGE_SIZE).get_page(
        request.GET.get("page")
    )
    if request.headers.get("HX-Request"):
        return render(request, "dashboards/_my_jobs.html", _my_jobs_context(jobs))
    span = ledger_selectors.resolve_span()  # the default reporting period
    projects = selectors.my_projects(user=request.user, span=span)
    if request.GET.get("format") == "csv":
        return _my_projects_csv(projects)
    return render(
        request,
        "dashboards/me.html",
        {
            **_my_jobs_context(jobs),
            "projects": projects,
            "figure": charts.my_projects_figure(projects),
            "span": span,
        },
    )


def _my_jobs_context(jobs: Any) -> dict[str, Any]:
    """The jobs' section of /me/: each job of the page with its standing (position,
    reason, estimated start), GPU utilization and protection."""
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
    return {"jobs": jobs, "rows": rows, "refresh_s": MY_JOBS_REFRESH_S}


def _my_projects_csv(projects: list[dict[str, Any]]) -> HttpResponse:
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
