"""Utilization accounting (pure: no Django): GPU samples attributed to the attempts that
held the GPUs, and the figures of docs/concepts.md made of them.

- `attribute(samples, holds, ...)`: which attempt held each sampled GPU at each sample's
  time (Allot knows: placements and start/end), one `AttemptWindow` per attempt with
  at least one known sample. At a time, an attempt's value is the mean of its GPUs that
  have one; a time where none of its GPUs has a value is unknown, left out (never 0).
  The window also carries the attempt's [SM active](concepts.md#sm-active) (the mean
  over its GPUs and the times with a value) and its
  [peak GPU memory used](concepts.md#peak-gpu-memory-used) (the most any one GPU had in
  use), each None where no sample had one (unknown, never 0).
- `utilization(utilized_gpu_h, measured_gpu_h)`: [utilization](concepts.md#utilization).
- `effective_gpu_h(gpu_h, utilization)`: [effective GPU-hours](concepts.md#effective-gpu-hours).
- `utilization_hourly(windows, start_s, end_s)`: per project and hour, the measured and
  the utilized GPU-hours (the ledger's rollup).
- `idle_tail_start(rows, threshold_pct, end_s)`: when an attempt's GPUs went idle for
  the rest of its run (the what-if preview's idle pattern), or None.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

HOUR_S = 3600.0


class Sample(Protocol):
    @property
    def host(self) -> str: ...
    @property
    def gpu(self) -> int: ...
    @property
    def at_s(self) -> float: ...
    @property
    def util_pct(self) -> float: ...
    @property
    def sm_active_pct(self) -> float | None: ...
    @property
    def fb_used_mib(self) -> float | None: ...


@dataclass(frozen=True, slots=True)
class Hold:
    """An attempt's GPUs (`placements`: (host, GPU indices)) from `start_s` to `end_s`
    (None: still held)."""

    attempt: int
    gpus: int
    placements: tuple[tuple[str, tuple[int, ...]], ...]
    start_s: float
    end_s: float | None = None


@dataclass(frozen=True, slots=True)
class AttemptWindow:
    """An attempt's known utilization over [start_s, end_s]: `samples` times with a value,
    their mean and their highest (0-100), `known_s` seconds they stand for; the mean SM
    activity (0-100) of the times that had one and the `sm_known_s` seconds they stand
    for, and the most frame-buffer memory (MiB) any of its GPUs had in use (None:
    unknown)."""

    attempt: int
    start_s: float
    end_s: float
    samples: int
    mean_pct: float
    max_pct: float
    known_s: float
    sm_active_pct: float | None = None
    sm_known_s: float = 0.0
    memory_used_max_mib: float | None = None


def _by_gpu(samples: Iterable[Sample]) -> dict[tuple[str, int], dict[float, Sample]]:
    """Each GPU's samples by time. A host named by its fully qualified name in the
    metrics ("gpu01.cluster.local") is also found by its short name ("gpu01", what Slurm
    and most schedulers call the node), unless the metrics name that host too."""
    found: dict[tuple[str, int], dict[float, Sample]] = defaultdict(dict)
    for s in samples:
        found[(s.host, s.gpu)][s.at_s] = s
    for (host, gpu), values in list(found.items()):
        short = host.split(".", 1)[0]
        if short != host and (short, gpu) not in found:
            found[(short, gpu)] = values
    return found


@dataclass(frozen=True, slots=True)
class _AtTime:
    """An attempt at one time: the mean utilization over its GPUs with a value, the mean
    SM activity over those with one and the most memory any of them used (None: none
    had a value)."""

    at_s: float
    util_pct: float
    sm_active_pct: float | None
    fb_used_mib: float | None


def _mean(values: Sequence[float]) -> float | None:
    return sum(values) / len(values) if values else None


def _attempt_values(
    hold: Hold, by_gpu: Mapping[tuple[str, int], Mapping[float, Sample]]
) -> list[_AtTime]:
    """The attempt's GPUs at each time it held them that has a utilization value."""
    end_s = float("inf") if hold.end_s is None else hold.end_s
    per_time: dict[float, list[Sample]] = defaultdict(list)
    for host, indices in hold.placements:
        for index in indices:
            for at_s, sample in by_gpu.get((host, index), {}).items():
                if hold.start_s < at_s <= end_s:
                    per_time[at_s].append(sample)
    out = []
    for at_s in sorted(per_time):
        found = per_time[at_s]
        sm = [s.sm_active_pct for s in found if s.sm_active_pct is not None]
        fb = [s.fb_used_mib for s in found if s.fb_used_mib is not None]
        util = sum(s.util_pct for s in found) / len(found)  # listed: one GPU had a value
        out.append(_AtTime(at_s, util, _mean(sm), max(fb) if fb else None))
    return out


