"""REST endpoints of the live service. Thin: parse, call a service or selector, serialise.

Job rows are built as plain dicts (an array submission answers with up to 10,000 of
them, and a serializer per row would cost more than storing them); the serializers in
`scheduler.api.serializers` describe them for the schema.
"""

from __future__ import annotations

from typing import Any

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import status
from rest_framework.response import Response

from budgets.permissions import roles_read_once
from budgets.selectors import tree_index
from config.api_fields import refuse_any_field
from config.api_schema import ErrorSerializer, error_response, paginated
from config.api_times import api_times
from config.api_views import ApiView
from config.errors import NotFound
from config.pagination import PAGE_PARAMETERS, Pagination
from config.query import read_api_query
from scheduler.api import serializers as s
from scheduler.models import Job
from scheduler.selectors import eta as eta_selectors
from scheduler.selectors import jobs as selectors
from scheduler.selectors.clusters import gpus_in_use, resolve_cluster
from scheduler.selectors.now import sbatch_refusals, short_reserve_now
from scheduler.selectors.protection import job_protected_until
from scheduler.selectors.utilization import job_utilization, metrics_settings
from scheduler.services import clusters as cluster_services
from scheduler.services import eta as eta_services
from scheduler.services import hosts as host_services
from scheduler.services import jobs as job_services
from scheduler.services import previews as preview_services
from scheduler.services import utilization as utilization_services

IDEMPOTENCY_HEADER = OpenApiParameter(
    "Idempotency-Key",
    OpenApiTypes.STR,
    OpenApiParameter.HEADER,
    required=False,
    description=(
        "Makes the submission safe to retry (IETF httpapi Idempotency-Key draft): a retry "
        "with the same key and the same body answers with the first request's jobs "
        "(`replayed: true`, header `Idempotent-Replayed: true`) and creates none; the same "
        "key with another body gets 422. Keys are kept 24 hours, per user. Up to 255 "
        'printable ASCII characters, e.g. a UUID, optionally quoted ("...").'
    ),
)
UNPROCESSABLE = OpenApiResponse(
    ErrorSerializer,
    description="The Idempotency-Key was used before with another request body",
)


def _validated(serializer_class, data) -> dict:
    serializer = serializer_class(data=data)
    serializer.is_valid(raise_exception=True)
    return serializer.validated_data


class JobFilterQuery(s.JobFilter):
    multi = ("state", "kind")


def job_row(
    job: Job,
    *,
    project_path: str,
    cluster_name: str,
    submitter: str,
    show_spec: bool,
) -> dict[str, Any]:
    """A job as `JobOutput` describes it."""
    return {
        "id": job.pk,
        "name": job.name,
        "project": job.project_id,
        "project_path": project_path,
        "cluster": job.cluster_id,
        "cluster_name": cluster_name,
        "submitter": submitter,
        "gpus": job.gpus,
        "min_runtime_s": job.min_runtime_s,
        "allocated": job.min_runtime_s > 0,
        "resumable": job.resumable,
        "priority": job.priority,
        "kind": job.kind,
        "duration_s": job.duration_s,
        "state": job.state,
        "state_reason": job.state_reason,
        "submitted_at": job.submitted_at,
        "queued_at": job.queued_at,
        "first_started_at": job.first_started_at,
        "ended_at": job.ended_at,
        "progress_s": job.progress_s,
        "attempt_count": job.attempt_count,
        "array_id": job.array_id,
        "array_index": job.array_index,
        "spec": job.spec if show_spec else None,
    }


def _rows(request, jobs: list[Job], paths: dict[int, str] | None = None) -> list[dict]:
    readable = selectors.spec_readable_projects(request.user)
    paths = paths if paths is not None else selectors.project_paths()
    return [
        job_row(
            job,
            project_path=paths.get(job.project_id, ""),
            cluster_name=job.cluster.name,
            submitter=job.submitter.get_username(),
            show_spec=selectors.spec_visible(request.user, job, readable),
        )
        for job in jobs
    ]


