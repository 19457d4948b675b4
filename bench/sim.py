"""Benchmark: replay 30 simulated days on 1024 GPUs with >= 50,000 jobs at 2-3x demand.

Prints one JSON object: jobs, simulated days, demand ratio, wall seconds, engine
cycles, ms per cycle, and the report's headline figures. The workload is synthetic
and seeded, built here:

- a 3-level tree: org -> 4 programs -> 30 projects with uneven weights;
- jobs arrive as a Poisson process with a day/night swing, spread over projects
  with Zipf-like popularity;
- ~30% debug jobs (1-8 GPUs, <= 15 min, min runtime = duration, not resumable),
  ~52% small training (1-8 GPUs, hours, min runtime <= 1 h, resumable),
  ~5% large training (16-64 GPUs on whole hosts, min runtime <= 4 h, resumable),
  ~3% interactive sessions (1-2 GPUs, hours, not resumable), and ~10% unallocated
  work (min runtime 0, resumable);
- an opening backlog of `--backlog` x the cluster's GPUs queued in the first hour, then
  training durations scaled so that submitted GPU-time is `--load` x capacity, which
  keeps queued + running GPUs at 2-3x the cluster ("demand 2-3x capacity at all times");
- a few host failures (unhealthy for some hours, then healthy again).

With the defaults (submitted GPU-time 0.93x capacity after an opening backlog of 2x the
cluster's GPUs) queued + running GPUs average ~2.2x the cluster over the month. Near a
load of 1.0 the queue is unstable: 0.85 gives ~1x, 1.0 gives ~6x.

By default, as in the simulator's CLI, a cycle runs at every event instant (arrival,
finish, min-runtime expiry, health change) plus the periodic one. `--gap S` lets
engine cycles run at most every S seconds (`SimConfig.min_cycle_gap_s`, like Slurm's
sched_min_interval; events are still applied at their own times): `--gap 60` needs
about a third of the cycles.

Usage: python bench/sim.py [--days 30] [--hosts 128] [--jobs 52000] [--load 0.93]
       [--backlog 2] [--gap 0] [--policy fairshare] [--no-report]
"""

from __future__ import annotations

import argparse
import importlib
import json
import math
import random
import sys
import time
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from scheduler.core.engine.types import BudgetNode  # noqa: E402
from scheduler.core.sim.model import (  # noqa: E402
    ClusterSpec,
    HealthEvent,
    HostSpec,
    SimConfig,
    TraceJob,
)
from scheduler.core.sim.replay import simulate  # noqa: E402
from scheduler.core.sim.report import DEBUG_CLASS, average_demand_gpus, build_report  # noqa: E402

DAY = 86400.0
HOUR = 3600.0