def _window(hold: Hold, values: Sequence[_AtTime], step_s: float) -> AttemptWindow:
    """The window of an attempt's known values (at least one); each stands for the
    `step_s` seconds before it, cut at the attempt's start."""

    def stands_for(v: _AtTime) -> float:
        return min(step_s, v.at_s - hold.start_s)

    pcts = [v.util_pct for v in values]
    with_sm = [v for v in values if v.sm_active_pct is not None]
    memory = [v.fb_used_mib for v in values if v.fb_used_mib is not None]
    return AttemptWindow(
        attempt=hold.attempt,
        start_s=max(hold.start_s, values[0].at_s - step_s),
        end_s=values[-1].at_s,
        samples=len(values),
        mean_pct=sum(pcts) / len(pcts),
        max_pct=max(pcts),
        known_s=sum(stands_for(v) for v in values),
        sm_active_pct=_mean([v.sm_active_pct for v in with_sm if v.sm_active_pct is not None]),
        sm_known_s=sum(stands_for(v) for v in with_sm),
        memory_used_max_mib=max(memory) if memory else None,
    )


def attribute(
    samples: Iterable[Sample], holds: Sequence[Hold], *, step_s: float
) -> list[AttemptWindow]:
    """One window per attempt with known samples; each sample stands for the `step_s`
    seconds before it (cut at the attempt's start)."""
    by_gpu = _by_gpu(samples)
    windows = []
    for hold in holds:
        values = _attempt_values(hold, by_gpu)
        if values:
            windows.append(_window(hold, values, step_s))
    return windows


def utilization(utilized_gpu_h: float, measured_gpu_h: float) -> float | None:
    """Utilization (0-1): utilized / measured GPU-hours; None (unknown) when nothing was
    measured."""
    if measured_gpu_h <= 0.0:
        return None
    return min(1.0, max(0.0, utilized_gpu_h / measured_gpu_h))


def effective_gpu_h(gpu_h: float, share: float | None) -> float | None:
    """Effective GPU-hours: GPU-hours x utilization; None when utilization is unknown."""
    return None if share is None else gpu_h * share


def window_gpu_h(window: AttemptWindow, gpus: int) -> tuple[float, float]:
    """(measured, utilized) GPU-hours of one window of an attempt holding `gpus` GPUs."""
    return known_gpu_h(gpus, window.known_s, window.mean_pct)


def known_gpu_h(gpus: int, known_s: float, mean_pct: float) -> tuple[float, float]:
    """(measured, utilized) GPU-hours of `gpus` GPUs measured for `known_s` seconds at a
    mean utilization of `mean_pct` (0-100): the one place of this arithmetic."""
    measured = gpus * known_s / HOUR_S
    return measured, measured * mean_pct / 100.0


def utilization_hourly(
    windows: Iterable[tuple[str, int, float, float, float, float]],
    start_s: float,
    end_s: float,
) -> dict[str, list[tuple[float, float]]]:
    """Per project, per hour of [start_s, end_s): (measured, utilized) GPU-hours.

    `windows`: (project, gpus, start_s, end_s, known_s, mean_pct), spread evenly over
    their interval (a window that is an instant counts in the hour of its time)."""
    n = max(0, int((end_s - start_s + HOUR_S - 1) // HOUR_S))
    out: dict[str, list[tuple[float, float]]] = {}
    for project, gpus, w_start, w_end, known_s, pct in windows:
        rows = out.setdefault(project, [(0.0, 0.0)] * n)
        span = w_end - w_start
        for i in range(n):
            h0, h1 = start_s + i * HOUR_S, start_s + (i + 1) * HOUR_S
            if span <= 0.0:
                part = 1.0 if h0 <= w_start < h1 else 0.0
            else:
                part = max(0.0, min(w_end, h1) - max(w_start, h0)) / span
            if part:
                measured, utilized = known_gpu_h(gpus, known_s * part, pct)
                m, u = rows[i]
                rows[i] = (m + measured, u + utilized)
    return out


@dataclass(frozen=True, slots=True)
class KnownSpan:
    """A stored window of an attempt's utilization: [start_s, end_s], its highest value
    (0-100) and the seconds of it with a value."""

    start_s: float
    end_s: float
    max_pct: float
    known_s: float


def idle_tail_start(
    spans: Sequence[KnownSpan], threshold_pct: float, end_s: float, *, coverage: float = 0.9
) -> float | None:
    """The start of the attempt's idle tail: the earliest time from which every known
    value up to `end_s` (its end, or now) is below `threshold_pct`, provided values are
    known for at least `coverage` of that time (a gap is unknown, never idle, as for
    idle-GPU reclaim). None when the last known value is not below the threshold, or
    the tail is not known well enough. `spans` in time order."""
    tail: list[KnownSpan] = []
    for span in reversed(spans):
        if span.max_pct >= threshold_pct:
            break
        tail.append(span)
    if not tail:
        return None
    start = tail[-1].start_s
    known = sum(span.known_s for span in tail)
    if end_s <= start or known < coverage * (end_s - start):
        return None
    return start
