"""Prometheus metrics for operators (`/metrics`).

Two kinds:
- process metrics, counted where they happen: HTTP requests (the middleware below)
  and the scheduler's cycles and actions (`observe_cycle`, for the cycle task). Every
  process of the machine keeps them in files in one directory, settings.METRICS_DIR
  (ALLOT_METRICS_DIR, default $ALLOT_VAR_DIR/prometheus), and `/metrics` adds up every
  file there. A process's files are named after its slot, not its pid
  (`process_identity`): gunicorn worker n of the web instance on port p of host h is
  `web-h-p-n`, Celery worker process i of node w is `worker-w-i`; a restarted process
  continues its slot's counts, so a restart of any process (or of a whole web instance)
  loses no count and the directory does not grow with restarts. Nothing deletes these
  files while the installation runs; empty the directory only with every process stopped.
- state metrics, read from the database at scrape time by collectors (tree and audit
  counts, jobs and GPUs by cluster, project and state, last cycle per cluster): the
  constant `ops.collectors.STATE_COLLECTORS`, handed to `exposition`.
"""

from __future__ import annotations

import os
import re
import socket
import time
from collections.abc import Callable, Iterable
from pathlib import Path

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Histogram,
    generate_latest,
    multiprocess,
)
from prometheus_client import values as metric_values
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import REGISTRY

REQUESTS = Counter(
    "allot_http_requests_total",
    "HTTP requests by route, method and status",
    ["route", "method", "status"],
)
REQUEST_SECONDS = Histogram(
    "allot_http_request_duration_seconds",
    "HTTP request duration by route and method",
    ["route", "method"],
    buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10),
)
CYCLE_SECONDS = Histogram(
    "allot_cycle_duration_seconds",
    "Scheduling cycle duration by cluster",
    ["cluster"],
    buckets=(0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30),
)
SCHEDULER_ACTIONS = Counter(
    "allot_scheduler_actions_total",
    "Starts and stops decided by the scheduler, by cluster, action and rule",
    ["cluster", "action", "rule"],
)

# Set by the process's launcher before it counts anything (config/gunicorn.py for the web
# workers, config/celery.py for Celery); other processes use their host and pid.
PROCESS_IDENTITY_ENV = "ALLOT_METRICS_PROCESS"
_UNSAFE = re.compile(r"[^A-Za-z0-9.-]+")


def identity_part(text: str) -> str:
    """`text` as a piece of a metrics file name (no underscore: the files' separator)."""
    return _UNSAFE.sub("-", text).strip("-") or "x"


def process_identity() -> str:
    """The slot whose files this process writes (see the module docstring)."""
    return os.environ.get(PROCESS_IDENTITY_ENV) or identity_part(
        f"proc-{socket.gethostname()}-{os.getpid()}"
    )


def use_process_files(directory: Path | None) -> None:
    """Keep this process's metrics in `directory` (None: in memory, this process only).
    Called at start (ops.apps), before anything is counted."""
    if directory is None:
        return
    directory.mkdir(parents=True, exist_ok=True)
    os.environ["PROMETHEUS_MULTIPROC_DIR"] = str(directory)
    metric_values.ValueClass = metric_values.MultiProcessValue(process_identity)


# A function yielding metric families read at scrape time.
StateCollector = Callable[[], Iterable[Metric]]


def observe_cycle(*, cluster: str, duration_s: float, actions: Iterable[tuple[str, str]]) -> None:
    """For the cycle task: record one cycle's duration and its (action, rule) pairs,
    e.g. ("start", "fair share"), ("stop", "preempted for a higher-ranked project")."""
    CYCLE_SECONDS.labels(cluster).observe(duration_s)
    for action, rule in actions:
        SCHEDULER_ACTIONS.labels(cluster, action, rule).inc()


class _StateCollector:
    def __init__(self, collectors: Iterable[StateCollector]) -> None:
        self.collectors = tuple(collectors)

    def collect(self) -> Iterable[Metric]:
        for collect in self.collectors:
            yield from collect()


def exposition(collectors: Iterable[StateCollector]) -> bytes:
    """The text format of every metric: this process's (or all processes') and the state
    read by `collectors`."""
    registry = CollectorRegistry()
    if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        multiprocess.MultiProcessCollector(registry)
        output = generate_latest(registry)
    else:
        output = generate_latest(REGISTRY)
    state = CollectorRegistry()
    state.register(_StateCollector(collectors))
    return output + generate_latest(state)


class RequestMetricsMiddleware:
    """Count every request by its route pattern (not its path, to keep labels bounded)."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        started = time.perf_counter()
        response = self.get_response(request)
        match = getattr(request, "resolver_match", None)
        route = f"/{match.route}" if match is not None and match.route else "unmatched"
        REQUEST_SECONDS.labels(route, request.method).observe(time.perf_counter() - started)
        REQUESTS.labels(route, request.method, str(response.status_code)).inc()
        return response


def gauge(name: str, documentation: str, labels: list[str], rows: Iterable[tuple]) -> Metric:
    """A gauge family from (label values..., value) rows."""
    family = GaugeMetricFamily(name, documentation, labels=labels)
    for *values, value in rows:
        family.add_metric([str(v) for v in values], float(value))
    return family
