"""REST for the ledger's figures: `GET /api/v1/usage/` (GPU-hours per project and step),
`GET /api/v1/occupancy/` (a cluster's occupancy buckets per step) and
`GET /api/v1/fairshare/` (`sshare -l` for a cluster). Everyone signed in reads them.

Thin: validate the query, call `ledger.selectors`, serialize. A query the schema cannot
refuse (an unknown cluster or project, since not before until, a period over 366 days)
gets a 400 that names the field, documented on each operation."""

from __future__ import annotations

from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import serializers
from rest_framework.response import Response
from rest_framework.views import APIView

from budgets.selectors import tree_index
from config.api_fields import ChoiceField, DeprecatedFloatField, InputSerializer, TimeField
from config.api_schema import UNKNOWN_PARAMETER, ErrorSerializer, paginated
from config.api_views import ApiView
from config.pagination import PAGE_PARAMETERS, Pagination
from config.query import read_api_query
from ledger import selectors
from ledger.models import ClusterHour
from ledger.utilization import effective_gpu_h, utilization
from scheduler.api.serializers import ClusterRefField, ProjectRefField

PERIOD_RULES = (
    f"Invalid input; `field` names it: {UNKNOWN_PARAMETER}, a malformed or out-of-range "
    "value, an unknown cluster or project, `since` not before `until`, or a period longer "
    f"than {selectors.MAX_PERIOD.days} days"
)
BAD_QUERY = OpenApiResponse(ErrorSerializer, description=PERIOD_RULES)


def page_response(
    request,
    view: APIView,
    rows,
    output: type[serializers.Serializer],
    fill=None,
    span: selectors.Span | None = None,
):
    """A limit/offset page of `rows` (paginated in the database for a queryset) through
    `output`; `fill` may add to the page's rows first. With `span`, the page says the
    window its rows cover (`window_start`, `window_end`) beside `count`."""
    paginator = Pagination()
    page = paginator.paginate_queryset(rows, request, view=view)
    if fill is not None:
        fill(page)
    response = paginator.get_paginated_response(output(page, many=True).data)
    if span is not None:
        results = response.data.pop("results")
        stamp = serializers.DateTimeField().to_representation
        response.data["window_start"] = stamp(span.since)
        response.data["window_end"] = stamp(span.until)
        response.data["results"] = results
    return response


def window_fields() -> dict[str, serializers.Field]:
    """The window a page of reporting figures covers, as every reporting surface states
    it (docs/concepts.md#windows)."""
    return {
        "window_start": serializers.DateTimeField(
            help_text="Start of the period the rows cover (UTC): `since`, or `days` before "
            "`window_end`"
        ),
        "window_end": serializers.DateTimeField(
            help_text="End of the period, excluded (UTC): the end of the last complete hour "
            "(default), or `until` rounded down to a whole hour when earlier. The hour now "
            "going on is never included"
        ),
    }


def cluster_field(**kwargs) -> ClusterRefField:
    """A cluster's id or name in a query: the one type every operation gives `cluster`."""
    kwargs.setdefault("help_text", "The cluster's id or name")
    return ClusterRefField(**kwargs)


def list_schema(query, output, *, name: str, operation_id: str, summary: str):
    """The schema of a paginated ledger list read with `query` (with its documented 400),
    the page stating its window (`window_fields`)."""
    return extend_schema(
        parameters=[query, *PAGE_PARAMETERS],
        responses={200: paginated(output, name, window_fields()), 400: BAD_QUERY},
        operation_id=operation_id,
        summary=summary,
    )


class PeriodQuery(InputSerializer):
    """A cluster and a period, as the ledger's and the dashboards' endpoints read them."""

    cluster = cluster_field()
    since = TimeField(
        required=False,
        help_text="Start of the period; default: `days` before `until`",
    )
    until = TimeField(
        required=False,
        help_text="End of the period, excluded, rounded down to a whole hour; default and "
        "at the latest: the end of the last complete hour (the hour now going on is never "
        "included)",
    )
    days = ChoiceField(
        choices=selectors.DAYS_CHOICES,
        required=False,
        help_text="The window: its length in days when `since` is not given (default 7)",
    )
    step = ChoiceField(
        choices=list(selectors.STEPS),
        required=False,
        help_text="hour (default) or day (UTC)",
    )

    def span(self) -> selectors.Span:
        args = self.validated_data
        return selectors.resolve_span(
            days=args.get("days"),
            since=args.get("since"),
            until=args.get("until"),
            step=args.get("step"),
        )

    def period(self) -> selectors.Period:
        """The cluster's period; an unknown cluster is a 400 naming `cluster`."""
        span = self.span()
        cluster = selectors.resolve_cluster(self.validated_data["cluster"])
        return selectors.Period(since=span.since, until=span.until, step=span.step, cluster=cluster)


