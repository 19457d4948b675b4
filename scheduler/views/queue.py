"""The cluster queue page (like `squeue`): `/queue/` picks a cluster, `/clusters/<id>/queue/`
shows its pending jobs in start order and its running jobs, filtered and paged. Thin:
parse (the filters as every page reads its query: `config.query.read_page_query` with
`QueuePageFilter`), call the selectors (`scheduler.selectors.cluster_queue`), render."""

from __future__ import annotations

from urllib.parse import urlencode

from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse

from config.access import participant_page
from config.errors import ApplicationError
from config.query import QUERY_REFUSED, field_errors, read_page_query
from scheduler.api.serializers import QueuePageFilter
from scheduler.models import Cluster
from scheduler.selectors import cluster_queue as selectors
from scheduler.selectors.clusters import cluster_list, resolve_cluster
from scheduler.services.eta import cluster_eta_refresh_request

QUEUE_REFRESH_S = 20
FILTER_KEYS = ("state", "project", "user", "mine")


@participant_page
def queue_home(request: HttpRequest) -> HttpResponse:
    """`/queue/`: the queue of the cluster named by `?cluster=` (id or name; an unknown
    one is a 400 naming `cluster`, as in the API's filters), else of the first cluster;
    a page that says so when there is none."""
    ref = request.GET.get("cluster", "").strip()
    try:
        cluster = resolve_cluster(ref) if ref else None
    except ApplicationError as error:
        return _page(request, {"errors": field_errors(error)}, status=error.status_code)
    cluster = cluster or next(iter(cluster_list()), None)
    if cluster is None:
        return _page(request, {})
    query = urlencode([(k, v) for k, v in request.GET.items() if k != "cluster"])
    url = reverse("scheduler:cluster-queue", args=[cluster.pk])
    return redirect(f"{url}?{query}" if query else url)


@participant_page
def cluster_queue(request: HttpRequest, cluster_id: int) -> HttpResponse:
    """A cluster's queue: pending jobs in start order (position, reason, estimated
    start), running jobs (start, protection end); htmx asks for the tables alone every
    QUEUE_REFRESH_S seconds."""
    cluster = Cluster.objects.filter(pk=cluster_id).first()
    if cluster is None:
        raise Http404(f"No cluster {cluster_id}")
    params = {k: request.GET.get(k, "") for k in FILTER_KEYS}
    context: dict = {"cluster": cluster, "params": params}
    values, errors = read_page_query(QueuePageFilter, request.GET)
    if errors:
        context["errors"] = errors
        return _page(request, context, status=QUERY_REFUSED)
    filters = selectors.QueueFilters(
        state=values["state"],
        project_ids=values.get("project"),
        # `mine` is the user's own jobs, like `squeue --me`, and wins over `user`
        submitter_id=request.user.pk if values["mine"] else values.get("user"),
    )
    data = selectors.cluster_queue(
        cluster=cluster,
        filters=filters,
        page=selectors.page_number(request.GET.get("page")),
        running_page=selectors.page_number(request.GET.get("running_page")),
    )
    current = cluster_eta_refresh_request(
        cluster_id=cluster.pk, job_ids=selectors.waiting_job_ids(data["pending"])
    )
    data["pending"] = selectors.with_etas(data["pending"], cluster_id=cluster.pk, current=current)
    context.update(data, query=urlencode({k: v for k, v in params.items() if v}))
    if request.headers.get("HX-Request"):
        return render(request, "scheduler/_queue_tables.html", context)
    return _page(request, context)


def _page(request: HttpRequest, context: dict, status: int = 200) -> HttpResponse:
    context = {
        "clusters": cluster_list(),
        "states": selectors.STATES,
        "refresh_s": QUEUE_REFRESH_S,
        **context,
    }
    return render(request, "scheduler/queue.html", context, status=status)
