"""Reading GPU utilization where clusters publish it (no Django).

Two readers return the same thing, `GpuSample`s of `DCGM_FI_DEV_GPU_UTIL` per host and
GPU index, each with the GPU's `DCGM_FI_PROF_SM_ACTIVE` (as a percentage) and
`DCGM_FI_DEV_FB_USED` (MiB) at the same time where they are published (None where not:
many exporters leave the profiling metrics off):

- `read_prometheus`: Prometheus's HTTP API, `query_range` over a window with a step
  (what a real cluster's DCGM exporters are scraped into), filtered by an optional
  label selector; host and GPU come from the label names the cluster's settings give
  (`Hostname` and `gpu` for the DCGM exporter).
- `read_exporter`: one scrape of an exporter's `/metrics` (the simulated cluster's, when
  no Prometheus is configured): every GPU's value now.

A GPU without a value at a time is simply absent: the caller treats it as unknown,
never as zero. Every failure to read (unreachable, an error status, a body that is not
what the API promises) raises `MetricsUnavailable` with a sentence for the cycle record.

httpx is imported by the two functions that read, not with the module, as in
scheduler/adapters/simulated.py: the API's serializers import this module, and most
processes never read a metric.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

from scheduler.adapters.base import verifies_certificates

UTIL_METRIC = "DCGM_FI_DEV_GPU_UTIL"
SM_ACTIVE_METRIC = "DCGM_FI_PROF_SM_ACTIVE"  # a ratio, 0-1
FB_USED_METRIC = "DCGM_FI_DEV_FB_USED"  # MiB
DEFAULT_HOST_LABEL = "Hostname"
DEFAULT_GPU_LABEL = "gpu"
TIMEOUT_S = 5.0


class MetricsUnavailable(Exception):
    """The metrics could not be read; the message says why."""


@dataclass(frozen=True, slots=True)
class GpuSample:
    host: str
    gpu: int
    at_s: float  # epoch seconds
    util_pct: float  # 0-100
    sm_active_pct: float | None = None  # 0-100; None: not published (unknown)
    fb_used_mib: float | None = None  # None: not published (unknown)


@dataclass(frozen=True, slots=True)
class PrometheusSource:
    """Where and how to read one cluster's GPU metrics from Prometheus."""

    url: str
    host_label: str = DEFAULT_HOST_LABEL
    gpu_label: str = DEFAULT_GPU_LABEL
    selector: str = ""  # extra label matchers, e.g. 'cluster="a100"'
    bearer_token: str = ""

    def query(self, metric: str = UTIL_METRIC) -> str:
        return f"{metric}{{{self.selector}}}" if self.selector else metric


def _sample(labels: Mapping[str, str], host_label: str, gpu_label: str) -> tuple[str, int] | None:
    """(host, GPU index) named by a series' labels, None when either is missing."""
    host, gpu = labels.get(host_label), labels.get(gpu_label)
    if not host or gpu is None:
        return None
    try:
        return host, int(gpu)
    except ValueError:
        return None


def _value(raw: Any) -> float | None:
    try:
        value = float(raw)
    except (TypeError, ValueError):
        return None
    return value if math.isfinite(value) else None


Key = tuple[str, int, float]  # host, GPU index, time


def _extras(key: Key, sm: Mapping[Key, float], fb: Mapping[Key, float]) -> dict[str, Any]:
    """The optional metrics of a GPU at a time: SM active as a percentage (DCGM
    publishes a 0-1 ratio), frame buffer used in MiB; None where there is no value."""
    ratio, used = sm.get(key), fb.get(key)
    return {
        "sm_active_pct": None if ratio is None else min(100.0, max(0.0, ratio * 100.0)),
        "fb_used_mib": None if used is None else max(0.0, used),
    }


