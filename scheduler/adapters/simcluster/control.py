"""A client of the simulated cluster's control API: the world outside Allot (host
failures, `scancel`, foreign jobs, injected start timeouts), for tests and the demo."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any
from urllib.parse import quote

import httpx


class SimClusterControl:
    """Control of one simulated cluster `cluster` in the process at `base_url`."""

    def __init__(self, base_url: str, cluster: str, *, timeout_s: float = 10.0) -> None:
        self.cluster = cluster
        self._client = httpx.Client(base_url=base_url.rstrip("/"), timeout=timeout_s, verify=False)
        name = quote(cluster, safe="")
        self._api = f"/v1/clusters/{name}"
        self._control = f"/control/clusters/{name}"

    def _json(self, response: httpx.Response) -> dict[str, Any]:
        response.raise_for_status()
        data: dict[str, Any] = response.json()
        return data

    def create(self, *, hosts: int, gpus_per_host: int = 8, **settings: Any) -> dict[str, Any]:
        """Create the cluster (idempotent); settings: speed, start_delay_s, exit_delay_s,
        retention_s, max_ended."""
        body = {"hosts": hosts, "gpus_per_host": gpus_per_host, **settings}
        return self._json(self._client.put(self._api, json=body))

    def info(self) -> dict[str, Any]:
        return self._json(self._client.get(self._api))

    def delete(self) -> None:
        self._json(self._client.delete(self._api))

    def jobs(self) -> list[dict[str, Any]]:
        jobs: list[dict[str, Any]] = self._json(self._client.get(f"{self._api}/jobs"))["jobs"]
        return jobs

    def hosts(self) -> list[dict[str, Any]]:
        hosts: list[dict[str, Any]] = self._json(self._client.get(f"{self._api}/hosts"))["hosts"]
        return hosts

    def fail_host(self, host: str, reason: str = "") -> dict[str, Any]:
        """The host fails: it is down and its jobs end `lost`."""
        url = f"{self._control}/hosts/{quote(host, safe='')}/fail"
        return self._json(self._client.post(url, json={"reason": reason}))

    def recover_host(self, host: str) -> dict[str, Any]:
        url = f"{self._control}/hosts/{quote(host, safe='')}/recover"
        return self._json(self._client.post(url))

    def cancel(
        self, *, job_id: int | None = None, attempt_id: str | None = None, reason: str = ""
    ) -> dict[str, Any]:
        """Cancel a job outside Allot (like `scancel`): it ends `cancelled`."""
        if attempt_id is not None:
            url = f"{self._control}/attempts/{quote(attempt_id, safe='')}/cancel"
        else:
            url = f"{self._control}/jobs/{job_id}/cancel"
        return self._json(self._client.post(url, json={"reason": reason}))

    def foreign_job(
        self,
        placements: Sequence[tuple[str, Sequence[int]]],
        *,
        run_for_s: float | None = None,
        job_name: str = "foreign job",
    ) -> dict[str, Any]:
        """Start a job without an Allot attempt id on [(host, gpu indices), ...]."""
        body = {
            "job_name": job_name,
            "placements": [{"host": h, "gpu_indices": list(g)} for h, g in placements],
            "run_for_s": run_for_s,
        }
        return self._json(self._client.post(f"{self._control}/foreign-jobs", json=body))

    def start_timeouts(self, count: int, *, delay_s: float = 2.0) -> dict[str, Any]:
        """The next `count` starts are kept but answered only after `delay_s` seconds."""
        body = {"start_timeouts": count, "delay_s": delay_s}
        return self._json(self._client.post(f"{self._control}/faults", json=body))

    def close(self) -> None:
        self._client.close()

    def __enter__(self) -> SimClusterControl:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
