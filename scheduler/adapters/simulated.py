"""The adapter of a simulated cluster: `scheduler.adapters.simcluster` reached over HTTP.

Connection failures become `AdapterUnavailable` (the cycle records them and changes
nothing); refusals (busy GPUs, an unhealthy host, bad input) become a non-retryable
`AdapterError` with the cluster's message; timeouts and server errors a retryable one.
A start that times out or loses its connection is never sent again: the adapter looks
the attempt id up and adopts the job if the cluster has it (adopt-before-retry).

When the process does not know the cluster (a fresh state directory), the adapter
registers it again from the `Cluster` row's shape and options and repeats the request.

Plain Python (no Django): `adapter_for_cluster` reads the row's attributes only.

httpx is imported when an adapter is made, not with the module: the URL conf and the
Celery app import this module through the services, and httpx's import (~0.2 CPU-s with
the command line client its package loads: click, rich, pygments) would be part of the
start of every process, most of which never reach a cluster
(tests/ops/test_gunicorn_worker_init.py).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from scheduler.adapters.base import (
    AdapterError,
    AdapterUnavailable,
    ClusterHost,
    ClusterJob,
    ClusterJobState,
    ClusterPlacement,
    HostHealthState,
    StartRequest,
    verifies_certificates,
)
from scheduler.adapters.simcluster import configured_url

if TYPE_CHECKING:
    import httpx

DEFAULT_TIMEOUT_S = 5.0
# Options of `Cluster.adapter_options` that the simulated cluster itself takes.
CLUSTER_SETTINGS = ("speed", "start_delay_s", "exit_delay_s", "retention_s", "max_ended")


class SimulatedClusterAdapter:
    """`ClusterAdapter` over the simulated cluster `cluster` served at `base_url`.

    `registration` (hosts, gpus_per_host and settings) lets the adapter create the
    cluster in the process when the process does not know it."""

    def __init__(
        self,
        *,
        base_url: str,
        cluster: str,
        timeout_s: float = DEFAULT_TIMEOUT_S,
        registration: Mapping[str, Any] | None = None,
    ) -> None:
        import httpx  # when an adapter is made, not at start (the module doc)

        self.base_url = base_url.rstrip("/")
        self.cluster = cluster
        self.registration = dict(registration) if registration else None
        self._path = f"/v1/clusters/{quote(cluster, safe='')}"
        self._client = httpx.Client(
            base_url=self.base_url,
            timeout=httpx.Timeout(timeout_s, connect=min(timeout_s, 2.0)),
            verify=verifies_certificates(self.base_url),
        )

    # the protocol

    def hosts(self) -> Sequence[ClusterHost]:
        data = self._call("GET", "/hosts", idempotent=True)
        return [_host(item) for item in data["hosts"]]

    def jobs(self) -> Sequence[ClusterJob]:
        data = self._call("GET", "/jobs", idempotent=True)
        return [_job(item) for item in data["jobs"]]

    def start(self, request: StartRequest) -> ClusterJob:
        """Start the attempt on exactly the GPUs asked; adopt it when the cluster already
        has it (also after a timeout: looked up, never sent twice)."""
        body = {
            "attempt_id": request.attempt_id,
            "job_name": request.job_name,
            "gpus": request.gpus,
            "placements": [
                {"host": p.host, "gpu_indices": list(p.gpu_indices)} for p in request.placements
            ],
            "spec": dict(request.spec),
            "run_for_s": request.run_for_s,
            "project": request.project,
            "grace_s": request.grace_s,
            "kind": request.kind,
        }
        try:
            return _job(self._call("POST", "/jobs", json=body))
        except _Unanswered as exc:
            adopted = self.find_attempt(request.attempt_id)
            if adopted is not None:
                return adopted
            raise AdapterError(
                f"start of attempt {request.attempt_id} on {self._where} got no answer "
                f"({exc.cause}) and the cluster does not have it: it did not start",
                retryable=True,
            ) from exc.__cause__

    def stop(self, attempt_id: str, grace_s: float) -> None:
        """Ask for a graceful stop; a no-op when the cluster no longer has the attempt."""
        try:
            self._call(
                "POST",
                f"/attempts/{quote(attempt_id, safe='')}/stop",
                json={"grace_s": grace_s},
                idempotent=True,
            )
        except _Missing:
            return

    def set_host_health(self, host: str, health: HostHealthState, reason: str) -> None:
        self._call(
            "PUT",
            f"/hosts/{quote(host, safe='')}/health",
            json={"health": str(health), "reason": reason},
            idempotent=True,
        )

    def close(self) -> None:
        self._client.close()

    # beyond the protocol

    def find_attempt(self, attempt_id: str) -> ClusterJob | None:
        """The cluster's job carrying `attempt_id`, or None when it has none."""
        try:
            return _job(
                self._call("GET", f"/attempts/{quote(attempt_id, safe='')}", idempotent=True)
            )
        except _Missing:
            return None

    def ensure_cluster(self) -> list[ClusterHost]:
        """Create the cluster in the process (idempotent) and return its hosts."""
        if self.registration is None:
            raise AdapterError(
                f"no shape to register cluster {self.cluster!r} with", retryable=False
            )
        data = self._send("PUT", "", json=self.registration, idempotent=True)
        return [_host(item) for item in data["hosts"]]

    def delete_cluster(self) -> None:
        """Forget the cluster and all its jobs in the process (a no-op when it has none)."""
        try:
            self._send("DELETE", "", idempotent=True)
        except _UnknownCluster:
            return

    def __enter__(self) -> SimulatedClusterAdapter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # HTTP

    @property
    def _where(self) -> str:
        return f"simulated cluster {self.cluster!r} at {self.base_url}"

    def _call(self, method: str, path: str, *, json: Any = None, idempotent: bool = False) -> Any:
        """A request to the cluster; registers the cluster once if the process lacks it."""
        try:
            return self._send(method, path, json=json, idempotent=idempotent)
        except _UnknownCluster:
            if self.registration is None:
                raise AdapterError(
                    f"the simulated cluster process at {self.base_url} has no cluster "
                    f"{self.cluster!r}",
                    retryable=False,
                ) from None
            self.ensure_cluster()
            return self._send(method, path, json=json, idempotent=idempotent)

    def _send(self, method: str, path: str, *, json: Any = None, idempotent: bool) -> Any:
        import httpx  # loaded already: the adapter's __init__ imported it

        url = self._path + path
        for attempt in (1, 2):
            try:
                response = self._client.request(method, url, json=json)
                break
            except (httpx.ConnectError, httpx.ConnectTimeout) as exc:
                # Never reached the server: safe to report as unreachable for any method.
                raise AdapterUnavailable(f"cannot reach the {self._where}: {exc}") from exc
            except httpx.TransportError as exc:
                # Sent, but no answer (timeout, connection dropped by a restart): the
                # request may have been applied. Idempotent requests are repeated once.
                if idempotent and attempt == 1:
                    continue
                if not idempotent:
                    raise _Unanswered(_describe(exc)) from exc
                if isinstance(exc, httpx.TimeoutException):
                    raise AdapterError(f"the {self._where} did not answer in time: {exc}") from exc
                raise AdapterUnavailable(
                    f"lost the connection to the {self._where}: {exc}"
                ) from exc
        if response.status_code < 300:
            return response.json()
        code, detail = _error_of(response)
        if code == "unknown_cluster":
            raise _UnknownCluster(detail)
        if response.status_code == 404 and code in ("unknown_job",):
            raise _Missing(detail)
        if response.status_code >= 500:
            raise AdapterError(f"the {self._where} failed: {response.status_code} {detail}")
        raise AdapterError(f"the {self._where} refused: {detail}", retryable=False)


