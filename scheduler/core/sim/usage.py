"""Per-project charged usage for the fair-share order, maintained incrementally.

The replay loop tells a tracker when a project's allocated running GPUs change
(`add_rate`) and asks for every project's usage when it runs a cycle (`usage`).
Both operations cost O(1) per project, whatever the number of running jobs or
the length of the history:

- `WindowUsage`: allocated GPU-seconds in the sliding window `[now - window, now]`.
  Finished usage lives in hourly buckets; a per-project sum of the buckets fully
  inside the window is kept up to date as buckets age out, and the oldest bucket,
  which the window edge cuts, counts pro rata (usage assumed uniform inside it).
  The running jobs' part is a rate (GPUs) times the time since the project's last
  flush, flushed into the buckets whenever the rate changes or an hour passes.
- `DecayedUsage`: exponentially decayed GPU-seconds with a half-life (Slurm's
  PriorityDecayHalfLife), integrated exactly for a piecewise-constant rate.

Pure Python; no Django.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

__all__ = ["DecayedUsage", "UsageTracker", "WindowUsage", "make_usage"]

BUCKET_S = 3600.0


class UsageTracker:
    """Interface shared by the window and the half-life trackers."""

    def add_rate(self, project: str, now: float, delta_gpus: float) -> None:
        """Change `project`'s charged running GPUs by `delta_gpus` from `now` on."""
        raise NotImplementedError

    def usage(self, now: float) -> dict[str, float]:
        """Every project's usage at `now` (times must not go backwards)."""
        raise NotImplementedError


class WindowUsage(UsageTracker):
    """Allocated GPU-seconds in a sliding look-back window, in hourly buckets."""

    def __init__(
        self, projects: Iterable[str], window_s: float, bucket_s: float = BUCKET_S
    ) -> None:
        if window_s <= 0:
            raise ValueError("the look-back window must be positive")
        self.window_s = float(window_s)
        # A bucket must not be longer than the window, so the unflushed part
        # (always inside the current bucket) is always inside the window.
        self.bucket_s = float(min(bucket_s, window_s))
        self.names: list[str] = list(dict.fromkeys(projects))
        self.index: dict[str, int] = {p: i for i, p in enumerate(self.names)}
        n = len(self.names)
        self.rate = [0.0] * n  # charged running GPUs
        self.since = [0.0] * n  # running usage is flushed into buckets up to here
        self.buckets: list[dict[int, float]] = [{} for _ in range(n)]
        self.inside = [0.0] * n  # sum of the buckets fully inside the window
        self.edge: int | None = None  # the bucket that the window's left edge cuts
        self.edge_value = [0.0] * n  # each project's usage in the edge bucket
        self.flushed_bucket: int | None = None  # every rate is flushed up to this bucket

    def _project(self, project: str) -> int:
        i = self.index.get(project)
        if i is None:
            i = self.index[project] = len(self.names)
            self.names.append(project)
            self.rate.append(0.0)
            self.since.append(0.0)
            self.buckets.append({})
            self.inside.append(0.0)
            self.edge_value.append(0.0)
        return i

    def _advance(self, now: float) -> None:
        """Move the window's left edge to `now - window`, ageing buckets out."""
        edge = math.floor((now - self.window_s) / self.bucket_s)
        old = self.edge
        if old is None:
            self.edge = edge
            return
        if edge <= old:
            return
        span = edge - old
        for i, buckets in enumerate(self.buckets):
            if not buckets:
                continue
            if span <= len(buckets):
                gone = 0.0
                for h in range(old + 1, edge + 1):
                    gone += buckets.get(h, 0.0)
                for h in range(old, edge):
                    buckets.pop(h, None)
            else:
                gone = sum(v for h, v in buckets.items() if old < h <= edge)
                for h in [h for h in buckets if h < edge]:
                    del buckets[h]
            self.inside[i] -= gone
        self.edge = edge
        self.edge_value = [b.get(edge, 0.0) if b else 0.0 for b in self.buckets]

    def _flush(self, i: int, now: float) -> None:
        """Move project i's running usage from `since` to `now` into the buckets."""
        rate = self.rate[i]
        t = self.since[i]
        self.since[i] = now
        if rate == 0.0 or now <= t:
            return
        buckets = self.buckets[i]
        size = self.bucket_s
        edge = self.edge
        if edge is not None:
            t = max(t, edge * size)  # older usage is outside the window for good
        else:
            edge = -(10**18)
        while t < now:
            h = math.floor(t / size)
            if (h + 1) * size <= t:  # the division rounded a hair down (a bucket size
                h += 1  # like 1/3): without this the loop would stand still
            end = min(now, (h + 1) * size)
            amount = rate * (end - t)
            buckets[h] = buckets.get(h, 0.0) + amount
            if h > edge:
                self.inside[i] += amount
            elif h == edge:
                self.edge_value[i] += amount
            t = end

    def add_rate(self, project: str, now: float, delta_gpus: float) -> None:
        i = self._project(project)
        self._advance(now)
        self._flush(i, now)
        self.rate[i] += delta_gpus
        if abs(self.rate[i]) < 1e-9:
            self.rate[i] = 0.0

    def usage(self, now: float) -> dict[str, float]:
        self._advance(now)
        edge = self.edge
        assert edge is not None
        size = self.bucket_s
        current = math.floor(now / size)
        if self.flushed_bucket != current:
            # Once per bucket: keep every unflushed part inside the current bucket.
            for i, rate in enumerate(self.rate):
                if rate:
                    self._flush(i, now)
            self.flushed_bucket = current
        frac = ((edge + 1) * size - (now - self.window_s)) / size
        out: dict[str, float] = {}
        for name, inside, rate, since, edge_value in zip(
            self.names, self.inside, self.rate, self.since, self.edge_value, strict=True
        ):
            value = inside + rate * (now - since) + frac * edge_value
            if value > 1e-9:
                out[name] = value
        return out


