"""REST for the dashboards' figures: `GET /api/v1/waits/` (the others, usage/occupancy/
fair share, are the ledger's endpoints)."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema
from rest_framework import serializers

from config.api_schema import paginated
from config.api_views import ApiView
from config.pagination import PAGE_PARAMETERS
from config.query import read_api_query
from dashboards import selectors
from ledger.api import BAD_QUERY, PeriodQuery, page_response, window_fields


class WaitRowOutput(serializers.Serializer):
    at = serializers.DateTimeField(help_text="Start of the step (UTC)")
    kind = serializers.CharField(help_text="The jobs' kind: debug, training, ...")
    jobs = serializers.IntegerField(help_text="Jobs whose first attempt started in the step")
    p50_wait_s = serializers.FloatField(help_text="Median of first start - submission (s)")
    p90_wait_s = serializers.FloatField(help_text="90th percentile of the wait (s)")


class WaitsApi(ApiView):
    @extend_schema(
        parameters=[PeriodQuery, *PAGE_PARAMETERS],
        responses={
            200: paginated(WaitRowOutput, "PaginatedWaitList", window_fields()),
            400: BAD_QUERY,
        },
        operation_id="waits_list",
        summary="p50/p90 wait by job kind per step (first start - submission)",
    )
    def get(self, request):
        period = read_api_query(PeriodQuery, request).period()
        rows = selectors.wait_rows(period)
        return page_response(request, self, rows, WaitRowOutput, span=period)
