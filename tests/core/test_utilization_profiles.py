"""The utilization profiles of simulated work (scheduler/core/utilization.py)."""

from __future__ import annotations

import pytest

from scheduler.core import utilization as u


def test_training_runs_near_90_with_data_loading_dips():
    values = [u.utilization_at(u.TRAINING, t) for t in range(60, 60 + 3600)]
    assert max(values) == 92.0 and min(values) == 45.0
    assert 80.0 <= sum(values) / len(values) <= 90.0  # one dip minute in ten
    assert u.utilization_at(u.TRAINING, 0) == 20.0  # loading


def test_interactive_is_mostly_idle_hung_and_idle_are_zero():
    values = [u.utilization_at(u.INTERACTIVE, t) for t in range(0, 7200)]
    assert sum(v == 0.0 for v in values) / len(values) > 0.9
    assert max(values) == 70.0
    assert {u.utilization_at(p, t) for p in (u.HUNG, u.IDLE) for t in range(0, 4000, 7)} == {0.0}


def test_sweeps_sit_between_idle_and_training():
    mean = u.mean_utilization(u.SWEEP, 0, 3000)
    assert 55.0 <= mean <= 65.0
    assert all(45.0 <= u.utilization_at(u.SWEEP, t) <= 75.0 for t in range(0, 600))


@pytest.mark.parametrize(
    ("kind", "spec", "expected"),
    [
        ("training", {}, u.TRAINING),
        ("debug", {}, u.INTERACTIVE),
        ("interactive", {}, u.INTERACTIVE),
        ("sweep", {}, u.SWEEP),
        ("inference", {}, u.INFERENCE),
        ("", {}, u.TRAINING),
        ("training", {"utilization_profile": "hung"}, u.HUNG),
        ("training", {"simulate": {"profile": "interactive"}}, u.INTERACTIVE),
        ("training", {"utilization_profile": "nonsense"}, u.TRAINING),
    ],
)
def test_the_profile_comes_from_the_spec_else_the_kind(kind, spec, expected):
    assert u.profile_for(kind=kind, spec=spec) == expected


def test_one_training_job_in_twenty_hangs_stably_by_its_key():
    names = [f"job-{i}" for i in range(2000)]
    hung = [n for n in names if u.profile_for(kind="training", key=n) == u.HUNG]
    assert 0.03 < len(hung) / len(names) < 0.08
    assert hung == [n for n in names if u.profile_for(kind="training", key=n) == u.HUNG]
    assert all(u.profile_for(kind="interactive", key=n) == u.INTERACTIVE for n in hung)


def test_sm_active_and_memory_follow_the_profile():
    assert u.sm_active_at(u.TRAINING, 100) == pytest.approx(0.782)
    assert 0.0 <= u.sm_active_at(u.SWEEP, 77) <= 1.0
    assert u.memory_used_mib(u.IDLE) == 0.0
    assert u.memory_used_mib(u.HUNG) > u.memory_used_mib(u.INTERACTIVE) > 0.0