class JobListApi(ApiView):
    # Submitting stores jobs, their events and an Idempotency-Key, none of them audited
    # by pghistory (config.middleware.HistoryMiddleware).
    writes_audited = False

    def dispatch(self, request, *args, **kwargs):
        # Listing and submitting change no one's roles: the participant gate and the
        # service's authorization read them once (a write otherwise reads them afresh).
        with roles_read_once():
            return super().dispatch(request, *args, **kwargs)

    @extend_schema(
        parameters=[s.JobFilter, *PAGE_PARAMETERS],
        responses={200: paginated(s.JobOutput, "PaginatedJobList")},
        operation_id="jobs_list",
        summary="Jobs, newest first (everyone's; the spec only where you may read it)",
    )
    def get(self, request):
        filters = read_api_query(JobFilterQuery, request).validated_data
        project, cluster = filters.get("project"), filters.get("cluster")
        jobs = selectors.job_list(
            actor=request.user,
            mine=filters.get("mine", False),
            project_ids=None if project is None else selectors.projects_at_or_below(project),
            cluster_id=None if cluster is None else resolve_cluster(cluster).pk,
            states=filters.get("state", ()),
            kinds=filters.get("kind", ()),
        )
        paginator = Pagination()
        page = paginator.paginate_queryset(jobs, request, view=self)
        return paginator.get_paginated_response(_rows(request, page))

    @extend_schema(
        parameters=[s.SubmitQuery, IDEMPOTENCY_HEADER],
        request=s.JobSubmitInput,
        responses={
            201: s.SubmitOutput,
            200: OpenApiResponse(s.DryRunOutput, description="`?dry_run=1`: nothing stored"),
            422: UNPROCESSABLE,
        },
        summary="Submit a job (or an array of identical jobs)",
    )
    def post(self, request):
        query = read_api_query(s.SubmitQuery, request).validated_data
        data = _validated(s.JobSubmitInput, request.data)
        result = job_services.job_submit(
            actor=request.user,
            idempotency_key=request.headers.get("Idempotency-Key"),
            fingerprint=job_services.fingerprint_of(request.data),
            dry_run=query["dry_run"],
            **data,
        )
        if result.estimate is not None:
            return Response(_dry_run_body(result, data["array"]))
        job = result.jobs[0] if result.jobs else None
        cluster_name = job.cluster.name if job else ""
        rows = [
            job_row(
                j,
                project_path=result.project_path,
                cluster_name=cluster_name,
                submitter=request.user.get_username(),
                show_spec=True,
            )
            for j in result.jobs
        ]
        body = {
            "count": len(rows),
            "array_id": result.array_id,
            "replayed": result.replayed,
            "jobs": rows,
        }
        headers = {"Idempotent-Replayed": "true"} if result.replayed else None
        return Response(body, status=status.HTTP_201_CREATED, headers=headers)


def _dry_run_body(result: job_services.SubmitResult, array: int) -> dict:
    job = result.jobs[0]
    return {
        "dry_run": True,
        "count": array,
        "job": {
            "name": job.name,
            "project": job.project_id,
            "project_path": result.project_path,
            "cluster": job.cluster_id,
            "cluster_name": job.cluster.name,
            "gpus": job.gpus,
            "min_runtime_s": job.min_runtime_s,
            "allocated": job.min_runtime_s > 0,
            "resumable": job.resumable,
            "priority": job.priority,
            "kind": job.kind,
            "duration_s": job.duration_s,
            "spec": job.spec,
        },
        "estimate": result.estimate,
    }


def utilization_body(figures: dict[str, Any]) -> dict[str, Any]:
    """`job_utilization`'s figures as `JobUtilizationOutput` describes them (built
    directly: the serializer, built for each request, cost more than the figures)."""
    return {
        name: value if value is None or name == "last_sample_at" else float(value)
        for name, value in figures.items()
    }


