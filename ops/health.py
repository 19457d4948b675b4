"""`/healthz` (the whole service) and `/healthz/web` (this web process): named checks,
each fast and independent.

A check returns a dict with `ok` (bool) and anything worth showing; `stale` (a list)
names what is behind. A failing check marked `critical` makes the answer 503
("unavailable"), others make it "degraded" (still 200). `/healthz` runs every check and
lists in `stale` what every failing check names, so a monitor says at once "beat" or
"cluster adapter: h100"; `/healthz/web` runs only the checks marked `web` (database,
broker) and is what a load balancer asks, so a stalled scheduler does not take the web
servers out of rotation. The checks are `ops.checks.CHECKS`, a constant."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass

CheckResult = dict


@dataclass(frozen=True)
class Check:
    name: str
    run: Callable[[], CheckResult]
    critical: bool
    web: bool


def run_checks(checks: Iterable[Check], *, web_only: bool = False) -> tuple[int, dict]:
    """(HTTP status, body) of every check of `checks` (the `web` ones only if asked)."""
    body: dict = {"status": "ok", "stale": [], "checks": {}}
    status = 200
    for check in checks:
        if web_only and not check.web:
            continue
        started = time.perf_counter()
        try:
            result = dict(check.run())
        except Exception as exc:  # a health check reports failures, it does not raise
            result = {"ok": False, "error": f"{type(exc).__name__}: {exc}"[:300]}
        result["ms"] = round((time.perf_counter() - started) * 1000, 1)
        result["critical"] = check.critical
        body["checks"][check.name] = result
        if not result["ok"]:
            body["stale"] += result.get("stale") or [check.name]
            if check.critical:
                status, body["status"] = 503, "unavailable"
            elif body["status"] == "ok":
                body["status"] = "degraded"
    return status, body
