"""Runtime forecasts from history (`RuntimeForecast`) and the middle run's per-job
quantiles (`spread_quantiles`, `spread_remaining`); see the package docstring."""

from __future__ import annotations

import math
import zlib
from bisect import bisect_right
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from copy import copy
from itertools import islice
from statistics import NormalDist

from scheduler.core.engine.types import Workload

MIN_SAMPLES = 20  # a key needs this many runtimes before its quantiles are used
# A job's runtime (a running job's: what remains) comes from its key's most recently
# finished runtimes longer than its elapsed time (0 before it starts), at most this
# many (None: all of them). A workload is not stationary: a project's sweeps come in
# regimes (Philly's busiest project ran 1-GPU jobs of ~3,500, ~5,500 and ~10,500 s in
# turn), and all of a key's runtimes longer than what a job has run mix the regimes of
# weeks; the last ones are the current regime's. Taking a key's last K runtimes first
# and conditioning after (tried before) left too few above a long elapsed time and fell
# back to coarser keys: here the conditioning comes first. docs/benchmarks-history.md,
# "2026-12-06 evening: the forecast from a key's recent runtimes".
RECENT = 100
DEFAULT_RUNTIME_S = 3600.0  # a cluster without any history
_NORMAL = NormalDist()

Key = tuple[object, ...]
Remaining = Callable[[Workload, float], float]
# (times, survival after each, the last observation, the survival there): `_km_curve`
Curve = tuple[list[float], list[float], float, float]
Job = tuple[str, str, str, int, float]  # (project, user, kind, gpus, seconds)


def _keys(project: str, user: str, kind: str, gpus: int) -> tuple[Key, ...]:
    """The forecast keys of a job, finest first."""
    return ((0, project, user, kind, gpus), (1, project, kind), (2, kind, gpus), (3, kind), (4,))


def _by_key(jobs: Iterable[Job]) -> dict[Key, list[float]]:
    """The finite, non-negative seconds of `jobs` under each of their keys, in order."""
    lists: dict[Key, list[float]] = defaultdict(list)
    for project, user, kind, gpus, seconds in jobs:
        if seconds >= 0 and math.isfinite(seconds):
            for key in _keys(project, user, kind, gpus):
                lists[key].append(float(seconds))
    return dict(lists)


def _km_curve(ends: Sequence[float], censored: Sequence[float], first: int = 0) -> Curve:
    """Kaplan-Meier survival over runtimes that ended (`ends`) and runs still going that
    have lasted `censored[first:]` so far (both sorted): a run still going counts as at
    risk until its elapsed time, then leaves without ending."""
    total = len(ends) + len(censored) - first
    times: list[float] = []
    survival: list[float] = []
    s, i, j = 1.0, 0, first
    while i < len(ends):
        t = ends[i]
        while j < len(censored) and censored[j] < t:
            j += 1
        at_risk = total - i - (j - first)
        d = 1
        while i + d < len(ends) and ends[i + d] == t:
            d += 1
        s *= 1.0 - d / at_risk
        times.append(t)
        survival.append(s)
        i += d
    last = max(ends[-1] if ends else 0.0, censored[-1] if len(censored) > first else 0.0)
    return times, survival, last, s


def _curve_quantile(curve: Curve, q: float) -> float:
    """The q-quantile of a `_km_curve`: the first time its survival falls to 1 - q;
    past the last observation, the scale-free tail from there (P(R > x) = S * last / x)."""
    times, survival, last, s = curve
    for t, st in zip(times, survival, strict=True):
        if st <= 1.0 - q + 1e-12:
            return t
    return last * s / (1.0 - q) if q < 1.0 else math.inf


