"""Attributing GPU samples to attempts and the utilization figures (ledger/utilization.py)."""

from __future__ import annotations

import pytest

from ledger.utilization import (
    Hold,
    attribute,
    effective_gpu_h,
    utilization,
    utilization_hourly,
    window_gpu_h,
)
from scheduler.adapters.gpu_metrics import GpuSample


def _samples(host, gpu, values, start=10.0, step=10.0):
    return [GpuSample(host, gpu, start + i * step, v) for i, v in enumerate(values)]


def test_each_gpu_sample_goes_to_the_attempt_that_held_it_then():
    samples = [
        *_samples("h0", 0, [90, 90, 90, 90]),
        *_samples("h0", 1, [50, 50, 50, 50]),
        *_samples("h1", 0, [0, 0, 0, 0]),
    ]
    holds = [
        Hold(attempt=1, gpus=2, placements=(("h0", (0, 1)),), start_s=0.0, end_s=25.0),
        Hold(attempt=2, gpus=1, placements=(("h0", (0,)),), start_s=25.0),
        Hold(attempt=3, gpus=1, placements=(("h1", (0,)),), start_s=0.0),
        Hold(attempt=4, gpus=1, placements=(("h9", (0,)),), start_s=0.0),  # no metrics
    ]
    windows = {w.attempt: w for w in attribute(samples, holds, step_s=10.0)}
    assert set(windows) == {1, 2, 3}  # unknown is left out, never zero
    assert (windows[1].samples, windows[1].mean_pct, windows[1].known_s) == (2, 70.0, 20.0)
    assert (windows[2].samples, windows[2].mean_pct) == (2, 90.0)
    assert windows[2].known_s == pytest.approx(5.0 + 10.0)  # cut at its start
    assert (windows[3].mean_pct, windows[3].max_pct) == (0.0, 0.0)


def test_a_time_where_only_some_gpus_report_uses_those():
    samples = [*_samples("h0", 0, [80, 80]), *_samples("h0", 1, [40])]
    hold = Hold(attempt=1, gpus=2, placements=(("h0", (0, 1)),), start_s=0.0)
    (window,) = attribute(samples, [hold], step_s=10.0)
    assert window.mean_pct == pytest.approx((60.0 + 80.0) / 2)
    assert window.max_pct == 80.0


def test_utilization_and_effective_gpu_hours_are_unknown_without_measurements():
    assert utilization(0.0, 0.0) is None
    assert effective_gpu_h(8.0, None) is None
    assert utilization(3.0, 4.0) == 0.75
    assert effective_gpu_h(8.0, 0.75) == 6.0


def test_hourly_rollup_spreads_windows_over_their_hours():
    hourly = utilization_hourly(
        [("7", 2, 3000.0, 4200.0, 1200.0, 50.0), ("7", 1, 100.0, 100.0, 60.0, 100.0)],
        0.0,
        7200.0,
    )
    (first, second) = hourly["7"]
    assert first[0] == pytest.approx(2 * 1200 / 3600 / 2 + 60 / 3600)
    assert first[1] == pytest.approx(2 * 1200 / 3600 / 2 * 0.5 + 60 / 3600)
    assert second == pytest.approx((2 * 600 / 3600, 2 * 600 / 3600 * 0.5))
    w = attribute(_samples("h0", 0, [50]), [Hold(1, 4, (("h0", (0,)),), 0.0)], step_s=10.0)[0]
    assert window_gpu_h(w, 4) == pytest.approx((4 * 10 / 3600, 4 * 10 / 3600 * 0.5))


def test_a_fully_qualified_host_name_in_the_metrics_matches_the_node_name():
    samples = _samples("gpu01.cluster.local", 3, [60, 80])
    hold = Hold(attempt=1, gpus=1, placements=(("gpu01", (3,)),), start_s=0.0)
    (window,) = attribute(samples, [hold], step_s=10.0)
    assert (window.samples, window.mean_pct) == (2, 70.0)


def test_sm_activity_and_memory_are_kept_per_attempt_and_unknown_where_missing():
    def at(gpu, t, util, sm=None, fb=None):
        return GpuSample("h0", gpu, t, util, sm_active_pct=sm, fb_used_mib=fb)

    samples = [
        at(0, 10.0, 90, sm=80.0, fb=30000.0),
        at(1, 10.0, 70, sm=60.0, fb=50000.0),  # time 10: SM mean 70, memory peak 50000
        at(0, 20.0, 90, sm=50.0),  # time 20: SM 50 (GPU 1 has none), memory unknown
        at(1, 30.0, 10),  # time 30: neither published
        at(2, 10.0, 99),  # another attempt's GPU, without either
    ]
    holds = [
        Hold(attempt=1, gpus=2, placements=(("h0", (0, 1)),), start_s=0.0),
        Hold(attempt=2, gpus=1, placements=(("h0", (2,)),), start_s=5.0),
    ]
    windows = {w.attempt: w for w in attribute(samples, holds, step_s=10.0)}
    first = windows[1]
    assert first.mean_pct == pytest.approx((80 + 90 + 10) / 3)
    assert first.sm_active_pct == pytest.approx((70.0 + 50.0) / 2)
    assert (first.sm_known_s, first.known_s) == (20.0, 30.0)
    assert first.memory_used_max_mib == 50000.0
    other = windows[2]
    assert (other.sm_active_pct, other.sm_known_s, other.memory_used_max_mib) == (None, 0.0, None)