class UsageQuery(PeriodQuery):
    cluster = cluster_field(required=False, help_text="The cluster's id or name (default: all)")
    project = ProjectRefField(
        required=False,
        help_text="A budget node's id or path (`org/program/project`): the projects at or "
        "below it (default: all)",
    )


class UsageRowOutput(serializers.Serializer):
    start = serializers.DateTimeField(source="step", help_text="Start of the step (UTC)")
    cluster = serializers.IntegerField(source="cluster_id")
    cluster_name = serializers.CharField(source="cluster__name")
    project = serializers.IntegerField(source="project_id", help_text="The project's node id")
    project_path = serializers.CharField(help_text="The project's slug path")
    unallocated_gpu_h = serializers.FloatField(help_text="GPU-time of its unallocated runs")
    demand_gpu_h = serializers.FloatField(
        help_text="Demand: GPU-time of its allocated jobs present (pending or running)"
    )
    capped_entitled_gpu_h = serializers.FloatField(
        source="entitled_gpu_h",
        help_text="Demand-capped entitlement: entitled share x healthy capacity, capped by "
        "its demand, hour by hour (not the budget tree's uncapped entitled GPU-hours)",
    )
    entitled_gpu_h = DeprecatedFloatField(
        help_text="Deprecated: the same figure as `capped_entitled_gpu_h` under its old name, "
        "kept for one API version (v1) and removed after; read `capped_entitled_gpu_h`"
    )
    delivered_gpu_h = serializers.FloatField(
        help_text="Delivered GPU-hours: GPU-time of its allocated runs, what the ledger "
        "charged it; compare with capped_entitled_gpu_h"
    )
    within_entitlement_gpu_h = serializers.FloatField(
        help_text="Allocated within entitlement: the part delivered within the entitlement, "
        "sum of min(allocated, entitled) over the step's hours"
    )
    measured_gpu_h = serializers.FloatField(
        help_text="GPU-time of its runs (allocated and unallocated) with a known GPU "
        "utilization (docs/concepts.md#utilization)"
    )
    utilized_gpu_h = serializers.FloatField(
        help_text="Measured GPU-time x GPU utilization (docs/concepts.md#utilization)"
    )
    utilization = serializers.FloatField(
        allow_null=True,
        help_text="GPU utilization (0-1): utilized / measured GPU-hours; null when "
        "nothing was measured (unknown, never 0)",
    )
    effective_gpu_h = serializers.FloatField(
        allow_null=True,
        help_text="Effective GPU-hours: GPU-hours of its runs (allocated and unallocated) "
        "x GPU utilization; null when utilization is unknown",
    )


class UsageApi(ApiView):
    @list_schema(
        UsageQuery,
        UsageRowOutput,
        name="PaginatedUsageList",
        operation_id="usage_list",
        summary="GPU-hours per project and step: allocated, unallocated, demand, "
        "demand-capped entitlement, delivered, measured and utilized (GPU utilization)",
    )
    def get(self, request):
        query = read_api_query(UsageQuery, request)
        args = query.validated_data
        span = query.span()
        cluster = None
        if args.get("cluster"):
            cluster = selectors.resolve_cluster(args["cluster"])
        index = tree_index()
        node_id = (
            selectors.resolve_node(args["project"], index=index) if "project" in args else None
        )
        rows = selectors.usage_rows(
            viewer=request.user, span=span, cluster=cluster, node_id=node_id
        )

        def paths(page):
            for row in page:
                pid = row["project_id"]
                row["project_path"] = index.path(pid) if pid in index.nodes else str(pid)
                share = utilization(row["utilized_gpu_h"] or 0.0, row["measured_gpu_h"] or 0.0)
                row["utilization"] = share
                held = (row["allocated_gpu_h"] or 0.0) + (row["unallocated_gpu_h"] or 0.0)
                row["effective_gpu_h"] = effective_gpu_h(held, share)

        return page_response(request, self, rows, UsageRowOutput, fill=paths, span=span)