class RuntimeForecast:
    """Runtime quantiles from past runtimes (see the module docstring)."""

    __slots__ = ("_curves", "_recent", "censored", "min_samples", "order", "recent", "runtimes")

    def __init__(
        self,
        history: Iterable[tuple[str, str, str, int, float]] = (),
        min_samples: int = MIN_SAMPLES,
        recent: int | None = RECENT,
    ) -> None:
        """`history`: (project, user, kind, gpus, runtime seconds) of finished jobs, in
        the order they finished (oldest first). `recent`: how many of a key's runtimes
        longer than a job's elapsed time count, the most recently finished (`RECENT`;
        None: all)."""
        self.min_samples = max(1, int(min_samples))
        self.recent = None if recent is None else max(self.min_samples, int(recent))
        self.order: dict[Key, list[float]] = _by_key(history)
        self.runtimes: dict[Key, list[float]] = {k: sorted(v) for k, v in self.order.items()}
        self.censored: dict[Key, list[float]] = {}
        self._recent: dict[tuple[Key, float], list[float]] = {}
        self._curves: dict[tuple[Key, float], Curve] = {}

    def __len__(self) -> int:
        return len(self.runtimes.get((4,), ()))

    def with_running(self, running: Iterable[Job]) -> RuntimeForecast:
        """This forecast with the runs going now, (project, user, kind, gpus, elapsed
        seconds), as censored observations: each lasts at least what it has run.

        The history holds only runs that ended, so it under-counts the long ones: on a
        young cluster (or a key whose long runs have not ended yet) most of those are
        still running, and runtimes from the ended ones alone freed their GPUs far too
        early (Philly's first two weeks: estimates early by a median factor of 1.5).
        Kaplan-Meier over both corrects this by as much as the key's runs going now
        weigh against its ended ones: on a key with a long history it changes little.
        docs/benchmarks-history.md, "the jobs running now as censored runtimes"."""
        out = copy(self)
        out.censored = {k: sorted(v) for k, v in _by_key(running).items()}
        out._curves = {}
        return out

    def remaining(
        self, project: str, user: str, kind: str, gpus: int, elapsed: float, q: float
    ) -> float:
        """The q-quantile of the time still to run for a job that has run `elapsed`
        seconds (0 for a job not started): from the finest key with at least
        `min_samples` runtimes longer than `elapsed` (with its runs going now longer
        than that, `with_running`), else the scale-free rule."""
        elapsed = max(0.0, float(elapsed))
        q = min(max(q, 0.0), 1.0)
        for key in _keys(project, user, kind, gpus):
            runs = self.runtimes.get(key)
            if not runs:
                continue
            i = bisect_right(runs, elapsed)
            above = len(runs) - i
            if above < self.min_samples:
                continue
            if self.recent is not None and above > self.recent:
                runs, i, above = self._last_above(key, elapsed), 0, self.recent
            if self._going_above(key, elapsed):
                return max(0.0, _curve_quantile(self._curve(key, elapsed, runs, i), q) - elapsed)
            pos = q * (above - 1)
            lo = math.floor(pos)
            hi = min(lo + 1, above - 1)
            value = runs[i + lo] + (runs[i + hi] - runs[i + lo]) * (pos - lo)
            return max(0.0, value - elapsed)
        scale_free = elapsed * q / (1.0 - q) if q < 1.0 else math.inf
        runs = self.runtimes.get((4,))
        if not runs:  # no history at all: a default runtime, or the rule if longer
            return max(DEFAULT_RUNTIME_S - elapsed, scale_free)
        if elapsed <= 0:  # a few runtimes in all: their quantile beats a constant
            return runs[min(len(runs) - 1, int(q * len(runs)))]
        return scale_free

    def _going_above(self, key: Key, elapsed: float) -> bool:
        """Whether some of `key`'s runs going now have run longer than `elapsed`."""
        going = self.censored.get(key)
        return going is not None and going[-1] > elapsed

    def _curve(self, key: Key, elapsed: float, runs: list[float], i: int) -> Curve:
        """The survival of `key`'s runs past `elapsed`: `runs[i:]` (its runtimes longer
        than that, as `remaining` picked them) and its runs going now past it (kept: the
        three forward runs ask for the same jobs)."""
        found = self._curves.get((key, elapsed))
        if found is None:
            going = self.censored[key]
            first = bisect_right(going, elapsed)
            found = self._curves[(key, elapsed)] = _km_curve(runs[i:], going, first)
        return found

    def _last_above(self, key: Key, elapsed: float) -> list[float]:
        """The `recent` most recently finished runtimes of `key` longer than `elapsed`,
        sorted (kept: the three forward runs ask for the same jobs)."""
        found = self._recent.get((key, elapsed))
        if found is None:
            assert self.recent is not None
            last = islice((r for r in reversed(self.order[key]) if r > elapsed), self.recent)
            found = self._recent[(key, elapsed)] = sorted(last)
        return found