class DecayedUsage(UsageTracker):
    """Charged GPU-seconds decayed with a half-life: each second counts 2^(-age/half_life)."""

    def __init__(self, projects: Iterable[str], half_life_s: float) -> None:
        if half_life_s <= 0:
            raise ValueError("the half-life must be positive")
        self.k = math.log(2.0) / half_life_s
        self.names: list[str] = list(dict.fromkeys(projects))
        self.index = {p: i for i, p in enumerate(self.names)}
        n = len(self.names)
        self.rate = [0.0] * n
        self.value = [0.0] * n  # decayed usage at `at`
        self.at = [0.0] * n

    def _project(self, project: str) -> int:
        i = self.index.get(project)
        if i is None:
            i = self.index[project] = len(self.names)
            self.names.append(project)
            self.rate.append(0.0)
            self.value.append(0.0)
            self.at.append(0.0)
        return i

    def _value(self, i: int, now: float) -> float:
        dt = now - self.at[i]
        if dt <= 0:
            return self.value[i]
        decay = math.exp(-self.k * dt)
        return self.value[i] * decay + self.rate[i] * (1.0 - decay) / self.k

    def add_rate(self, project: str, now: float, delta_gpus: float) -> None:
        i = self._project(project)
        self.value[i] = self._value(i, now)
        self.at[i] = now
        self.rate[i] += delta_gpus
        if abs(self.rate[i]) < 1e-9:
            self.rate[i] = 0.0

    def usage(self, now: float) -> dict[str, float]:
        out: dict[str, float] = {}
        for i, name in enumerate(self.names):
            if self.rate[i] or self.value[i]:
                v = self._value(i, now)
                if v > 0.0:
                    out[name] = v
        return out


def make_usage(
    projects: Iterable[str], lookback_s: float, half_life_s: float | None = None
) -> UsageTracker:
    """The tracker a config asks for: half-life decay when set, else the sliding window."""
    if half_life_s:
        return DecayedUsage(projects, half_life_s)
    return WindowUsage(projects, lookback_s)
