"""The simulated cluster's HTTP API (Starlette), shaped after slurmrestd.

Cluster API (what `scheduler.adapters.simulated` calls):

| method and path | what |
|---|---|
| `GET /health` | `{"status": "ok", "clusters": [names]}` |
| `GET /v1/clusters` | `{"clusters": [names]}` |
| `PUT /v1/clusters/{name}` | `{"hosts", "gpus_per_host", "speed"?, "start_delay_s"?, "exit_delay_s"?, "retention_s"?, "max_ended"?}`: 201 created, 200 exists (settings updated), 409 exists with another shape |
| `GET /v1/clusters/{name}` / `DELETE` | settings, hosts and the clock / forget the cluster and its jobs |
| `GET /v1/clusters/{name}/hosts` | `{"hosts": [{name, gpus, health, reason, used_gpus, ...}]}` |
| `PUT /v1/clusters/{name}/hosts/{host}/health` | `{"health": "healthy"|"draining"|"down", "reason"}` |
| `GET /v1/clusters/{name}/jobs` | `{"jobs": [...]}`: active jobs and those ended within the retention period |
| `POST /v1/clusters/{name}/jobs` | start: `{"attempt_id", "job_name", "gpus", "placements": [{"host", "gpu_indices"}], "spec", "run_for_s", "project", "grace_s"}`: 201 started, 200 an existing job with that attempt id (adopted), 409 refused (busy GPUs, unhealthy host, attempt already ended), 400 malformed |
| `GET /v1/clusters/{name}/attempts/{attempt_id}` | one job by attempt id, 404 when the cluster has none |
| `POST /v1/clusters/{name}/attempts/{attempt_id}/stop` | `{"grace_s"}`: graceful stop, idempotent |
| `GET /v1/clusters/{name}/metrics` / `GET /metrics` | DCGM-exporter GPU metrics (Prometheus text) of one cluster / of all, see `metrics` |

Control API (tests and the demo play the world outside Allot):

| method and path | what |
|---|---|
| `POST /control/clusters/{name}/hosts/{host}/fail` | `{"reason"}`: the host is down, its jobs end `lost` |
| `POST /control/clusters/{name}/hosts/{host}/recover` | the host is back |
| `POST /control/clusters/{name}/jobs/{job_id}/cancel` | `{"reason"}`: like `scancel` outside Allot (also `.../attempts/{attempt_id}/cancel`) |
| `POST /control/clusters/{name}/foreign-jobs` | `{"job_name", "placements", "run_for_s"}`: a job without an attempt id |
| `POST /control/clusters/{name}/faults` | `{"start_timeouts": N, "delay_s"}`: the next N starts are kept but answered late |

Errors are `{"code", "detail"}` with a 4xx status. Job and host shapes are in `state`.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from scheduler.adapters.simcluster import metrics
from scheduler.adapters.simcluster.state import SimError, SimState

# A handler answers with a Response or a JSON-able dict (sent as JSON, status 200).
Result = Response | dict[str, Any]
Handler = Callable[[Request], Awaitable[Result]]


async def _body(request: Request) -> dict[str, Any]:
    raw = await request.body()
    if not raw:
        return {}
    try:
        body = json.loads(raw)
    except ValueError as exc:
        raise SimError(400, "invalid_json", f"the body is not valid JSON: {exc}") from None
    if not isinstance(body, dict):
        raise SimError(400, "invalid_json", "the body must be a JSON object")
    return body


def _name(request: Request) -> str:
    """The cluster the request names."""
    return str(request.path_params["cluster"])


def _route(path: str, handler: Handler, methods: Sequence[str] = ("GET",)) -> Route:
    """A route whose handler's refusals (`SimError`) become their JSON error answers."""

    async def endpoint(request: Request) -> Response:
        try:
            result = await handler(request)
        except SimError as exc:
            return JSONResponse({"code": exc.code, "detail": exc.detail}, exc.status)
        return result if isinstance(result, Response) else JSONResponse(result)

    return Route(path, endpoint, methods=list(methods))