class _Unanswered(Exception):
    def __init__(self, cause: str) -> None:
        super().__init__(cause)
        self.cause = cause


class _Missing(Exception):
    pass


class _UnknownCluster(Exception):
    pass


def _describe(exc: httpx.TransportError) -> str:
    import httpx  # loaded already: the adapter's __init__ imported it

    kind = "timed out" if isinstance(exc, httpx.TimeoutException) else "connection lost"
    return f"{kind}: {exc}" if str(exc) else kind


def _error_of(response: httpx.Response) -> tuple[str, str]:
    try:
        body = response.json()
        return str(body.get("code", "")), str(body.get("detail", response.text))
    except ValueError:
        return "", response.text[:500] or response.reason_phrase


_time = dt.datetime.fromisoformat
_JOB_STATES = {state.value: state for state in ClusterJobState}


def _host(item: Mapping[str, Any]) -> ClusterHost:
    return ClusterHost(
        name=item["name"],
        gpus=int(item["gpus"]),
        health=HostHealthState(item["health"]),
        reason=item.get("reason") or "",
    )


def _job(item: Mapping[str, Any]) -> ClusterJob:
    """A listed job as a `ClusterJob` (thousands per listing: kept lean)."""
    started, ended = item["started_at"], item["ended_at"]
    return ClusterJob(
        attempt_id=item["attempt_id"],
        state=_JOB_STATES[item["state"]],
        placements=tuple(
            [ClusterPlacement(p["host"], tuple(p["gpu_indices"])) for p in item["placements"]]
        ),
        started_at=_time(started) if started else None,
        ended_at=_time(ended) if ended else None,
        detail=item["detail"],
        external_id=str(item["job_id"]),
    )


def registration_for(cluster: Any) -> dict[str, Any]:
    """What the simulated cluster process needs to create `cluster` (a `Cluster` row)."""
    options = cluster.adapter_options or {}
    body: dict[str, Any] = {"hosts": cluster.host_count, "gpus_per_host": cluster.gpus_per_host}
    body.update({key: options[key] for key in CLUSTER_SETTINGS if key in options})
    return body


def adapter_for_cluster(cluster: Any) -> SimulatedClusterAdapter:
    """The adapter of a `Cluster` row: its `adapter_url` (blank: `ALLOT_SIMCLUSTER_URL`),
    its name, and `adapter_options` (`timeout_s` and the simulated cluster's settings)."""
    options = cluster.adapter_options or {}
    return SimulatedClusterAdapter(
        base_url=cluster.adapter_url or configured_url(),
        cluster=cluster.name,
        timeout_s=float(options.get("timeout_s", DEFAULT_TIMEOUT_S)),
        registration=registration_for(cluster),
    )


def metrics_url_for_cluster(cluster: Any) -> str:
    """The simulated cluster's DCGM-exporter metrics page of a `Cluster` row."""
    base = (cluster.adapter_url or configured_url()).rstrip("/")
    return f"{base}/v1/clusters/{quote(cluster.name, safe='')}/metrics"
