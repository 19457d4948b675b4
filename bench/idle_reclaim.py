"""Benchmark: what reclaiming idle GPUs gives back (issue 26).

A generated month (`ai2-month`: 64 x 8 GPUs, 30 days, demand 2-3x capacity) in which
10% of the jobs that run longer than an hour go idle after the first hour of every run
(`TraceJob.idle_after_s` = 1 h: a session left open, a hung job; they hold their GPUs
until they end or are stopped), replayed with idle-GPU reclaim off and on
(`SimConfig.idle_reclaim`, idle for 30 min past the min runtime; a reclaimed job is
preempted like any other: resumable ones requeued, the others end).

Prints one JSON line per seed and policy, then one summary line:

- `idle_gpu_h`: allocated-but-idle GPU-hours, i.e. GPU-hours held by runs after their
  first hour (glossary: allocated-but-idle GPU-h), `idle_charged_gpu_h` the part
  charged to budgets, `idle_protected_gpu_h` the part inside the runs' protection (min
  runtime, capped at 8 h), which no reclaim may touch;
- `entitlement_overall` / `entitlement_worst` / `projects_at_95`: the simulator
  report's entitlement delivered (delivered / entitled GPU-hours, capped by demand hour
  by hour; glossary: entitlement);
- `occupancy`, `idle_reclaims` (preemptions by rule `idle_reclaim`), `preemptions`.

Usage: python bench/idle_reclaim.py [--seeds 0-2] [--share 0.1] [--idle-after-h 1]
       [--reclaim-after-min 30] [--workers 1]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import random
import sys
import tempfile
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from scheduler.core.engine.types import stop_rule  # noqa: E402
from scheduler.core.sim.generate import write_scenario  # noqa: E402
from scheduler.core.sim.io import load_cluster, load_trace, load_tree_with_usage  # noqa: E402
from scheduler.core.sim.model import SimConfig, SimResult, TraceJob  # noqa: E402
from scheduler.core.sim.replay import simulate  # noqa: E402
from scheduler.core.sim.report import build_report  # noqa: E402

DAY = 86400.0
HOUR = 3600.0


def _seeds(text: str) -> list[int]:
    lo, _, hi = text.partition("-")
    return list(range(int(lo), int(hi or lo) + 1))


def idle_jobs(jobs: list[TraceJob], share: float, idle_after_s: float, seed: int) -> list[TraceJob]:
    """`share` of the jobs longer than `idle_after_s`, drawn with `seed`, made idle after
    `idle_after_s` of every run."""
    rng = random.Random(f"idle-{seed}")
    long_ids = [j.job_id for j in jobs if j.duration_s > idle_after_s]
    chosen = set(rng.sample(long_ids, round(share * len(long_ids))))
    return [
        dataclasses.replace(j, idle_after_s=idle_after_s) if j.job_id in chosen else j for j in jobs
    ]


def idle_gpu_h(
    result: SimResult, idle_after: dict[str, float], protected_s: dict[str, float]
) -> tuple[float, float, float]:
    """GPU-hours held by idle runs after they went idle: all, charged ones, and the part
    inside the run's protection (its min runtime, capped: no policy may reclaim it)."""
    total = charged = protected = 0.0
    for iv in result.intervals:
        after = idle_after.get(iv.job_id)
        if after is None:
            continue
        idle_from = iv.start_s + after
        idle = max(0.0, iv.end_s - idle_from) * iv.gpus / HOUR
        total += idle
        if iv.allocated:
            charged += idle
            until = min(iv.end_s, iv.start_s + protected_s[iv.job_id])
            protected += max(0.0, until - idle_from) * iv.gpus / HOUR
    return total, charged, protected


def run_one(spec: tuple[int, bool, float, float, float]) -> dict[str, Any]:
    seed, reclaim, share, idle_after_s, reclaim_after_s = spec
    with tempfile.TemporaryDirectory() as tmp:
        write_scenario("ai2-month", tmp, seed=seed)
        tree, _ = load_tree_with_usage(Path(tmp) / "tree.json")
        cluster = load_cluster(Path(tmp) / "cluster.json")
        jobs = load_trace(Path(tmp) / "trace.csv", tree, cluster)
    jobs = idle_jobs(jobs, share, idle_after_s, seed)
    idle_after = {j.job_id: j.idle_after_s for j in jobs if j.idle_after_s is not None}
    protected_s = {j.job_id: min(j.min_runtime_s, 8 * HOUR) for j in jobs}
    config = SimConfig(
        until_s=30 * DAY,
        seed=seed,
        idle_reclaim=reclaim,
        idle_reclaim_after_s=reclaim_after_s,
    )
    result = simulate(cluster, tree, jobs, config)
    report = build_report(result, tree)
    idle, idle_charged, idle_protected = idle_gpu_h(result, idle_after, protected_s)
    ent = report["entitlement"]
    reclaims = sum(1 for p in result.preemptions if stop_rule(p.reason_code) == "idle_reclaim")
    return {
        "seed": seed,
        "idle_reclaim": "on" if reclaim else "off",
        "jobs": len(jobs),
        "idle_jobs": len(idle_after),
        "idle_gpu_h": round(idle, 1),
        "idle_charged_gpu_h": round(idle_charged, 1),
        "idle_protected_gpu_h": round(idle_protected, 1),
        "entitlement_overall": ent["overall"],
        "entitlement_worst": ent["worst"],
        "projects_at_95": ent["projects_at_95"],
        "occupancy": report["occupancy"],
        "idle_reclaims": reclaims,
        "preemptions": len(result.preemptions),
        "wall_s": round(result.wall_s, 1),
    }


def summary(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Per seed: idle GPU-h cut (share) and entitlement overall on minus off."""
    by = {(r["seed"], r["idle_reclaim"]): r for r in rows}
    seeds = sorted({r["seed"] for r in rows})
    cut, cut_unprotected, ent_delta = [], [], []
    for s in seeds:
        off, on = by[(s, "off")], by[(s, "on")]
        cut.append(1 - on["idle_gpu_h"] / off["idle_gpu_h"] if off["idle_gpu_h"] else None)
        free_off = off["idle_gpu_h"] - off["idle_protected_gpu_h"]
        free_on = on["idle_gpu_h"] - on["idle_protected_gpu_h"]
        cut_unprotected.append(1 - free_on / free_off if free_off else None)
        ent_delta.append(on["entitlement_overall"] - off["entitlement_overall"])
    return {
        "summary": "idle_reclaim",
        "seeds": seeds,
        "idle_gpu_h_cut": [None if c is None else round(c, 3) for c in cut],
        "idle_gpu_h_past_protection_cut": [
            None if c is None else round(c, 3) for c in cut_unprotected
        ],
        "entitlement_overall_on_minus_off": [round(d, 4) for d in ent_delta],
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seeds", default="0-2")
    ap.add_argument("--share", type=float, default=0.1)
    ap.add_argument("--idle-after-h", type=float, default=1.0)
    ap.add_argument("--reclaim-after-min", type=float, default=30.0)
    ap.add_argument("--workers", type=int, default=1)
    args = ap.parse_args()
    specs = [
        (seed, reclaim, args.share, args.idle_after_h * HOUR, args.reclaim_after_min * 60.0)
        for seed in _seeds(args.seeds)
        for reclaim in (False, True)
    ]
    if args.workers > 1:
        with ProcessPoolExecutor(args.workers) as pool:
            rows = list(pool.map(run_one, specs))
    else:
        rows = [run_one(s) for s in specs]
    for row in rows:
        print(json.dumps(row), flush=True)
    print(json.dumps(summary(rows)), flush=True)


if __name__ == "__main__":
    main()
