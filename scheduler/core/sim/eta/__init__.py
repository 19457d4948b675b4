"""Estimated start times of pending jobs: a runtime forecast from history and a forward
simulation of the current state through the same engine `plan()` (pure Python).

- `RuntimeForecast`: quantiles of past runtimes keyed by (project, user, kind, gpus),
  falling back to (project, kind), (kind, gpus), (kind,) and all jobs when a key has
  fewer than `min_samples` runtimes. A running job's remaining time is the quantile of
  the runtimes *longer than what it has already run* (conditional on its elapsed
  time); when history has too few such runtimes, the remaining time follows the
  scale-free rule of heavy-tailed runtimes (P(R > x | R > e) = e / x): the q-quantile
  of what remains is e * q / (1 - q), i.e. the median job runs as long again.
  The jobs running now count too, as runs that last at least what they have run
  (censored runtimes, Kaplan-Meier: `RuntimeForecast.with_running`, which `estimate`
  calls with the snapshot's running jobs): the runs that ended alone under-count the
  long ones wherever those have not ended yet (a young cluster, a key's long sweep).
  The elapsed time of a requeued job counts the work it saved in earlier runs when the
  caller supplies it (`Snapshot.worked`; the replay's probe does, the live service does
  not: its runtimes are per attempt). Measured (`bench/eta.py --saved-work all`): better
  on the generated month (two sweeps in three are preempted there; median relative error
  0.701 -> 0.676, 0.671 -> 0.631, 0.748 -> 0.737 on seeds 1-3) and on Philly days 20-25
  (0.074 -> 0.055), worse on Philly days 10-15 (0.169 -> 0.268: with heavy-tailed
  runtimes a job that has run longer is expected to run longer still, and most estimates
  there moved later), so the bench leaves it off by default.
- `forward_starts`: plays the snapshot forward with the engine: running jobs end when
  their forecast says, protections expire, resumable runs save their work every
  checkpoint interval (`last_checkpoint_s`: what a stop or a move loses, which the
  engine reads to choose victims and the runs it moves), stopped resumable work is
  requeued, the usage of allocated runs grows; cycles run at every event and, under fair share,
  periodically while the engine could act. Returns each job's first start. Jobs that
  arrive later are unknown to it (the main source of error on a busy cluster).
- `estimate`: three forward runs with the low, middle and high runtime quantiles (the
  low one without the expected arrivals): the middle one is the ETA, the earliest and
  latest of the three are its range. In the middle run the jobs do not all end at their
  median: each gets its own quantile (`spread_quantiles`), stratified over the jobs
  and spread around the median by `SPREAD`. With every job at its median, none of many
  running jobs ends before its median, while really the first of them ends long before
  (the runtimes are heavy-tailed): the GPUs came free too late and the waits of jobs
  that wait for running work came out too long (Philly, allocated jobs: median
  relative error 0.18 -> 0.12). Fully independent quantiles (`SPREAD` 1) free them too
  early: jobs that run together are alike (a sweep), so their quantiles are drawn
  nearer the median.
  Also the baseline: Slurm backfill style, the jobs in the engine's queue order each
  booked at the earliest time its shape fits, given the running jobs' expected
  (median) ends and the bookings ahead of it; no preemption, no fair-share drift.

The modules: `runtimes` (the forecast and the middle run's spread quantiles), `forward`
(one forward run), `arrivals` (the expected later jobs), `baseline` (the backfill
baseline), `ranges` (what is shown: the estimate, its steadiness and its calibrated
range), `estimates` (the three runs together).

No Django, no clock: `now` is a parameter; times are seconds on the caller's clock.
"""

from scheduler.core.sim.eta.arrivals import (
    busiest_arrivals,
    expected_arrivals,
    recent_rates,
    repeat_arrivals,
)
from scheduler.core.sim.eta.baseline import baseline_starts
from scheduler.core.sim.eta.estimates import QUANTILES, SPREAD, estimate
from scheduler.core.sim.eta.forward import (
    HORIZON_S,
    MAX_CYCLES,
    MAX_PERIOD_S,
    REL_STEP,
    forward_starts,
)
from scheduler.core.sim.eta.ranges import (
    CALIBRATION_KEEP,
    CALIBRATION_MIN,
    NOTICED_MOVE_S,
    RANGE_COVERAGE,
    Estimate,
    moved_beyond_range,
    range_widening,
    steady,
    widened,
)
from scheduler.core.sim.eta.runtimes import (
    DEFAULT_RUNTIME_S,
    MIN_SAMPLES,
    RECENT,
    Remaining,
    RuntimeForecast,
    spread_points,
    spread_quantiles,
)

__all__ = [
    "CALIBRATION_KEEP",
    "CALIBRATION_MIN",
    "DEFAULT_RUNTIME_S",
    "HORIZON_S",
    "MAX_CYCLES",
    "MAX_PERIOD_S",
    "MIN_SAMPLES",
    "NOTICED_MOVE_S",
    "QUANTILES",
    "RANGE_COVERAGE",
    "RECENT",
    "REL_STEP",
    "SPREAD",
    "Estimate",
    "Remaining",
    "RuntimeForecast",
    "baseline_starts",
    "busiest_arrivals",
    "estimate",
    "expected_arrivals",
    "forward_starts",
    "moved_beyond_range",
    "range_widening",
    "recent_rates",
    "repeat_arrivals",
    "spread_points",
    "spread_quantiles",
    "steady",
    "widened",
]