def _radical_inverse(k: int) -> float:
    """The k-th point (k >= 1) of the base-2 van der Corput sequence: 1/2, 1/4, 3/4, 1/8,
    5/8, ...; any run of consecutive points covers (0, 1) evenly."""
    x, f = 0.0, 0.5
    while k:
        if k & 1:
            x += f
        k >>= 1
        f /= 2
    return x


def spread_quantiles(center: float, spread: float, first: int, count: int) -> list[float]:
    """The runtime quantiles of the `first`-th .. (`first` + `count` - 1)-th job of a
    middle run: stratified points of (0, 1) (van der Corput) pulled towards `center` on
    the normal scale, q = Phi(Phi^-1(center) + spread * Phi^-1(u)). The first is
    `center` itself; any `count` consecutive ones spread like the forecast's quantiles
    would (`spread` 1) or less (`spread` < 1); `spread` 0 gives `center` for every job."""
    center = min(max(center, 1e-9), 1.0 - 1e-9)
    if spread <= 0:
        return [center] * count
    z0 = _NORMAL.inv_cdf(center)
    out = []
    for k in range(first, first + count):
        z = _NORMAL.inv_cdf(_radical_inverse(k))
        out.append(_NORMAL.cdf(z0 + spread * z) if z else center)  # exact at the center
    return out


def spread_points(running_ids: Iterable[str], kept: Mapping[str, int]) -> dict[str, int]:
    """Each running job's point of the spread sequence (k >= 1, `spread_quantiles`): its
    point in `kept` (the last estimate's), the others the lowest free points in an order
    fixed by a hash of their ids (so no attribute of theirs lines up with the sequence).

    Numbering the running jobs afresh each time gave most of them another quantile
    whenever one started or ended (every job hashed after it moved one point on): a
    job's forecast end, and every start behind it, jumped between short and long
    runtimes from one refresh to the next (issue 25). Kept points leave the others'
    alone, and the freed ones are reused, so the points stay 1..n: as stratified as
    numbering afresh."""
    ids = sorted(set(running_ids), key=lambda i: (unit_hash(i), i))
    points: dict[str, int] = {}
    taken: set[int] = set()
    for wid in ids:
        k = kept.get(wid)
        if k is not None and k >= 1 and k not in taken:
            points[wid] = k
            taken.add(k)
    k = 0
    for wid in ids:
        if wid in points:
            continue
        k += 1
        while k in taken:
            k += 1
        points[wid] = k
    return points


def spread_remaining(
    forecast: RuntimeForecast,
    who: Mapping[str, str],
    points: Mapping[str, int],
    center: float,
    spread: float,
) -> Remaining:
    """The middle run's `Remaining`: each job its own quantile (`spread_quantiles`), the
    running jobs at their `points` (`spread_points`), then the others as the run first
    asks for them (the order they start in) at the next points. A job keeps its
    quantile for the whole run."""
    quantile = {wid: spread_quantiles(center, spread, k, 1)[0] for wid, k in points.items()}
    after = [max(points.values(), default=0)]

    def remaining(w: Workload, elapsed: float) -> float:
        q = quantile.get(w.id)
        if q is None:
            after[0] += 1
            q = quantile[w.id] = spread_quantiles(center, spread, after[0], 1)[0]
        return forecast.remaining(w.project, who.get(w.id, ""), w.kind, w.gpus, elapsed, q)

    return remaining


def unit_hash(text: str) -> float:
    """A stable pseudo-random number in [0, 1) for `text` (the same in every process)."""
    return zlib.crc32(text.encode()) / 2**32
