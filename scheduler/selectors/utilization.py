"""Reads of GPU utilization (docs/concepts.md#utilization), never writes.

- `idle_attempt_ids(cluster, now, threshold_pct, window_s)`: the running attempts whose
  every known sample of the last `window_s` seconds is below `threshold_pct` (an
  attempt without a known sample in the window is not idle: unknown is not idle). The
  idle-GPU reclaim policy reads it.
- `attempt_figures(attempts)`: per attempt, its [utilization](concepts.md#utilization),
  [effective GPU-hours](concepts.md#effective-gpu-hours), [SM active](concepts.md#sm-active)
  and [peak GPU memory used](concepts.md#peak-gpu-memory-used) (None: unknown).
- `attempt_series(attempt_ids)`: an attempt's known utilization over its life (pages).
- `metrics_settings(cluster)`: where its metrics are read, as the clusters API shows it
  (a bearer token only as whether one is set).
- `idle_after_by_attempt(attempts, threshold_pct, now)`: per attempt whose GPUs stayed
  idle from some point to its end, how long into its run that point was (the what-if
  preview's `JobRecord.idle_after_s`).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from django.db.models import F, Max, Sum

from ledger.utilization import KnownSpan, effective_gpu_h, idle_tail_start, utilization
from scheduler.models import Attempt, AttemptState, Cluster, ClusterMetrics, UtilizationSample

HOUR_S = 3600.0


# The share of an idle window that must have known samples (see `idle_attempt_ids`).
IDLE_COVERAGE = 0.9


def idle_attempt_ids(
    cluster: Cluster, now: dt.datetime, threshold_pct: float, window_s: int
) -> frozenset[int]:
    """Running attempts (ids) of `cluster` whose every known sample that ended in the
    last `window_s` seconds is below `threshold_pct`, with known samples for at least
    `IDLE_COVERAGE` of the window: a gap in the metrics is unknown, never idle."""
    since = now - dt.timedelta(seconds=window_s)
    rows = (
        UtilizationSample.objects.filter(
            cluster=cluster,
            end__gt=since,
            end__lte=now,
            attempt__state=AttemptState.RUNNING,
        )
        .values("attempt_id")
        .annotate(top=Max("max_pct"), known=Sum("known_s"))
        .filter(top__lt=threshold_pct, known__gte=IDLE_COVERAGE * window_s)
    )
    return frozenset(row["attempt_id"] for row in rows)


@dataclass(frozen=True)
class AttemptFigures:
    """An attempt's utilization (0-1, None: unknown), the GPU-hours it held (to `now`
    while it runs), its effective GPU-hours (None: unknown) and how much of its time
    had a known value (`measured_gpu_h`)."""

    utilization: float | None
    gpu_h: float
    effective_gpu_h: float | None
    measured_gpu_h: float
    last_sample_at: dt.datetime | None
    sm_active: float | None = None  # 0-1, over `sm_measured_gpu_h`
    sm_measured_gpu_h: float = 0.0
    memory_used_max_mib: float | None = None


def _held_gpu_h(attempt: Attempt, now: dt.datetime) -> float:
    if attempt.started_at is None:
        return 0.0
    end = attempt.ended_at or now
    return attempt.gpus * max(0.0, (end - attempt.started_at).total_seconds()) / HOUR_S


def attempt_figures(
    attempts: Iterable[Attempt], *, now: dt.datetime | None = None
) -> dict[int, AttemptFigures]:
    """Per attempt (by id): its utilization figures (see `AttemptFigures`)."""
    now = now or dt.datetime.now(dt.UTC)
    listed = list(attempts)
    sums = (
        {
            row["attempt_id"]: row
            for row in UtilizationSample.objects.filter(attempt__in=[a.pk for a in listed])
            .values("attempt_id")
            .annotate(
                known=Sum("known_s"),
                weighted=Sum(F("known_s") * F("mean_pct")),
                last=Max("end"),
                sm_known=Sum("sm_active_known_s"),
                sm_weighted=Sum(F("sm_active_known_s") * F("sm_active_pct")),
                memory=Max("memory_used_max_mib"),
            )
            .order_by()
        }
        if listed
        else {}
    )
    out = {}
    for attempt in listed:
        row = sums.get(attempt.pk)
        known = float(row["known"]) if row else 0.0
        share = utilization(float(row["weighted"]) / 100.0, known) if row else None
        gpu_h = _held_gpu_h(attempt, now)
        sm_known = float(row["sm_known"] or 0.0) if row else 0.0
        out[attempt.pk] = AttemptFigures(
            utilization=share,
            gpu_h=gpu_h,
            effective_gpu_h=effective_gpu_h(gpu_h, share),
            measured_gpu_h=attempt.gpus * known / HOUR_S,
            last_sample_at=row["last"] if row else None,
            sm_active=utilization(float(row["sm_weighted"] or 0.0) / 100.0, sm_known)
            if row
            else None,
            sm_measured_gpu_h=attempt.gpus * sm_known / HOUR_S,
            memory_used_max_mib=row["memory"] if row else None,
        )
    return out


def job_figures(attempts: Sequence[Attempt], *, now: dt.datetime | None = None) -> AttemptFigures:
    """A job's figures over all its attempts (utilization and SM activity weighted by
    the GPU-time each was measured, the highest memory used of any)."""
    figures = attempt_figures(attempts, now=now).values()
    measured = sum(f.measured_gpu_h for f in figures)
    weighted = sum((f.utilization or 0.0) * f.measured_gpu_h for f in figures)
    share = utilization(weighted, measured)
    sm_measured = sum(f.sm_measured_gpu_h for f in figures)
    sm_weighted = sum((f.sm_active or 0.0) * f.sm_measured_gpu_h for f in figures)
    gpu_h = sum(f.gpu_h for f in figures)
    last = max((f.last_sample_at for f in figures if f.last_sample_at), default=None)
    memory = [f.memory_used_max_mib for f in figures if f.memory_used_max_mib is not None]
    return AttemptFigures(
        utilization=share,
        gpu_h=gpu_h,
        effective_gpu_h=effective_gpu_h(gpu_h, share),
        measured_gpu_h=measured,
        last_sample_at=last,
        sm_active=utilization(sm_weighted, sm_measured),
        sm_measured_gpu_h=sm_measured,
        memory_used_max_mib=max(memory) if memory else None,
    )


def job_utilization(attempts: Sequence[Attempt]) -> dict[str, object]:
    """A job's utilization figures as the API and the pages show them."""
    figures = job_figures(attempts)
    return {
        "utilization": figures.utilization,
        "effective_gpu_h": figures.effective_gpu_h,
        "measured_gpu_h": figures.measured_gpu_h,
        "last_sample_at": figures.last_sample_at,
        "sm_active": figures.sm_active,
        "memory_used_max_mib": figures.memory_used_max_mib,
    }