class OccupancyRowOutput(serializers.Serializer):
    start = serializers.DateTimeField(source="step", help_text="Start of the step (UTC)")
    capacity_gpu_h = serializers.FloatField(
        help_text="Capacity: every GPU of every host, whatever its health; the buckets sum to it"
    )
    healthy_gpu_h = serializers.FloatField(help_text="Healthy capacity: GPU-time of healthy hosts")
    within_entitlement_gpu_h = serializers.FloatField(
        help_text="Allocated within entitlement: allocated runs up to each project's entitlement"
    )
    borrowed_gpu_h = serializers.FloatField(help_text="Allocated above entitlement (borrowed)")
    unallocated_gpu_h = serializers.FloatField(help_text="Unallocated runs (free)")
    idle_demand_gpu_h = serializers.FloatField(
        help_text="Idle while work waited: idle while allocated work waited"
    )
    idle_gpu_h = serializers.FloatField(help_text="Idle, no work waiting")
    draining_gpu_h = serializers.FloatField(help_text="Idle GPUs of draining hosts")
    down_gpu_h = serializers.FloatField(help_text="GPUs of hosts that were down")


assert set(ClusterHour.BUCKETS) < set(OccupancyRowOutput().fields)


class OccupancyApi(ApiView):
    @list_schema(
        PeriodQuery,
        OccupancyRowOutput,
        name="PaginatedOccupancyList",
        operation_id="occupancy_list",
        summary="A cluster's GPU-hours per step in the occupancy buckets (they sum to the "
        "capacity); steps without ledger rows are left out",
    )
    def get(self, request):
        period = read_api_query(PeriodQuery, request).period()
        rows = selectors.occupancy_rows(period, viewer=request.user)
        return page_response(request, self, rows, OccupancyRowOutput, span=period)


class FairshareQuery(InputSerializer):
    cluster = cluster_field()


class FairshareNodeOutput(serializers.Serializer):
    id = serializers.IntegerField()
    path = serializers.CharField()
    name = serializers.CharField()
    kind = serializers.CharField(help_text="organisation, program or project")
    depth = serializers.IntegerField(help_text="0 for the root")
    raw_shares = serializers.FloatField(
        allow_null=True, help_text="Its weight; null for the root, which has none"
    )
    norm_shares = serializers.FloatField(
        allow_null=True, help_text="Its share among its siblings (1 for the root)"
    )
    entitled_share = serializers.FloatField(help_text="Entitled share: its share of the cluster")
    raw_usage = serializers.FloatField(
        help_text="Usage: charged GPU-hours in the cluster's usage window ending at `as_of` "
        "(the window the last cycle read); with a half-life, decayed usage (each GPU-second "
        "weighted by its age): `usage_window` says which"
    )
    norm_usage = serializers.FloatField(help_text="Its part of the whole cluster's usage")
    effective_usage = serializers.FloatField(
        allow_null=True, help_text="Its part of its siblings' usage together (Fair Tree's U)"
    )
    level_fs = serializers.FloatField(
        allow_null=True,
        help_text="Level fair share: norm_shares / effective_usage; null for the root and when "
        "infinite",
    )
    level_fs_infinite = serializers.BooleanField(help_text="It used nothing: level FS is ∞")
    fairshare = serializers.FloatField(
        allow_null=True,
        help_text="Fair-share factor (1 best; an inner node: its best leaf's); null with no "
        "entitlement (entitled_share 0)",
    )
    rank = serializers.IntegerField(
        allow_null=True,
        help_text="Rank: a project's place in the fair-share order among the projects with "
        "an entitlement (1 goes first); null with no entitlement and for inner nodes",
    )


class FairshareOutput(serializers.Serializer):
    cluster = serializers.IntegerField()
    cluster_name = serializers.CharField()
    as_of = serializers.DateTimeField(
        help_text="The time every figure is as of: the cluster's last scheduling cycle (the "
        "queue's `computed_at`), so factor and rank are the queue's; now before the "
        "first cycle (`from_cycle` false)"
    )
    from_cycle = serializers.BooleanField(
        help_text="True when the figures are the last cycle's; false before the first cycle"
    )
    cycle = serializers.IntegerField(
        allow_null=True, help_text="The id of that cycle's record (null before the first)"
    )
    usage_window = serializers.CharField(
        help_text="The window `raw_usage` is measured over, in the words of the queue's "
        "reasons: 'over 7 days', or with a half-life 'over a decayed window (half-life "
        "2.0 h)'"
    )
    nodes = FairshareNodeOutput(many=True, help_text="Every node, depth first, the root first")


class FairshareApi(ApiView):
    @extend_schema(
        parameters=[FairshareQuery],
        responses={200: FairshareOutput, 400: BAD_QUERY},
        operation_id="fairshare_retrieve",
        summary="Fair share as of the last scheduling cycle, like `sshare -l`: every node's "
        "shares, usage, level FS, factor and rank",
    )
    def get(self, request):
        query = read_api_query(FairshareQuery, request)
        cluster = selectors.resolve_cluster(query.validated_data["cluster"])
        answer = selectors.fairshare(viewer=request.user, cluster=cluster)
        return Response(FairshareOutput(answer).data)
