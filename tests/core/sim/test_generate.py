"""scheduler.core.sim.generate: seeded scenarios with the workload mix they promise."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

import pytest

from scheduler.core.sim.generate import SCENARIOS, Scenario, _leaf_shares, generate, write_scenario
from scheduler.core.sim.io import load_cluster, load_trace, load_tree

DAY = 86400


@pytest.fixture(scope="module")
def month() -> Scenario:
    return generate("ai2-month", seed=0)


@pytest.fixture(scope="module")
def saturated() -> Scenario:
    return generate("ai2-saturated", seed=0)


def gpu_s(rows) -> float:  # type: ignore[no-untyped-def]
    return float(sum(r.gpus * r.duration_s for r in rows))


def _check_cluster_and_tree(sc: Scenario) -> None:
    gpus = sc.cluster["host_count"] * sc.cluster["gpus_per_host"]
    assert gpus == 512 and sc.days == 30
    programs = sc.tree["children"]
    assert 3 <= len(programs) <= 4
    leaves = [p for prog in programs for p in prog["children"]]
    assert 12 <= len(leaves) <= 15
    assert len({p["weight"] for p in leaves}) > 3  # uneven weights
    assert all(0 <= r.submit_s < 30 * DAY for r in sc.jobs)


def test_ai2_month_mix_follows_the_reported_production_mix(month: Scenario) -> None:
    """SPEC 1.2/1.6: allocated work about what the cluster can run, a standing backlog of
    unallocated sweeps on top (queued from the first hour) to fill what budgets leave."""
    _check_cluster_and_tree(month)
    capacity = 512 * 30 * DAY
    allocated = gpu_s(r for r in month.jobs if r.min_runtime_s > 0)
    assert 0.8 <= allocated / capacity <= 0.95
    sweeps = [r for r in month.jobs if r.min_runtime_s == 0]
    assert 0.05 <= gpu_s(sweeps) / capacity <= 0.15
    opening = [r for r in sweeps if r.submit_s < 3600]
    assert sum(r.gpus for r in opening) >= 1.5 * 512  # queued from the start


def test_ai2_month_teams_swing_above_and_below_their_share(month: Scenario) -> None:
    """Each team has weeks below its share and pushes above it, so budgets and demand do
    not match hour by hour (what unallocated work is for)."""
    shares = _leaf_shares(month.tree)
    weekly: dict[tuple[str, int], float] = defaultdict(float)
    for r in month.jobs:
        if r.min_runtime_s > 0:
            weekly[(r.project, min(r.submit_s // (7 * DAY), 3))] += r.gpus * r.duration_s
    swinging = 0
    for project, share in shares.items():
        fair_week = share * 512 * 7 * DAY
        ratios = [weekly[(project, w)] / fair_week for w in range(4)]
        if min(ratios) < 0.9 and max(ratios) > 1.1:
            swinging += 1
    assert swinging >= len(shares) // 2


def test_ai2_saturated_every_project_keeps_submitting_enough(saturated: Scenario) -> None:
    """By the end of every day, each project has submitted more allocated work than its
    entitled share of the cluster could have run so far (so it always has a queue)."""
    _check_cluster_and_tree(saturated)
    capacity = 512 * 30 * DAY
    assert 2.0 <= gpu_s(saturated.jobs) / capacity <= 3.0
    free = gpu_s(r for r in saturated.jobs if r.min_runtime_s == 0)
    assert 0.15 <= free / gpu_s(saturated.jobs) <= 0.20
    gpus = 512
    shares = _leaf_shares(saturated.tree)
    daily: dict[tuple[str, int], float] = defaultdict(float)
    for r in saturated.jobs:
        if r.min_runtime_s > 0:
            daily[(r.project, r.submit_s // DAY)] += r.gpus * r.duration_s
    for project, share in shares.items():
        submitted = 0.0
        for day in range(30):
            submitted += daily[(project, day)]
            assert submitted >= 1.1 * share * gpus * (day + 1) * DAY, (project, day)


def test_ai2_month_job_kinds_follow_their_contracts(month: Scenario) -> None:
    by_kind = defaultdict(list)
    for r in month.jobs:
        by_kind[r.kind].append(r)
    assert set(by_kind) == {"debug", "training", "interactive", "sweep"}
    for r in by_kind["debug"]:
        assert r.gpus <= 8 and r.duration_s <= 900 and r.min_runtime_s == r.duration_s
        assert not r.resumable
    large = [r for r in by_kind["training"] if r.gpus > 8]
    assert {r.gpus for r in large} <= {16, 32, 64, 128} and 128 in {r.gpus for r in large}
    for r in large:
        assert r.resumable and 0 < r.min_runtime_s <= 4 * 3600
        assert r.min_runtime_s == r.duration_s or r.min_runtime_s >= 3600
    assert max(r.duration_s for r in large) >= DAY  # hours to days
    for r in by_kind["interactive"]:
        assert r.gpus <= 2 and not r.resumable and 0 < r.min_runtime_s <= 8 * 3600
    assert all(r.min_runtime_s == 0 for r in by_kind["sweep"])


def test_ai2_month_has_host_failures_that_recover(month: Scenario) -> None:
    events = month.cluster["events"]
    down = [e for e in events if e["health"] == "unhealthy"]
    up = [e for e in events if e["health"] == "healthy"]
    assert len(down) >= 3 and {e["host"] for e in up} == {e["host"] for e in down}


@pytest.mark.parametrize("name", sorted(set(SCENARIOS) - {"ai2-month", "ai2-saturated"}))
def test_small_scenarios_load_cleanly(tmp_path: Path, name: str) -> None:
    paths = write_scenario(name, tmp_path, seed=3)
    cluster, tree = load_cluster(paths[0]), load_tree(paths[1])
    jobs = load_trace(paths[2], tree, cluster)
    assert 50 <= len(jobs) <= 2000


def test_scenario_specifics() -> None:
    burst = generate("debug-burst")
    assert sum(1 for r in burst.jobs if r.kind == "debug" and DAY <= r.submit_s < DAY + 3600) == 300
    gang = generate("large-gang")
    assert {r.gpus for r in gang.jobs if r.project == "big"} == {64, 128}
    zero = generate("zero-weight")
    assert _leaf_shares(zero.tree)["unfunded"] == 0
    unfunded = [r for r in zero.jobs if r.project == "unfunded"]
    assert sum(1 for r in unfunded if r.min_runtime_s > 0) == 3
    fail = generate("host-failures")
    ev = fail.cluster["events"]
    hosts_down = [e["host"] for e in ev if e["health"] == "unhealthy"]
    assert len(hosts_down) == 7 and len(set(hosts_down)) == 6  # one fails twice
    ups = [e["host"] for e in ev if e["health"] == "healthy"]
    assert len(set(hosts_down) - set(ups)) == 1  # one never comes back


def test_same_seed_same_bytes_other_seed_differs(tmp_path: Path) -> None:
    a = write_scenario("host-failures", tmp_path / "a", seed=7)
    b = write_scenario("host-failures", tmp_path / "b", seed=7)
    c = write_scenario("host-failures", tmp_path / "c", seed=8)
    assert [p.read_bytes() for p in a] == [p.read_bytes() for p in b]
    assert a[2].read_bytes() != c[2].read_bytes()


def test_unknown_scenario() -> None:
    with pytest.raises(ValueError, match="unknown scenario"):
        generate("nope")
