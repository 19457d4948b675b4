"""GPU utilization: where a cluster's metrics are read (settings, audited) and their
collection into `UtilizationSample` rows per attempt (docs/concepts.md#utilization).

- `cluster_metrics_update`: change a cluster's metrics settings (`METRICS_FIELDS`: the
  Prometheus URL, the host and GPU label names, an extra label selector, a bearer
  token), checked by `clean_metrics_settings`, recorded as an append-only
  `ClusterPolicyEvent` (the token's value is never recorded, only that it changed).
- `utilization_collect`: one collection of a cluster, run by the Celery task
  `scheduler.collect_utilization` (never on a request): reads Prometheus's
  `query_range` from where the last collection stopped, or, with no Prometheus and a
  simulated cluster, scrapes the simulated cluster's `/metrics` once; attributes the
  samples to the attempts that held the GPUs (`ledger.utilization.attribute`) and
  stores one row per attempt with a known value. Metrics that cannot be read leave
  no row (unknown, never zero): the error is kept on `ClusterMetrics.last_error` and
  nothing else stops.
- `utilization_compact`: an attempt that ended over a day ago keeps one row (two when
  its GPUs were idle to its end: the idle tail apart).
"""

from __future__ import annotations

import datetime as dt
import logging
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from django.conf import settings
from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from config.errors import ValidationFailed
from config.text import clean_reason
from ledger.utilization import Hold, attribute
from scheduler.adapters.gpu_metrics import (
    GpuSample,
    MetricsUnavailable,
    PrometheusSource,
    read_exporter,
    read_prometheus,
)
from scheduler.adapters.simulated import metrics_url_for_cluster
from scheduler.models import (
    AdapterKind,
    Attempt,
    Cluster,
    ClusterMetrics,
    UtilizationSample,
)
from scheduler.services.clusters import locked_for_policy_change, record_policy_event

log = logging.getLogger(__name__)

METRICS_FIELDS = ("prometheus_url", "host_label", "gpu_label", "selector", "bearer_token")
LABEL_PATTERN = r"^[a-zA-Z_][a-zA-Z0-9_]{0,99}$"  # a Prometheus label name, exactly
LABEL_RE = re.compile(LABEL_PATTERN.strip("^$"))  # fullmatch: no trailing newline either
TOKEN_RE = re.compile(r"[\x21-\x7e]*")  # visible ASCII: it goes into an HTTP header
PROMETHEUS_URL_PATTERN = r"^https?://[^\s/?#]+[^\s?#]*$"
METRICS_MAX_LENGTH = {
    "prometheus_url": 500,
    "host_label": 100,
    "gpu_label": 100,
    "selector": 500,
    "bearer_token": 1000,
}
# label matchers: name op "value", comma separated
SELECTOR_RE = re.compile(
    r'^\s*[a-zA-Z_][a-zA-Z0-9_]*\s*(=|!=|=~|!~)\s*"(?:[^"\\]|\\.)*"\s*'
    r'(,\s*[a-zA-Z_][a-zA-Z0-9_]*\s*(=|!=|=~|!~)\s*"(?:[^"\\]|\\.)*"\s*)*$'
)
FIRST_LOOKBACK_S = 300.0  # how far back the first collection of a cluster reads
MAX_WINDOW_S = 3600.0  # at most this much per collection (a long outage: the rest is unknown)


def _text(values: Mapping[str, Any], name: str, max_length: int) -> str:
    value = values[name]
    if not isinstance(value, str):
        raise ValidationFailed(f"{name}: must be a string", field=name)
    value = value.strip()
    if len(value) > max_length:
        raise ValidationFailed(f"{name}: must be at most {max_length} characters", field=name)
    return value


def _clean_prometheus_url(url: str) -> str:
    if url and not re.match(PROMETHEUS_URL_PATTERN, url):
        raise ValidationFailed(
            f"prometheus_url: must be an http:// or https:// URL, got {url[:60]!r}",
            field="prometheus_url",
        )
    if url and "@" in urlsplit(url).netloc:
        raise ValidationFailed(
            "prometheus_url: must not carry credentials (user:password@); "
            "give a bearer_token instead",
            field="prometheus_url",
        )
    return url.rstrip("/")


