"""`/healthz` for load balancers: named checks, each fast and independent.

A check returns a dict with `ok` (bool) and anything worth showing. A failing check
marked `critical` makes the answer 503; others make it `degraded` (still 200), so a
stale scheduler does not take the web servers out of a load balancer.
Apps add checks with `register_check` (the live service registers the age of each
cluster's last cycle)."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

CheckResult = dict


@dataclass(frozen=True)
class Check:
    name: str
    run: Callable[[], CheckResult]
    critical: bool


_CHECKS: dict[str, Check] = {}


def register_check(name: str, run: Callable[[], CheckResult], *, critical: bool) -> None:
    _CHECKS[name] = Check(name, run, critical)


def run_checks() -> tuple[int, dict]:
    """(HTTP status, body) of every registered check."""
    body: dict = {"status": "ok", "checks": {}}
    status = 200
    for check in _CHECKS.values():
        started = time.perf_counter()
        try:
            result = dict(check.run())
        except Exception as exc:  # a health check reports failures, it does not raise
            result = {"ok": False, "error": f"{type(exc).__name__}: {exc}"[:300]}
        result["ms"] = round((time.perf_counter() - started) * 1000, 1)
        result["critical"] = check.critical
        body["checks"][check.name] = result
        if not result["ok"]:
            if check.critical:
                status, body["status"] = 503, "unavailable"
            elif body["status"] == "ok":
                body["status"] = "degraded"
    return status, body