def attempt_series(attempt_ids: Iterable[int]) -> list[tuple[dt.datetime, dt.datetime, float]]:
    """(start, end, mean utilization 0-100) of the attempts' known samples, in time order."""
    attempt_ids = list(attempt_ids)
    if not attempt_ids:  # a job that never ran (most pages): nothing to ask
        return []
    return [
        (row.start, row.end, row.mean_pct)
        for row in UtilizationSample.objects.filter(attempt__in=attempt_ids)
        .only("start", "end", "mean_pct")
        .order_by("end")
    ]


def jobs_utilization(job_ids: Iterable[int]) -> dict[int, float | None]:
    """Per job (by id): its utilization over all its attempts' measured GPU-time; jobs
    without any are left out (unknown)."""
    weight = F("known_s") * F("attempt__gpus")
    rows = (
        UtilizationSample.objects.filter(attempt__job_id__in=list(job_ids))
        .values("attempt__job_id")
        .annotate(measured=Sum(weight), weighted=Sum(weight * F("mean_pct")))
        .order_by()
    )
    return {
        r["attempt__job_id"]: utilization(float(r["weighted"]) / 100.0, float(r["measured"]))
        for r in rows
    }


def sparkline(
    series: Sequence[tuple[dt.datetime, dt.datetime, float]], *, width: float = 300.0
) -> str:
    """SVG polyline points ("x,y ...") of a utilization series on a width x 40 box
    (0% at the bottom), for the job page; "" without samples."""
    if not series:
        return ""
    first, last = series[0][0].timestamp(), series[-1][1].timestamp()
    span = max(1.0, last - first)
    points = []
    for start, end, pct in series:
        for at in (start, end):
            x = (at.timestamp() - first) / span * width
            points.append(f"{x:.1f},{40.0 - 38.0 * pct / 100.0:.1f}")
    return " ".join(points)


def metrics_settings(cluster: Cluster) -> dict[str, object]:
    """Where `cluster`'s GPU metrics are read and how the last read went; the model's
    defaults while it has no `ClusterMetrics` row yet. Never the bearer token itself:
    `bearer_token_set` says whether there is one. (`cluster.metrics` is fetched with
    the cluster where the caller selected it with `select_related("metrics")`.)"""
    try:
        metrics = cluster.metrics
    except ClusterMetrics.DoesNotExist:
        metrics = ClusterMetrics(cluster=cluster)
    return {
        "prometheus_url": metrics.prometheus_url,
        "host_label": metrics.host_label,
        "gpu_label": metrics.gpu_label,
        "selector": metrics.selector,
        "bearer_token_set": bool(metrics.bearer_token),
        "collected_until": metrics.collected_until,
        "last_error": metrics.last_error,
        "last_error_at": metrics.last_error_at,
    }


def idle_after_by_attempt(
    attempts: Iterable[Attempt], threshold_pct: float, now: dt.datetime
) -> dict[int, float]:
    """Per attempt (by id) whose recorded utilization stayed below `threshold_pct` from
    some point to its end (or `now`), known for at least `IDLE_COVERAGE` of that time:
    the seconds from its start to that point (`ledger.utilization.idle_tail_start`).
    Attempts without such a tail (busy to the end, or unknown) are left out."""
    listed = {a.pk: a for a in attempts if a.started_at is not None}
    spans: dict[int, list[KnownSpan]] = {}
    rows = (
        UtilizationSample.objects.filter(attempt_id__in=list(listed))
        .order_by("attempt_id", "end")
        .values_list("attempt_id", "start", "end", "max_pct", "known_s")
    )
    for attempt_id, start, end, top, known in rows.iterator(chunk_size=5000):
        spans.setdefault(attempt_id, []).append(
            KnownSpan(start.timestamp(), end.timestamp(), top, known)
        )
    out = {}
    for attempt_id, found in spans.items():
        attempt = listed[attempt_id]
        started = attempt.started_at.timestamp()
        ended = (attempt.ended_at or now).timestamp()
        tail = idle_tail_start(found, threshold_pct, ended, coverage=IDLE_COVERAGE)
        if tail is not None:
            out[attempt_id] = max(0.0, tail - started)
    return out
