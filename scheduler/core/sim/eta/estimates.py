"""A pending job's estimate: three forward runs (low, middle, high runtimes) and the
baseline (`estimate`); see the package docstring."""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from functools import partial

from scheduler.core.engine.types import Policy, Snapshot, Workload
from scheduler.core.sim.eta.baseline import baseline_starts
from scheduler.core.sim.eta.forward import HORIZON_S, REL_STEP, forward_starts
from scheduler.core.sim.eta.ranges import Estimate
from scheduler.core.sim.eta.runtimes import (
    Remaining,
    RuntimeForecast,
    spread_points,
    spread_remaining,
)

# low, middle, high runtime quantile of the three forward runs: the range is meant as
# an 80% interval (a 50% one, 25th-75th, held the real start under half the time on
# every trace and seed tried, nearly all misses late)
QUANTILES = (0.1, 0.5, 0.9)
# How far the middle run's per-job runtime quantiles spread around the median, as a
# share of the forecast's own spread on the normal scale (0: every job at its median, as
# before; 1: independent draws). Chosen on Philly (seed 0, days 10-16 and 20-26), where
# 0.3-0.6 did about equally well and 0 and 1 worse; checked on other seeds, windows and
# the generated month (docs/benchmarks-history.md).
SPREAD = 0.5


def going_now(
    snapshot: Snapshot, now: float, users: Mapping[str, str]
) -> list[tuple[str, str, str, int, float]]:
    """(project, user, kind, gpus, elapsed seconds) of the snapshot's running jobs, the
    elapsed time counted as the forward run counts it (with the work saved earlier)."""
    return [
        (
            rw.workload.project,
            users.get(rw.workload.id, ""),
            rw.workload.kind,
            rw.workload.gpus,
            max(0.0, now - rw.started_s) + snapshot.worked.get(rw.workload.id, 0.0),
        )
        for rw in snapshot.running
    ]


def estimate(
    snapshot: Snapshot,
    policy: Policy,
    now: float,
    forecast: RuntimeForecast,
    *,
    users: Mapping[str, str] | None = None,
    targets: Collection[str] | None = None,
    arrivals: Sequence[Workload] = (),
    busy_arrivals: Sequence[Workload] | None = None,
    quantiles: tuple[float, float, float] = QUANTILES,
    period_s: float = 60.0,
    horizon_s: float = HORIZON_S,
    rel_step: float = REL_STEP,
    baseline: bool = True,
    spread: float = SPREAD,
    points: Mapping[str, int] | None = None,
    avoid_until: Mapping[str, Mapping[str, float]] | None = None,
) -> dict[str, Estimate]:
    """The `Estimate` of every pending job in `targets` (all pending jobs when None).

    `users` maps workload ids to their submitters (the forecast's finest key).
    `arrivals` are the expected later jobs of the middle run, `busy_arrivals` those of
    the high (latest) run (the same as `arrivals` when None); the low run expects none.
    `spread`: how far the middle run's per-job quantiles spread around its quantile
    (`spread_quantiles`; 0: every job at it); the low and high runs put every job at
    theirs, so the range still spans runtimes that are all short or all long.
    `points`: the running jobs' points of the spread sequence to keep (`spread_points`:
    a caller that estimates again and again passes the last ones); None: afresh.
    `avoid_until`: the hosts each pending job is kept off after the cluster refused it
    there, and when each lapses (`forward_starts`); the baseline ignores them.
    The snapshot's running jobs join `forecast` as runs still going (`with_running`)."""
    who = users or {}
    forecast = forecast.with_running(going_now(snapshot, now, who))

    def runtime_at(q: float) -> Remaining:
        def remaining(w: Workload, elapsed: float) -> float:
            return forecast.remaining(w.project, who.get(w.id, ""), w.kind, w.gpus, elapsed, q)

        return remaining

    def middle_at(q: float) -> Remaining:
        if spread <= 0:
            return runtime_at(q)
        running = spread_points((rw.workload.id for rw in snapshot.running), points or {})
        return spread_remaining(forecast, who, running, q, spread)

    # The earliest run expects no other arrivals, the middle one the expected ones and
    # the latest one a busy window's: the range spans both unknowns, how long jobs run
    # and what else comes.
    busy = arrivals if busy_arrivals is None else busy_arrivals
    forward = partial(forward_starts, snapshot, policy, now, targets=targets, period_s=period_s,
                      horizon_s=horizon_s, rel_step=rel_step, avoid_until=avoid_until)  # fmt: skip
    remainings = (runtime_at(quantiles[0]), middle_at(quantiles[1]), runtime_at(quantiles[2]))
    runs = [forward(r, arrivals=e) for r, e in zip(remainings, ((), arrivals, busy), strict=True)]
    base = baseline_starts(snapshot, policy, now, runtime_at(0.5)) if baseline else {}
    pending = {w.id for v in snapshot.pending.values() for w in v}
    ids = pending if targets is None else set(targets) & pending
    out: dict[str, Estimate] = {}
    for wid in ids:
        found = [r.get(wid) for r in runs]
        known = [s for s in found if s is not None]
        out[wid] = Estimate(
            start=found[len(found) // 2],
            earliest=min(known) if known else None,
            latest=max(known) if len(known) == len(found) else None,
            baseline_start=base.get(wid),
        )
    return out