def _job_detail_body(request, job: Job) -> dict:
    body = _rows(request, [job], {job.project_id: job.project_path})[0]  # job_detail's
    attempts = selectors.job_attempts(job)
    body["attempts"] = s.AttemptOutput(attempts, many=True).data if attempts else []
    body["protected_until"] = job_protected_until(job, attempts)
    body["utilization"] = utilization_body(job_utilization(attempts))
    body["events"] = selectors.job_events(job)
    stored = selectors.job_stored_queue(job)  # with the last cycle the ETA check needs
    body["queue"] = selectors.queue_info_in(job, stored)
    current = eta_services.eta_refresh_request(
        jobs=[job], last_cycles={job.cluster_id: stored.last_cycle_id} if stored else None
    )
    body["eta"] = eta_selectors.job_eta(job=job, current=current)
    body["blockers"] = selectors.job_blockers(job, body["queue"])
    return body


class JobDetailApi(ApiView):
    @extend_schema(
        responses=s.JobDetailOutput,
        operation_id="jobs_retrieve",
        summary="One job: attempts, events, and where it stands in the queue, why, and its "
        "estimated start",
    )
    def get(self, request, job_id: int):
        job = selectors.job_detail(job_id=job_id)
        if job is None:
            raise NotFound(f"There is no job with id {job_id}.")
        return Response(_job_detail_body(request, job))


class JobCancelApi(ApiView):
    @extend_schema(
        request=None,
        responses={200: s.JobDetailOutput},
        summary="Cancel a job (pending: at once; running: stopped with the grace period)",
    )
    def post(self, request, job_id: int):
        refuse_any_field(request.data)
        job_services.job_cancel(actor=request.user, job_id=job_id)
        return Response(_job_detail_body(request, selectors.job_detail(job_id=job_id)))


def queue_row(row: dict[str, Any], queued_at: str | None) -> dict[str, Any]:
    """A row of `selectors.queue_page` as `QueueRowOutput` describes it (built directly:
    the serializer cost more than the rest of a 50-row page); `queued_at`: its time as
    the encoder writes it (`api_times`, cheaper)."""
    return {
        "position": row["position"],
        "project_position": row["project_position"],
        "project_rank": row["project_rank"],
        "job": row["job"],
        "name": row["name"],
        "project": row["project"],
        "project_path": row["project_path"],
        "submitter": row["submitter"],
        "gpus": row["gpus"],
        "kind": row["kind"],
        "min_runtime_s": row["min_runtime_s"],
        "priority": row["priority"],
        "state": row["state"],
        "queued_at": queued_at,
        "fairshare_factor": row["metric"],
        "reason": row["reason"],
    }


class QueueApi(ApiView):
    @extend_schema(
        parameters=[
            s.QueueFilter,
            *PAGE_PARAMETERS,
        ],
        responses={200: s.QueuePageOutput},
        summary="Pending jobs in the order they will start, with position and reason",
    )
    def get(self, request):
        filters = read_api_query(s.QueueFilter, request).validated_data
        cluster = resolve_cluster(filters["cluster"], with_queue_seen=True)
        paginator = Pagination()
        limit = paginator.get_limit(request)
        offset = paginator.get_offset(request)
        page = selectors.queue_page(
            cluster=cluster,
            offset=offset,
            limit=limit,
            submitter_id=request.user.pk if filters.get("mine") else None,
        )
        paginator.count, paginator.limit, paginator.offset = page.count, limit, offset
        paginator.request = request
        times = api_times([row["queued_at"] for row in page.rows])
        return Response(
            {
                "count": page.count,
                "next": paginator.get_next_link(),
                "previous": paginator.get_previous_link(),
                "computed_at": page.computed_at,
                "cycle": page.cycle_id,
                "results": [queue_row(r, t) for r, t in zip(page.rows, times, strict=True)],
            }
        )