def build_tree(rng: random.Random, programs: int = 4, projects: int = 30) -> BudgetNode:
    """org -> programs -> projects, uneven weights."""
    per = [projects // programs + (1 if i < projects % programs else 0) for i in range(programs)]
    kids = []
    n = 0
    for p, count in enumerate(per):
        leaves = []
        for _ in range(count):
            leaves.append(BudgetNode(f"proj-{n:02d}", float(rng.choice([1, 2, 3, 5, 8, 13]))))
            n += 1
        kids.append(BudgetNode(f"prog-{p}", float(rng.choice([2, 3, 4, 5])), tuple(leaves)))
    return BudgetNode("org", 1.0, tuple(kids))


def _lognormal(rng: random.Random, median: float, sigma: float, lo: float, hi: float) -> float:
    return min(hi, max(lo, median * math.exp(rng.gauss(0.0, sigma))))


def build_workload(
    seed: int, days: float, hosts: int, jobs: int, load: float, backlog: float = 1.5
) -> tuple[ClusterSpec, BudgetNode, list[TraceJob]]:
    """The seeded cluster, tree and trace of the benchmark."""
    rng = random.Random(seed)
    tree = build_tree(rng)
    projects = [leaf.name for prog in tree.children for leaf in prog.children]
    popularity = [1.0 / (i + 1) ** 0.6 for i in range(len(projects))]
    rng.shuffle(popularity)
    horizon = days * DAY

    # Arrival times: thinning of a Poisson process with a day/night swing.
    times: list[float] = []
    while len(times) < jobs:
        t = rng.uniform(0.0, horizon)
        if rng.random() < 0.6 + 0.4 * math.sin(2 * math.pi * (t % DAY) / DAY) ** 2:
            times.append(float(int(t)))
    times.sort()
    # An opening backlog: the first jobs all arrive in the first hour, so that queued
    # plus running GPUs start (and, with `load` near 1, stay) at 2-3x the cluster.
    opening = int(backlog * hosts * 8 / 5.5)  # training jobs average ~5.5 GPUs
    for i in range(min(opening, len(times))):
        times[i] = float(int(rng.uniform(0.0, HOUR)))
    times.sort()

    rows: list[list] = []  # [project, submit, gpus, duration, min_rt, resumable, kind, scalable]
    for n, t in enumerate(times):
        project = rng.choices(projects, popularity)[0]
        r = rng.random() if n >= opening else rng.uniform(0.30, 0.87)  # backlog: training
        if r < 0.30:
            d = float(rng.randint(30, 900))
            rows.append([project, t, rng.choice([1, 1, 2, 4, 8]), d, d, False, "debug", False])
        elif r < 0.82:
            d = _lognormal(rng, 3 * HOUR, 1.1, 600, 3 * DAY)
            g = rng.choice([1, 1, 2, 2, 4, 8, 8])
            rows.append([project, t, g, d, None, True, "training", True])
        elif r < 0.87:
            d = _lognormal(rng, 8 * HOUR, 0.9, HOUR, 4 * DAY)
            rows.append([project, t, rng.choice([16, 16, 32, 64]), d, None, True, "large", True])
        elif r < 0.90:
            d = _lognormal(rng, 4 * HOUR, 0.5, HOUR, 10 * HOUR)
            rows.append([project, t, rng.choice([1, 2]), d, 8 * HOUR, False, "interactive", False])
        else:
            d = _lognormal(rng, 2 * HOUR, 1.0, 600, 2 * DAY)
            rows.append([project, t, rng.choice([1, 2, 4, 8]), d, 0.0, True, "unallocated", True])

    capacity = hosts * 8 * horizon
    fixed = sum(r[2] * r[3] for r in rows if not r[7])
    scalable = sum(r[2] * r[3] for r in rows if r[7])
    scale = max(0.05, (load * capacity - fixed) / scalable)
    trace: list[TraceJob] = []
    for i, (project, t, g, d, min_rt, resumable, kind, scal) in enumerate(rows):
        if scal:
            d = max(60.0, round(d * scale))
        if min_rt is None:
            min_rt = min(d, HOUR if g <= 8 else 4 * HOUR)
        trace.append(
            TraceJob(
                job_id=f"j{i:06d}",
                project=project,
                user="",
                submit_s=t,
                gpus=g,
                duration_s=float(d),
                min_runtime_s=float(min_rt),
                resumable=resumable,
                priority=rng.choice([0, 0, 0, 1]),
                kind=kind,
            )
        )

    events: list[HealthEvent] = []
    for _ in range(max(1, int(days // 3))):
        h = rng.randrange(hosts)
        at = float(int(rng.uniform(0, horizon * 0.95)))
        events.append(HealthEvent(at, f"h{h:03d}", False))
        events.append(HealthEvent(at + float(int(rng.uniform(2, 12) * HOUR)), f"h{h:03d}", True))
    events.sort(key=lambda e: (e.at_s, e.host))
    cluster = ClusterSpec(
        name="bench-1024",
        hosts=tuple(HostSpec(f"h{i:03d}", 8) for i in range(hosts)),
        events=tuple(events),
    )
    return cluster, tree, trace


def _headline(result, tree) -> dict:
    rep = build_report(result, tree)
    ent = rep["entitlement"]
    waits = rep["wait_per_start_s"]
    debug = waits["by_class"][DEBUG_CLASS]
    return {
        "occupancy": rep["occupancy"],
        "entitlement_overall": ent["overall"],
        "entitlement_worst": ent["worst"],
        "worst_project": ent["worst_project"],
        "debug_p90_wait_s": debug["p90"],
        "wait_p50_s": waits["all"]["p50"],
        "wait_p90_s": waits["all"]["p90"],
        "preemptions": rep["preemptions"]["total"],
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--days", type=float, default=30.0)
    ap.add_argument("--hosts", type=int, default=128)
    ap.add_argument("--jobs", type=int, default=52_000)
    ap.add_argument("--load", type=float, default=0.93, help="submitted GPU-time / capacity")
    ap.add_argument("--backlog", type=float, default=2.0, help="GPUs queued at the start / GPUs")
    ap.add_argument(
        "--gap",
        type=float,
        default=0.0,
        help="SimConfig.min_cycle_gap_s (default 0: a cycle at every event instant)",
    )
    ap.add_argument("--policy", default="fairshare")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--planner", default=None, help="module:function replacing the engine's plan")
    ap.add_argument("--no-report", action="store_true", help="skip the report's figures")
    args = ap.parse_args(argv)

    t0 = time.perf_counter()
    cluster, tree, trace = build_workload(
        args.seed, args.days, args.hosts, args.jobs, args.load, args.backlog
    )
    build_s = time.perf_counter() - t0
    planner = None
    if args.planner:
        mod, _, fn = args.planner.partition(":")
        planner = getattr(importlib.import_module(mod), fn)
    config = SimConfig(
        policy=args.policy, until_s=args.days * DAY, seed=args.seed, min_cycle_gap_s=args.gap
    )
    t1, c1 = time.perf_counter(), time.process_time()
    result = simulate(cluster, tree, trace, config, planner=planner)
    wall = time.perf_counter() - t1
    cpu = time.process_time() - c1
    submitted = sum(j.gpus * j.duration_s for j in trace)
    out: dict = {
        "bench": "sim",
        "policy": args.policy,
        "jobs": len(trace),
        "gpus": cluster.total_gpus,
        "simulated_days": round((result.end_s - result.start_s) / DAY, 3),
        "submitted_x_capacity": round(submitted / (cluster.total_gpus * args.days * DAY), 2),
        "avg_demand_x_capacity": round(average_demand_gpus(result) / cluster.total_gpus, 2),
        "min_cycle_gap_s": args.gap,
        "wall_s": round(wall, 2),
        "cpu_s": round(cpu, 2),  # this process's CPU time: steadier on a shared machine
        "build_s": round(build_s, 2),
        "cycles": result.cycles,
        "skipped_cycles": result.skipped_cycles,
        "events": result.events,
        "ms_per_cycle": round(1000 * wall / max(result.cycles, 1), 3),
        "intervals": len(result.intervals),
        "target_wall_s": 60,
    }
    if not args.no_report:
        t2 = time.perf_counter()
        out["report"] = _headline(result, tree)
        out["report_s"] = round(time.perf_counter() - t2, 2)
    print(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
