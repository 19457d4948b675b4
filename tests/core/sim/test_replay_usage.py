"""The incremental usage trackers against straightforward references."""

from __future__ import annotations

import math
import random

import pytest

from scheduler.core.sim.usage import DecayedUsage, WindowUsage, make_usage


def test_window_counts_the_cut_bucket_pro_rata_and_forgets_old_usage() -> None:
    w = WindowUsage(["a", "b"], window_s=7200.0)
    w.add_rate("a", 0.0, 2.0)
    assert w.usage(1800.0) == {"a": 3600.0}
    w.add_rate("a", 3600.0, -2.0)
    assert w.usage(5400.0) == {"a": 7200.0}
    # window [1800, 9000]: half of the hour-0 bucket is still inside
    assert w.usage(9000.0)["a"] == pytest.approx(3600.0)
    assert w.usage(12000.0) == {}


def test_window_matches_exact_integral_on_hour_aligned_runs() -> None:
    rng = random.Random(5)
    window = 5 * 3600.0
    w = WindowUsage(["a", "b", "c"], window_s=window)
    runs: list[tuple[str, float, float, float]] = []
    t = 0.0
    open_runs: list[tuple[str, float, float]] = []
    for _ in range(200):
        t += 3600.0 * rng.randint(0, 2)
        if open_runs and rng.random() < 0.5:
            p, g, s = open_runs.pop(rng.randrange(len(open_runs)))
            w.add_rate(p, t, -g)
            runs.append((p, g, s, t))
        else:
            p, g = rng.choice("abc"), float(rng.choice([1, 2, 8]))
            w.add_rate(p, t, g)
            open_runs.append((p, g, t))
        now = t + 3600.0 * rng.randint(0, 1)  # queries at hour boundaries are exact
        got = w.usage(now)
        for p in "abc":
            ref = 0.0
            for q, g, s, e in runs + [(q, g, s, math.inf) for q, g, s in open_runs]:
                if q == p:
                    ref += g * max(0.0, min(e, now) - max(s, now - window))
            assert got.get(p, 0.0) == pytest.approx(ref, abs=1e-6)
        t = now  # time never goes backwards


@pytest.mark.timeout(30, method="signal")  # fails alone; the run goes on
def test_a_bucket_boundary_that_division_rounds_down_does_not_stall_the_flush() -> None:
    size = 1 / 3  # 73384.666... / (1/3) rounds to a hair under bucket 220154's start
    t = 220154 * size
    assert (math.floor(t / size) + 1) * size <= t
    w = WindowUsage(["a"], window_s=3600.0, bucket_s=size)
    w.add_rate("a", t, 1.0)
    assert w.usage(t + 10.0)["a"] == pytest.approx(10.0)


def test_window_error_is_bounded_by_one_bucket_off_the_hour() -> None:
    w = WindowUsage(["a"], window_s=3 * 3600.0)
    w.add_rate("a", 1000.0, 1.0)
    w.add_rate("a", 1100.0, -1.0)  # 100 GPU-s inside hour 0
    # exact answer at 11500 (window [700, 11500]) is 100; pro rata gives 100 * 2900/3600
    assert w.usage(11500.0)["a"] == pytest.approx(100 * 2900 / 3600)


def test_decayed_usage_halves_every_half_life() -> None:
    d = DecayedUsage(["a"], half_life_s=100.0)
    d.add_rate("a", 0.0, 1.0)
    d.add_rate("a", 10.0, -1.0)
    u10 = d.usage(10.0)["a"]
    assert u10 == pytest.approx(100 / math.log(2) * (1 - 2 ** (-0.1)))
    assert d.usage(110.0)["a"] == pytest.approx(u10 / 2)
    assert isinstance(make_usage(["a"], 3600.0, 100.0), DecayedUsage)
    assert isinstance(make_usage(["a"], 3600.0), WindowUsage)
