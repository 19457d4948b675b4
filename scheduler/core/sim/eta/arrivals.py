"""Expected later arrivals of the forward runs: the recent windows' jobs again
(`repeat_arrivals`), scaled per project by how its last hours compare
(`expected_arrivals`), or the busiest window's (`busiest_arrivals`)."""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import replace

from scheduler.core.engine.types import Workload
from scheduler.core.sim.eta.runtimes import unit_hash

# The recent part of a window whose arrivals scale the expected ones (2 h of a day), and
# the bounds of that scale: a project submitting faster than its average in its last
# hours is expected to go on faster, a quiet one slower, by at most these factors.
RECENT_SHARE = 1 / 12
RATE_BOUNDS = (0.5, 1.5)


def expected_arrivals(
    recent: Iterable[Workload],
    now: float,
    window_s: float,
    periods: int,
    since: float | None = None,
) -> list[Workload]:
    """The estimate's expected arrivals in `[now, now + window_s)`: `repeat_arrivals`
    of the last `periods` windows, each project's scaled by `recent_rates`."""
    recent = list(recent)
    scale = recent_rates(recent, now, window_s, periods, since)
    return repeat_arrivals(recent, now, window_s, periods, since=since, scale=scale)


def recent_rates(
    recent: Iterable[Workload],
    now: float,
    window_s: float,
    periods: int,
    since: float | None = None,
) -> dict[str, float]:
    """Per project, its submissions in the last `RECENT_SHARE` of a window against the
    number its average over the last `periods` windows gives that span, each plus one
    (so a handful of jobs moves it little), within `RATE_BOUNDS`."""
    periods = _periods(periods, now, window_s, since)
    recent_s = window_s * RECENT_SHARE
    total: Counter[str] = Counter()
    last: Counter[str] = Counter()
    for _, w in _windows_back(recent, now, window_s, periods):
        total[w.project] += 1
        last[w.project] += now - w.submit_s <= recent_s
    lo, hi = RATE_BOUNDS
    return {
        p: min(hi, max(lo, (last[p] + 1) / (n * RECENT_SHARE / periods + 1)))
        for p, n in total.items()
    }


def repeat_arrivals(
    recent: Iterable[Workload],
    now: float,
    window_s: float,
    periods: int = 1,
    since: float | None = None,
    scale: Mapping[str, float] | None = None,
) -> list[Workload]:
    """Expected arrivals in `[now, now + window_s)`: a persistence forecast of demand
    per project and shape, with its time of day when the window is a day.

    The jobs submitted in the last `periods` windows, `[now - periods * window_s,
    now)`, arrive again whole windows later, each at its own place in the window's
    cycle; with more than one period only one job in `periods` is kept (chosen by a
    hash of its id, so the forecast is deterministic), so the expected rate is the
    average of those windows rather than the last one alone: a quiet day after a busy
    one (or the reverse) no longer sets the whole forecast. `since`: when the records
    begin; only the whole windows after it count (a young cluster averages fewer).
    `scale`: a project's factor on its expected rate (1 if absent), kept by the same
    hash, so a larger factor keeps every job a smaller one does (at most all of them).
    Ids get a "~next" suffix."""
    periods = _periods(periods, now, window_s, since)
    factor = scale or {}
    return [
        _again(w, k, window_s)
        for k, w in _windows_back(recent, now, window_s, periods)
        if unit_hash(w.id) * periods < factor.get(w.project, 1.0)
    ]


def _periods(periods: int, now: float, window_s: float, since: float | None) -> int:
    """The whole windows to average: `periods`, fewer when the records begin later."""
    periods = max(1, int(periods))
    if since is not None:
        periods = max(1, min(periods, math.floor((now - since) / window_s)))
    return periods


def busiest_arrivals(
    recent: Iterable[Workload], now: float, window_s: float, periods: int
) -> list[Workload]:
    """The pessimistic expected arrivals in `[now, now + window_s)`: of the last
    `periods` windows, the one that asked for the most GPUs arrives again (with
    seven daily windows, about the 90th percentile of a day's demand), shifted as in
    `repeat_arrivals`. The latest start of a range expects these."""
    by_period: dict[int, list[Workload]] = defaultdict(list)
    for k, w in _windows_back(recent, now, window_s, max(1, int(periods))):
        by_period[k].append(w)
    if not by_period:
        return []
    k, jobs = max(by_period.items(), key=lambda kv: (sum(w.gpus for w in kv[1]), -kv[0]))
    return [_again(w, k, window_s) for w in jobs]


def _windows_back(
    recent: Iterable[Workload], now: float, window_s: float, periods: int
) -> Iterator[tuple[int, Workload]]:
    """(k, job) for the jobs submitted in the last `periods` windows before `now`: k
    whole windows later the job lands in `[now, now + window_s)`."""
    span = window_s * periods
    for w in recent:
        age = now - w.submit_s
        if 0 < age <= span:
            yield max(1, math.ceil(age / window_s)), w


def _again(w: Workload, k: int, window_s: float) -> Workload:
    """`w` expected again `k` windows after its submission (id with a "~next" suffix)."""
    return replace(w, id=f"{w.id}~next", submit_s=w.submit_s + k * window_s)