def cluster_row(row: dict[str, Any]) -> dict[str, Any]:
    """A row of `selectors.cluster_list` as `ClusterOutput` describes it."""
    cluster, last = row["cluster"], row["last_cycle"]
    counts = {k: v for k, v in row.items() if k not in ("cluster", "last_cycle")}
    return {
        "id": cluster.pk,
        "name": cluster.name,
        "adapter": cluster.adapter,
        **counts,
        "policy": {name: getattr(cluster, name) for name in cluster_services.POLICY_FIELDS},
        "metrics": metrics_settings(cluster),
        "last_cycle": None
        if last is None
        else {
            "id": last.pk,
            "started_at": last.started_at,
            "duration_ms": last.duration_ms,
            "starts": last.starts,
            "stops": last.stops,
            "errors": [str(e) for e in last.errors or []],
        },
    }


class ClusterListApi(ApiView):
    @extend_schema(
        responses=s.ClusterOutput(many=True),
        summary="Clusters: policy, hosts by health, jobs and the last cycle",
    )
    def get(self, request):
        rows = [cluster_row(row) for row in selectors.cluster_list()]
        return Response(s.ClusterOutput(rows, many=True).data)


def cluster_detail_body(cluster_id: int, actor: Any) -> dict:
    """One cluster as `ClusterDetailOutput` describes it, as `actor` reads it (NotFound
    when there is none)."""
    rows = selectors.cluster_list(cluster_id=cluster_id)
    if not rows:
        raise NotFound(f"There is no cluster with id {cluster_id}.")
    body = cluster_row(rows[0])
    body["policy_events"] = selectors.cluster_policy_events(cluster_id=cluster_id)
    body["short_reserve"] = short_reserve_now(cluster=rows[0]["cluster"])
    body["sbatch_refusals"] = sbatch_refusals(cluster=rows[0]["cluster"], actor=actor)
    return s.ClusterDetailOutput(body).data


class ClusterDetailApi(ApiView):
    @extend_schema(
        responses=s.ClusterDetailOutput,
        operation_id="clusters_retrieve",
        summary="One cluster, as in the list, its policy changes and refused sbatch jobs",
    )
    def get(self, request, cluster_id: int):
        return Response(cluster_detail_body(cluster_id, request.user))

    @extend_schema(
        request=s.ClusterPolicyInput,
        responses={200: s.ClusterDetailOutput},
        summary="Change a cluster's scheduling policy (staff; audited)",
    )
    def patch(self, request, cluster_id: int):
        return _settings_patch(
            request, cluster_id, s.ClusterPolicyInput, cluster_services.cluster_policy_update
        )


class ClusterMetricsApi(ApiView):
    @extend_schema(
        request=s.ClusterMetricsInput,
        responses={200: s.ClusterDetailOutput},
        summary="Change where a cluster's GPU metrics are read: Prometheus URL, host and "
        "GPU label names, label selector, bearer token (staff; audited, never the token)",
    )
    def patch(self, request, cluster_id: int):
        return _settings_patch(
            request, cluster_id, s.ClusterMetricsInput, utilization_services.cluster_metrics_update
        )


def _settings_patch(request, cluster_id: int, input_class, update) -> Response:
    """A PATCH of one group of a cluster's settings: the body validated by
    `input_class`, applied (permission-checked and audited) by the service `update`,
    answered with the cluster as GET shows it."""
    data = dict(_validated(input_class, request.data))
    reason = data.pop("reason")
    update(actor=request.user, cluster_id=cluster_id, changes=data, reason=reason)
    return Response(cluster_detail_body(cluster_id, request.user))


def _host_row(host, used: dict) -> dict:
    return {
        "id": host.pk,
        "cluster": host.cluster_id,
        "cluster_name": host.cluster.name,
        "name": host.name,
        "gpus": host.gpus,
        "gpus_in_use": used.get((host.cluster_id, host.name), 0),
        "health": host.health,
        "health_reason": host.health_reason,
        "health_changed_at": host.health_changed_at,
        "ready_for_repair_at": host.ready_for_repair_at,
    }