def build_app(state: SimState) -> Starlette:
    """The ASGI app over one `SimState` (every handler runs on the server's one loop)."""

    async def health(request: Request) -> Result:
        return {"status": "ok", "clusters": state.list_clusters()}

    async def clusters(request: Request) -> Result:
        return {"clusters": state.list_clusters()}

    async def cluster(request: Request) -> Result:
        if request.method == "PUT":
            data, created = state.put_cluster(_name(request), await _body(request))
            return JSONResponse(data, status_code=201 if created else 200)
        if request.method == "DELETE":
            state.delete_cluster(_name(request))
            return {"deleted": _name(request)}
        return state.get_cluster(_name(request))

    async def hosts(request: Request) -> Result:
        return {"hosts": state.hosts(_name(request))}

    async def host_health(request: Request) -> Result:
        body = await _body(request)
        return state.set_host_health(_name(request), request.path_params["host"], body)

    async def jobs(request: Request) -> Result:
        if request.method == "GET":
            return Response(state.jobs_json(_name(request)), media_type="application/json")
        job, created, delay_s = state.start(_name(request), await _body(request))
        if delay_s > 0:  # test hook: the job exists, the answer comes too late
            await asyncio.sleep(delay_s)
        return JSONResponse({**job, "adopted": not created}, status_code=201 if created else 200)

    async def attempt(request: Request) -> Result:
        return state.job(_name(request), attempt_id=request.path_params["attempt_id"])

    async def attempt_stop(request: Request) -> Result:
        body = await _body(request)
        return state.stop(_name(request), request.path_params["attempt_id"], body)

    async def cluster_metrics(request: Request) -> Result:
        text = metrics.cluster_metrics(state, _name(request))
        return Response(text, media_type=metrics.CONTENT_TYPE)

    async def all_metrics(request: Request) -> Result:
        return Response(metrics.all_metrics(state), media_type=metrics.CONTENT_TYPE)

    cluster_path = "/v1/clusters/{cluster}"
    return Starlette(
        routes=[
            _route("/health", health),
            _route("/metrics", all_metrics),
            _route(f"{cluster_path}/metrics", cluster_metrics),
            _route("/v1/clusters", clusters),
            _route(cluster_path, cluster, ("GET", "PUT", "DELETE")),
            _route(f"{cluster_path}/hosts", hosts),
            _route(f"{cluster_path}/hosts/{{host}}/health", host_health, ("PUT",)),
            _route(f"{cluster_path}/jobs", jobs, ("GET", "POST")),
            _route(f"{cluster_path}/attempts/{{attempt_id}}", attempt),
            _route(f"{cluster_path}/attempts/{{attempt_id}}/stop", attempt_stop, ("POST",)),
            *_control_routes(state),
        ]
    )


def _control_routes(state: SimState) -> list[Route]:
    """The test controls (/control/...): failing and recovering hosts, cancelling and
    injecting jobs, faults."""

    async def host_fail(request: Request) -> Result:
        body = await _body(request)
        reason = body.get("reason") or ""
        return state.fail_host(_name(request), request.path_params["host"], str(reason))

    async def host_recover(request: Request) -> Result:
        return state.recover_host(_name(request), request.path_params["host"])

    async def job_cancel(request: Request) -> Result:
        body = await _body(request)
        reason = str(body.get("reason") or "")
        if "attempt_id" in request.path_params:
            return state.cancel(
                _name(request), reason, attempt_id=request.path_params["attempt_id"]
            )
        return state.cancel(_name(request), reason, job_id=request.path_params["job_id"])

    async def foreign_jobs(request: Request) -> Result:
        job = state.create_foreign(_name(request), await _body(request))
        return JSONResponse(job, status_code=201)

    async def faults(request: Request) -> Result:
        return state.set_faults(_name(request), await _body(request))

    control_path = "/control/clusters/{cluster}"
    return [
        _route(f"{control_path}/hosts/{{host}}/fail", host_fail, ("POST",)),
        _route(f"{control_path}/hosts/{{host}}/recover", host_recover, ("POST",)),
        _route(f"{control_path}/jobs/{{job_id:int}}/cancel", job_cancel, ("POST",)),
        _route(f"{control_path}/attempts/{{attempt_id}}/cancel", job_cancel, ("POST",)),
        _route(f"{control_path}/foreign-jobs", foreign_jobs, ("POST",)),
        _route(f"{control_path}/faults", faults, ("POST",)),
    ]


def app_for_state_dir(state_dir: Path, **defaults: Any) -> Starlette:
    return build_app(SimState(state_dir, defaults=defaults))
