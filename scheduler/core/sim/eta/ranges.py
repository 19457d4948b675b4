"""What a page shows of an estimate: the `Estimate`, kept steady while its range
holds it (`steady`), a move worth explaining (`moved_beyond_range`) and the range
calibrated on the cluster's recent real starts (`range_widening`, `widened`)."""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, replace

NOTICED_MOVE_S = 300.0  # a shown start that moves by less is not a move to explain
# The range is widened until this share of the recent real starts would have fallen in
# it (`range_widening`), once at least `CALIBRATION_MIN` of them are known.
RANGE_COVERAGE = 0.9
CALIBRATION_MIN = 10
CALIBRATION_KEEP = 300  # the most recent starts that calibrate the range


@dataclass(frozen=True, slots=True)
class Estimate:
    """A pending job's estimated start: `start` (middle runtimes), the range
    `earliest`..`latest` (low and high runtimes), the baseline's start; None where the
    run's horizon passed first."""

    start: float | None
    earliest: float | None
    latest: float | None
    baseline_start: float | None
    method: str = "forward-simulation"


def steady(previous: Estimate | None, new: Estimate, now: float) -> Estimate:
    """The estimate to show after `new` replaces `previous` (shown before): the new
    range, with the previous start kept while it is still ahead and inside that range.

    A forward run's start moves a little with every arrival and finished job; a user
    plans by the time shown, so it moves only when the new range no longer holds it
    (`moved_beyond_range` then says whether the page must explain the move)."""
    if previous is None or previous.start is None or new.start is None:
        return new
    if new.earliest is None or new.latest is None:
        return new
    if now <= previous.start and new.earliest <= previous.start <= new.latest:
        return replace(new, start=previous.start)
    return new


def moved_beyond_range(previous: Estimate | None, shown: Estimate) -> bool:
    """Whether the shown start moved by more than the previous range's width (and more
    than `NOTICED_MOVE_S`): the move a user notices, which the job page explains (a
    budget change, a job ahead, a host down)."""
    if previous is None or previous.start is None or shown.start is None:
        return False
    width = 0.0
    if previous.earliest is not None and previous.latest is not None:
        width = previous.latest - previous.earliest
    return abs(shown.start - previous.start) > max(width, NOTICED_MOVE_S)


def _miss(at: float, start: float, earliest: float, latest: float, real: float) -> float:
    """How far a real start fell outside the range stated at `at`, relative to the wait
    the estimate then expected (0 inside)."""
    scale = max(start - at, 60.0)
    if real < earliest:
        return (earliest - real) / scale
    if real > latest:
        return (real - latest) / scale
    return 0.0


def range_widening(
    records: Iterable[tuple[float, float, float, float, float]],
    coverage: float = RANGE_COVERAGE,
) -> float:
    """How much to widen ranges so that `coverage` of recent real starts fall in them.

    `records`: (stated at, start, earliest, latest, real start) of jobs that started, as
    estimated when they were submitted. The answer `s` widens a range by `s` times the
    expected wait on each side (`widened`); 0 until `CALIBRATION_MIN` records are known.
    A split-conformal calibration: the range adapts to how wrong it has been on this
    cluster, instead of constants tuned on one trace."""
    misses = sorted(_miss(*r) for r in records)
    if len(misses) < CALIBRATION_MIN:
        return 0.0
    return misses[min(len(misses) - 1, math.ceil(coverage * len(misses)) - 1)]


def widened(est: Estimate, now: float, widening: float) -> Estimate:
    """`est` with its range widened by `widening` times the expected wait on each side
    (never before `now`)."""
    if widening <= 0 or est.start is None:
        return est
    margin = widening * max(est.start - now, 60.0)
    return replace(
        est,
        earliest=None if est.earliest is None else max(now, est.earliest - margin),
        latest=None if est.latest is None else est.latest + margin,
    )