def _query_range(
    source: PrometheusSource, metric: str, start_s: float, end_s: float, step_s: float
) -> dict[Key, float]:
    """`metric`'s value per (host, GPU, time) over [start_s, end_s] that Prometheus has."""
    headers = {"Authorization": f"Bearer {source.bearer_token}"} if source.bearer_token else {}
    params: dict[str, str | float] = {
        "query": source.query(metric),
        "start": start_s,
        "end": end_s,
        "step": step_s,
    }
    url = source.url.rstrip("/") + "/api/v1/query_range"
    import httpx  # at the first read, not at start (the module doc)

    try:
        response = httpx.get(
            url,
            params=params,
            headers=headers,
            timeout=TIMEOUT_S,
            verify=verifies_certificates(url),
        )
    except httpx.HTTPError as exc:
        raise MetricsUnavailable(f"Prometheus at {source.url} did not answer: {exc}") from exc
    if response.status_code != 200:
        raise MetricsUnavailable(
            f"Prometheus at {source.url} answered {response.status_code}: {response.text[:200]}"
        )
    try:
        data = response.json()["data"]
        series: Iterable[dict[str, Any]] = data["result"] if data["resultType"] == "matrix" else []
        return dict(_matrix_values(series, source))
    except (ValueError, KeyError, TypeError) as exc:
        raise MetricsUnavailable(f"Prometheus at {source.url} sent an unreadable answer") from exc


def _optional(
    source: PrometheusSource, metric: str, start_s: float, end_s: float, step_s: float
) -> dict[Key, float]:
    """An optional metric's values; none (unknown) when it cannot be read."""
    try:
        return _query_range(source, metric, start_s, end_s, step_s)
    except MetricsUnavailable:
        return {}


def read_prometheus(
    source: PrometheusSource, start_s: float, end_s: float, step_s: float
) -> list[GpuSample]:
    """Every GPU's utilization at each step of [start_s, end_s] that Prometheus has, with
    its SM activity and memory used where Prometheus has them too (a failure to read
    those leaves them unknown; a failure to read the utilization raises)."""
    util = _query_range(source, UTIL_METRIC, start_s, end_s, step_s)
    if not util:
        return []
    sm = _optional(source, SM_ACTIVE_METRIC, start_s, end_s, step_s)
    fb = _optional(source, FB_USED_METRIC, start_s, end_s, step_s)
    return [GpuSample(*key, value, **_extras(key, sm, fb)) for key, value in util.items()]


def _matrix_values(
    series: Iterable[dict[str, Any]], source: PrometheusSource
) -> Iterable[tuple[Key, float]]:
    for one in series:
        where = _sample(one["metric"], source.host_label, source.gpu_label)
        if where is None:
            continue
        for at, raw in one["values"]:
            value = _value(raw)
            if value is not None:
                yield (where[0], where[1], float(at)), value


def parse_exposition(
    text: str,
    at_s: float,
    *,
    host_label: str = DEFAULT_HOST_LABEL,
    gpu_label: str = DEFAULT_GPU_LABEL,
) -> list[GpuSample]:
    """The `DCGM_FI_DEV_GPU_UTIL` samples of a Prometheus text exposition, stamped `at_s`,
    with each GPU's SM activity and memory used where the exposition has them."""
    wanted = (UTIL_METRIC, SM_ACTIVE_METRIC, FB_USED_METRIC)
    values: dict[str, dict[Key, float]] = {name: {} for name in wanted}
    try:
        for family in text_string_to_metric_families(text):
            if family.name not in values:
                continue
            for sample in family.samples:
                where = _sample(sample.labels, host_label, gpu_label)
                value = _value(sample.value)
                if where is not None and value is not None:
                    values[family.name][(where[0], where[1], at_s)] = value
    except ValueError as exc:
        raise MetricsUnavailable(f"the exporter's metrics could not be parsed: {exc}") from exc
    sm, fb = values[SM_ACTIVE_METRIC], values[FB_USED_METRIC]
    return [
        GpuSample(*key, value, **_extras(key, sm, fb)) for key, value in values[UTIL_METRIC].items()
    ]


def read_exporter(url: str, at_s: float, *, timeout_s: float = TIMEOUT_S) -> list[GpuSample]:
    """One scrape of an exporter's metrics page (`url` is the page itself)."""
    import httpx  # at the first read, not at start (the module doc)

    try:
        response = httpx.get(url, timeout=timeout_s, verify=verifies_certificates(url))
    except httpx.HTTPError as exc:
        raise MetricsUnavailable(f"the metrics at {url} did not answer: {exc}") from exc
    if response.status_code != 200:
        raise MetricsUnavailable(f"the metrics at {url} answered {response.status_code}")
    return parse_exposition(response.text, at_s)
