"""fast's local search (`_improve`): it never lowers a candidate's objective, leaves no
spot an unscheduled arrived job fits into, and its grids stay legal."""

from __future__ import annotations

import random

import pytest

from scheduler.core.planner import fast
from scheduler.core.planner.generate import generate_scenario
from scheduler.core.planner.model import load_scenario, parse_scenario
from scheduler.core.planner.plan import build_matrix, compute_metrics
from scheduler.core.planner.report import shipped_paths
from scheduler.core.planner.validate import validate_plan


def _scenarios():
    yield from (load_scenario(p) for p in shipped_paths())
    for seed in range(6):
        yield parse_scenario(
            generate_scenario(f"g{seed}", gpus=8, jobs=20, steps=24, services=1, seed=seed)
        )


def _candidates(sc):
    base = fast._Realtime(sc)
    dc = fast._decay_cum(sc)
    n = len(sc.batch)
    order = sorted(range(n), key=fast._by_priority(sc))
    rank = [0] * n
    for pos, i in enumerate(order):
        rank[i] = pos
    for build in (lambda: fast._construct(sc, order, base, dc), lambda: fast._sweep(sc, base)):
        yield build(), rank, dc


def _fits_somewhere(sc, job, packer, rt) -> bool:
    free = [sc.gpus - a - b for a, b in zip(rt.total, packer.used, strict=True)]
    return fast._earliest(job, packer, free, sc.steps) is not None


@pytest.mark.parametrize("sc", list(_scenarios()), ids=lambda s: s.name)
def test_improve_never_lowers_the_objective_and_leaves_no_fitting_hole(sc):
    for (starts, packer, rt), rank, dc in _candidates(sc):
        before = fast._objective(sc, starts, rt, dc)
        fast._improve(sc, starts, packer, rt, rank, dc, fast._BUDGET)
        rt.top_up(packer.used, sc.gpus)
        assert fast._objective(sc, starts, rt, dc) >= before - 1e-9
        for i, job in enumerate(sc.batch):
            if i not in starts:
                assert not _fits_somewhere(sc, job, packer, rt), job.id
        # the packer's books match the starts
        used = [0] * sc.steps
        for i, (t0, _) in starts.items():
            for t in range(t0, min(sc.steps, t0 + sc.batch[i].duration)):
                used[t] += sc.batch[i].gpus
        assert used == packer.used


def test_a_late_job_takes_the_hole_cut_by_the_window_end():
    # a's priority order keeps it first at 0..3 on GPUs 0-1; b (arrival 2, 6 steps)
    # only fits from step 4 on, cut at the end of the 6-step window
    raw = {
        "name": "hole", "gpus": 2, "steps": 6, "decay": 1.0, "penalty": 8,
        "gpus_per_host": 2, "realtime": [],
        "batch": [
            {"id": "a", "kind": "training", "gpus": 2, "duration": 4, "priority": 3},
            {"id": "b", "kind": "training", "gpus": 2, "duration": 6, "priority": 1,
             "arrival": 2},
        ],
    }  # fmt: skip
    sc = parse_scenario(raw)
    plan = fast.plan_fast(sc)
    assert validate_plan(sc, plan.to_json(sc)) == []
    assert plan.metrics["utilization"] == 1.0
    grid = plan.grid(sc)
    assert grid[4] == ["b", "b"] and grid[5] == ["b", "b"]


def test_improved_fast_is_never_below_the_plain_heuristic_on_random_scenarios():
    rng = random.Random(7)
    for k in range(8):
        sc = parse_scenario(
            generate_scenario(
                f"r{k}", gpus=rng.choice([8, 16]), jobs=rng.randint(5, 25), steps=24,
                services=rng.randint(0, 2), seed=rng.randrange(10**6),
            )
        )  # fmt: skip
        plain = compute_metrics(sc, build_matrix(sc, fast.schedule_fast(sc, improve=False)), 0)
        plan = fast.plan_fast(sc)
        assert plan.metrics["objective"] >= plain["objective"] - 1e-6
        assert validate_plan(sc, plan.to_json(sc)) == []
