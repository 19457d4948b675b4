"""The estimate's expected arrivals adapt to each project's last hours
(`expected_arrivals`, `recent_rates`): a burst brings more of that project's jobs, a
quiet spell fewer, within `RATE_BOUNDS`; other projects keep their average."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scheduler.core.sim.eta import expected_arrivals, recent_rates, repeat_arrivals
from scheduler.core.sim.eta.arrivals import RATE_BOUNDS, RECENT_SHARE
from tests.core.engine.helpers import job

DAY = 86400.0
NOW = 7 * DAY


def _steady(project: str, per_day: int, days: int = 7) -> list:
    """`per_day` jobs of `project` a day, evenly spread over the last `days` days."""
    step = DAY / per_day
    return [
        job(f"{project}{i}", project, submit=NOW - days * DAY + step * (i + 0.5))
        for i in range(per_day * days)
    ]


def _count(out: list, project: str) -> int:
    return sum(w.project == project for w in out)


def test_a_project_in_a_burst_is_expected_to_send_more_and_the_others_as_before() -> None:
    # 7 days of 240 jobs a day each (10 an hour); "a" then sends 200 in its last hour
    steady = _steady("a", 240) + _steady("b", 240)
    burst = [job(f"x{i}", "a", submit=NOW - 3000.0 + 10.0 * i) for i in range(200)]
    before = repeat_arrivals(steady + burst, NOW, DAY, 7)
    after = expected_arrivals(steady + burst, NOW, DAY, 7)
    assert _count(after, "a") >= 1.3 * _count(before, "a")
    # the factor stops at its bound: 1.5 times the average's jobs (the hash's draw aside)
    assert _count(after, "a") <= 1.8 * _count(before, "a")
    assert recent_rates(steady + burst, NOW, DAY, 7)["a"] == RATE_BOUNDS[1]
    # b, steady, keeps its average's jobs, the same ones
    assert [w for w in after if w.project == "b"] == [w for w in before if w.project == "b"]


def test_a_project_gone_quiet_is_expected_to_send_fewer() -> None:
    # "a" sent 240 a day for six days and nothing in its last day: no job in the last hours
    quiet = [w for w in _steady("a", 240) if w.submit_s < NOW - DAY] + _steady("b", 240)
    before = repeat_arrivals(quiet, NOW, DAY, 7)
    after = expected_arrivals(quiet, NOW, DAY, 7)
    assert _count(after, "a") <= 0.65 * _count(before, "a")
    assert _count(after, "a") >= 1  # bounded: a quiet spell does not end the project
    assert recent_rates(quiet, NOW, DAY, 7)["a"] == RATE_BOUNDS[0]
    assert _count(after, "b") == _count(before, "b")


def test_a_few_recent_jobs_move_a_project_s_rate_by_their_count_plus_one() -> None:
    # 12 jobs a day (1 expected in 2 h); 2 in the last 2 h: twice the average rate,
    # scaled (2 + 1) / (1 + 1) = 1.5, and 1 in the last 2 h (its average) scales by 1
    often = [w for w in _steady("a", 12) if w.submit_s < NOW - 3 * 3600.0]
    one = [*often, job("r0", "a", submit=NOW - 600.0)]
    two = [*one, job("r1", "a", submit=NOW - 1200.0)]
    assert recent_rates(one, NOW, DAY, 7)["a"] == pytest.approx(1.0, abs=0.05)
    assert recent_rates(two, NOW, DAY, 7)["a"] == pytest.approx(1.5, abs=0.05)


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.tuples(st.floats(0.0, 7 * DAY), st.sampled_from("abc")), max_size=80),
    st.integers(1, 8),
)
def test_the_expected_arrivals_are_a_bounded_scaling_of_the_average(subs, periods) -> None:
    recent = [job(f"j{i}", p, submit=NOW - age) for i, (age, p) in enumerate(subs)]
    rates = recent_rates(recent, NOW, DAY, periods)
    assert all(RATE_BOUNDS[0] <= r <= RATE_BOUNDS[1] for r in rates.values())
    base = {w.id for w in repeat_arrivals(recent, NOW, DAY, periods)}
    out = {w.id for w in expected_arrivals(recent, NOW, DAY, periods)}
    # a project scaled up keeps every job of its average, one scaled down none new
    for p, r in rates.items():
        mine = {i for i in out if i.startswith("j") and recent[int(i[1:-5])].project == p}
        theirs = {i for i in base if recent[int(i[1:-5])].project == p}
        assert (theirs <= mine) if r >= 1 else (mine <= theirs)
    assert RECENT_SHARE < 1