class HostListApi(ApiView):
    @extend_schema(
        parameters=[s.HostFilter, *PAGE_PARAMETERS],
        responses={200: paginated(s.HostOutput, "PaginatedHostList")},
        operation_id="hosts_list",
        summary="Hosts with their health and GPUs in use",
    )
    def get(self, request):
        filters = read_api_query(s.HostFilter, request).validated_data
        cluster_id = None
        if "cluster" in filters:
            cluster_id = resolve_cluster(filters["cluster"]).pk
        hosts = selectors.host_list(cluster_id=cluster_id, health=filters.get("health"))
        paginator = Pagination()
        page = paginator.paginate_queryset(hosts, request, view=self)
        used = gpus_in_use(page)
        return paginator.get_paginated_response(
            s.HostOutput([_host_row(h, used) for h in page], many=True).data
        )


class HostDetailApi(ApiView):
    def _body(self, host_id: int) -> dict:
        found = selectors.host_detail(host_id=host_id)
        if found is None:
            raise NotFound(f"There is no host with id {host_id}.")
        host, events = found
        body = _host_row(host, gpus_in_use([host]))
        body["events"] = events
        return s.HostDetailOutput(body).data

    @extend_schema(
        responses=s.HostDetailOutput,
        operation_id="hosts_retrieve",
        summary="One host and its health history",
    )
    def get(self, request, host_id: int):
        return Response(self._body(host_id))

    @extend_schema(
        request=s.HostHealthInput,
        responses={200: s.HostDetailOutput, 409: error_response(409)},
        summary="Drain a host or end its drain (staff and the cluster's operators)",
    )
    def patch(self, request, host_id: int):
        data = _validated(s.HostHealthInput, request.data)
        host_services.host_set_health(
            actor=request.user, host_id=host_id, health=data["health"], reason=data["reason"]
        )
        return Response(self._body(host_id))


def preview_body(preview) -> dict:
    """A preview as `PreviewOutput` describes it; its nodes named as budget changes
    name them (id, path, name)."""
    index = tree_index()
    return {
        "id": preview.pk,
        "state": preview.state,
        "progress": preview.progress,
        **index.ref(preview.node_id),
        "cluster": preview.cluster_id,
        "cluster_name": preview.cluster.name,
        "requester": preview.requester.get_username(),
        "window_days": preview.window_days,
        "weights": [{**index.ref(int(w["node"])), "weight": w["weight"]} for w in preview.weights],
        "idle_reclaim": preview.idle_reclaim,
        "error": preview.error,
        "created_at": preview.created_at,
        "started_at": preview.started_at,
        "finished_at": preview.finished_at,
        "result": preview.result,
    }


class PreviewCreateApi(ApiView):
    @extend_schema(
        request=s.PreviewInput,
        responses={
            201: s.PreviewOutput,
            429: OpenApiResponse(
                ErrorSerializer,
                description="`throttled`: you already have "
                f"{preview_services.MAX_PREVIEWS_IN_FLIGHT_PER_USER} previews queued or "
                "running (`limit`); retry after the `Retry-After` header's seconds. Nothing "
                "is stored",
            ),
        },
        operation_id="previews_create",
        summary="Preview a weight change: replay the cluster's recent jobs with the current "
        "and the proposed weights (runs in the background; poll the preview)",
    )
    def post(self, request):
        data = _validated(s.PreviewInput, request.data)
        preview = preview_services.preview_request(
            actor=request.user,
            node=data["node"],
            weights=data["weights"],
            cluster=data["cluster"],
            days=data["days"],
            idle_reclaim=data["idle_reclaim"],
        )
        preview = preview_services.preview_get(actor=request.user, preview_id=preview.pk)
        return Response(s.PreviewOutput(preview_body(preview)).data, status=201)


class PreviewDetailApi(ApiView):
    @extend_schema(
        responses=s.PreviewOutput,
        operation_id="previews_retrieve",
        summary="One what-if preview: its progress, and the figures when done (its "
        "requester and the managers who may change those weights)",
    )
    def get(self, request, preview_id: int):
        preview = preview_services.preview_get(actor=request.user, preview_id=preview_id)
        return Response(s.PreviewOutput(preview_body(preview)).data)