def clean_metrics_settings(values: Mapping[str, Any]) -> dict[str, str]:
    """`values` (some or all of `METRICS_FIELDS`) checked; raises ValidationFailed naming
    the field and the reason."""
    unknown = [name for name in values if name not in METRICS_FIELDS]
    if unknown:
        raise ValidationFailed(
            f"{unknown[0]}: not a metrics setting; they are {', '.join(METRICS_FIELDS)}",
            field=str(unknown[0]),
        )
    cleaned: dict[str, str] = {}
    if "prometheus_url" in values:
        cleaned["prometheus_url"] = _clean_prometheus_url(
            _text(values, "prometheus_url", METRICS_MAX_LENGTH["prometheus_url"])
        )
    for name in ("host_label", "gpu_label"):
        if name in values:
            label = values[name]
            if not isinstance(label, str) or not LABEL_RE.fullmatch(label):
                raise ValidationFailed(
                    f"{name}: must be a Prometheus label name (letters, digits, _), got {label!r}",
                    field=name,
                )
            cleaned[name] = label
    if "selector" in values:
        selector = _text(values, "selector", METRICS_MAX_LENGTH["selector"])
        if selector and not SELECTOR_RE.match(selector):
            raise ValidationFailed(
                'selector: must be label matchers like cluster="a100", job=~"dcgm.*"',
                field="selector",
            )
        cleaned["selector"] = selector
    if "bearer_token" in values:
        token = _text(values, "bearer_token", METRICS_MAX_LENGTH["bearer_token"])
        if not TOKEN_RE.fullmatch(token):
            raise ValidationFailed(
                "bearer_token: must be visible ASCII characters without spaces",
                field="bearer_token",
            )
        cleaned["bearer_token"] = token
    return cleaned


def _shown(name: str, value: str) -> str:
    """A setting as the audit records it: never a token's value."""
    if name == "bearer_token":
        return "set" if value else "unset"
    return value


def cluster_metrics_update(
    *, actor, cluster_id: int, changes: Mapping[str, Any], reason: Any
) -> ClusterMetrics:
    """Change where a cluster's GPU metrics are read; staff only (`actor` None: the
    system). The fields that differ are saved with one append-only `ClusterPolicyEvent`
    (`{"metrics.<field>": [before, after]}`, a token shown as set/unset). Raises
    ValidationFailed (the field named), NotFound, PermissionDenied."""
    if not isinstance(changes, Mapping) or not changes:
        raise ValidationFailed(
            f"changes: nothing to change; give one or more of {', '.join(METRICS_FIELDS)}",
            field="changes",
        )
    text = clean_reason(
        reason, required_message="A reason is required (why the metrics change).", max_length=500
    )
    with transaction.atomic():
        cluster = locked_for_policy_change(actor, cluster_id, "the metrics of")
        cleaned = clean_metrics_settings(changes)
        metrics, _ = ClusterMetrics.objects.get_or_create(cluster=cluster)
        diff = {name: value for name, value in cleaned.items() if getattr(metrics, name) != value}
        if not diff:
            return metrics
        recorded = {
            f"metrics.{name}": [_shown(name, getattr(metrics, name)), _shown(name, value)]
            for name, value in diff.items()
        }
        for name, value in diff.items():
            setattr(metrics, name, value)
        metrics.collected_until = None  # a new source: read it from a fresh start
        metrics.save()
        record_policy_event(cluster, actor, recorded, text)
    return metrics


