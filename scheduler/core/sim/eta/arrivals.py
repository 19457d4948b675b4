"""Expected later arrivals of the forward runs: the recent windows' jobs again
(`repeat_arrivals`) or the busiest window's (`busiest_arrivals`)."""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Iterator
from dataclasses import replace

from scheduler.core.engine.types import Workload
from scheduler.core.sim.eta.runtimes import unit_hash


def repeat_arrivals(
    recent: Iterable[Workload],
    now: float,
    window_s: float,
    periods: int = 1,
    since: float | None = None,
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
    Ids get a "~next" suffix."""
    periods = max(1, int(periods))
    if since is not None:
        periods = max(1, min(periods, math.floor((now - since) / window_s)))
    return [
        _again(w, k, window_s)
        for k, w in _windows_back(recent, now, window_s, periods)
        if periods == 1 or unit_hash(w.id) * periods < 1.0
    ]


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