def _holds(cluster: Cluster, start: dt.datetime, end: dt.datetime) -> list[Hold]:
    """The attempts of the cluster that held GPUs at some time in (start, end]."""
    attempts = Attempt.objects.filter(
        Q(ended_at__isnull=True) | Q(ended_at__gt=start),
        cluster=cluster,
        started_at__isnull=False,
        started_at__lte=end,
    ).only("pk", "gpus", "placements", "started_at", "ended_at")
    return [
        Hold(
            attempt=a.pk,
            gpus=a.gpus,
            placements=tuple(
                (str(p["host"]), tuple(int(i) for i in p["gpu_indices"])) for p in a.placements
            ),
            start_s=a.started_at.timestamp(),
            end_s=a.ended_at.timestamp() if a.ended_at else None,
        )
        for a in attempts
    ]


def step_s() -> float:
    """The resolution of a Prometheus read (`ALLOT_UTILIZATION_STEP_S`)."""
    return float(getattr(settings, "ALLOT_UTILIZATION_STEP_S", 15.0))


@dataclass(frozen=True)
class _Read:
    """What one read returned: the samples, the window (since, until] it covered, and
    the seconds each sample stands for."""

    samples: list[GpuSample]
    since_s: float
    until_s: float
    step_s: float


def _read(cluster: Cluster, metrics: ClusterMetrics, now: dt.datetime, step: float) -> _Read | None:
    """The cluster's source read since the last collection; None when it has none.
    Prometheus is read up to one step before `now`, so that the last scrapes have
    landed (what was not read yet is read next time)."""
    now_s = now.timestamp()
    since_s = (
        metrics.collected_until.timestamp() if metrics.collected_until else now_s - FIRST_LOOKBACK_S
    )
    since_s = max(since_s, now_s - MAX_WINDOW_S)
    if metrics.prometheus_url:
        first = (math.floor(since_s / step) + 1) * step
        end = math.floor((now_s - step) / step) * step
        if end < first:
            return _Read([], since_s, since_s, step)
        source = PrometheusSource(
            url=metrics.prometheus_url,
            host_label=metrics.host_label,
            gpu_label=metrics.gpu_label,
            selector=metrics.selector,
            bearer_token=metrics.bearer_token,
        )
        return _Read(read_prometheus(source, first, end, step), since_s, end, step)
    if cluster.adapter == AdapterKind.SIMULATED:
        interval = min(max(1.0, now_s - since_s), float(max(cluster.cycle_s, 60)))
        samples = read_exporter(metrics_url_for_cluster(cluster), now_s)
        return _Read(samples, since_s, now_s, interval)
    return None


def utilization_collect(
    *, cluster: Cluster, now: dt.datetime | None = None, step: float | None = None
) -> int:
    """One collection of the cluster's GPU utilization (see the module docstring).
    Returns the rows written; 0 when the metrics could not be read (kept as
    `last_error`), the cluster has no source, or another collection of it is running
    (the metrics row is locked while one reads)."""
    now = now or timezone.now()
    ClusterMetrics.objects.get_or_create(cluster=cluster)
    with transaction.atomic():
        metrics = (
            ClusterMetrics.objects.select_for_update(skip_locked=True)
            .filter(cluster=cluster)
            .first()
        )
        if metrics is None:
            return 0
        try:
            read = _read(cluster, metrics, now, step or step_s())
        except MetricsUnavailable as exc:
            log.warning("utilization of cluster %s: %s", cluster.name, exc)
            metrics.last_error, metrics.last_error_at = str(exc)[:1000], now
            # collected_until stays: the next collection reads the gap (up to MAX_WINDOW_S)
            metrics.save(update_fields=["last_error", "last_error_at"])
            return 0
        if read is None:
            return 0
        rows = _rows(cluster, read)
        UtilizationSample.objects.bulk_create(rows, ignore_conflicts=True)
        metrics.collected_until = dt.datetime.fromtimestamp(read.until_s, tz=dt.UTC)
        metrics.last_error = ""
        metrics.save(update_fields=["collected_until", "last_error"])
    return len(rows)


def _rows(cluster: Cluster, read: _Read) -> list[UtilizationSample]:
    def at(seconds: float) -> dt.datetime:
        return dt.datetime.fromtimestamp(seconds, tz=dt.UTC)

    holds = _holds(cluster, at(read.since_s - read.step_s), at(read.until_s))
    windows = attribute(read.samples, holds, step_s=read.step_s)

    return [
        UtilizationSample(
            attempt_id=w.attempt,
            cluster=cluster,
            start=at(w.start_s),
            end=at(w.end_s),
            samples=w.samples,
            mean_pct=w.mean_pct,
            max_pct=w.max_pct,
            known_s=w.known_s,
            sm_active_pct=w.sm_active_pct,
            sm_active_known_s=w.sm_known_s,
            memory_used_max_mib=w.memory_used_max_mib,
        )
        for w in windows
    ]


COMPACT_AFTER = dt.timedelta(days=1)


def utilization_compact(*, now: dt.datetime | None = None, limit: int = 500) -> int:
    """Merge the rows of attempts that ended over `COMPACT_AFTER` ago, so that the table
    grows with attempts, not with time: one row each, or two where the attempt's last
    rows were below its cluster's `idle_threshold_pct` (that idle tail is kept apart for
    the what-if preview, `idle_after_by_attempt`). Their figures stay the same (the mean
    weighted by known time, the highest value, the samples and known time summed).
    Merged rows are marked `compacted` and not merged again. At most `limit` attempts
    per call; returns how many were merged."""
    cutoff = (now or timezone.now()) - COMPACT_AFTER
    attempt_ids = list(
        UtilizationSample.objects.filter(attempt__ended_at__lt=cutoff, compacted=False)
        .order_by("attempt_id")
        .values_list("attempt_id", flat=True)
        .distinct()[:limit]
    )
    thresholds = dict(Cluster.objects.values_list("pk", "idle_threshold_pct"))
    for attempt_id in attempt_ids:
        with transaction.atomic():
            rows = list(
                UtilizationSample.objects.select_for_update()
                .filter(attempt_id=attempt_id)
                .order_by("end")
            )
            threshold = float(thresholds.get(rows[0].cluster_id, 0))
            merged = [_merged(attempt_id, group) for group in _idle_split(rows, threshold)]
            UtilizationSample.objects.filter(pk__in=[r.pk for r in rows]).delete()
            UtilizationSample.objects.bulk_create(merged)
    return len(attempt_ids)


def _idle_split(
    rows: list[UtilizationSample], threshold_pct: float
) -> list[list[UtilizationSample]]:
    """The rows (in time order) before the trailing run of rows below `threshold_pct`,
    and that run; empty groups left out."""
    split = len(rows)
    while split > 0 and rows[split - 1].max_pct < threshold_pct:
        split -= 1
    return [group for group in (rows[:split], rows[split:]) if group]


def _weighted_mean(pairs: list[tuple[float, float]]) -> float | None:
    """The mean of (value, weight) pairs by weight (plain when no weight; None: none)."""
    if not pairs:
        return None
    weight = sum(w for _, w in pairs)
    if weight > 0:
        return sum(v * w for v, w in pairs) / weight
    return sum(v for v, _ in pairs) / len(pairs)


def _merged(attempt_id: int, rows: list[UtilizationSample]) -> UtilizationSample:
    """One row with the figures of an attempt's `rows`: the means weighted by the time
    they stand for, the highest values, the samples and times summed; SM activity and
    memory stay unknown (null) only where every row had them unknown."""
    sm = [(r.sm_active_pct, r.sm_active_known_s) for r in rows if r.sm_active_pct is not None]
    memory = [r.memory_used_max_mib for r in rows if r.memory_used_max_mib is not None]
    return UtilizationSample(
        attempt_id=attempt_id,
        cluster_id=rows[0].cluster_id,
        start=min(r.start for r in rows),
        end=max(r.end for r in rows),
        samples=sum(r.samples for r in rows),
        mean_pct=_weighted_mean([(r.mean_pct, r.known_s) for r in rows]) or 0.0,
        max_pct=max(r.max_pct for r in rows),
        known_s=sum(r.known_s for r in rows),
        sm_active_pct=_weighted_mean(sm),
        sm_active_known_s=sum(w for _, w in sm),
        memory_used_max_mib=max(memory) if memory else None,
        compacted=True,
    )
