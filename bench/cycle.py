"""Benchmark one scheduling cycle of the engine; prints JSON.

Scenario (seeded): 128 hosts x 8 GPUs, 10,000 pending jobs, ~800 running jobs,
200 projects in a 3-level tree (4 divisions x 10 programs x 5 projects).
Timed cases (each cycle with the caller's warm `EngineState`, as the simulator and the
live worker keep one; ``*_cold`` without it):
- ``live``: explain_queue on and off, a full cluster in steady operation with some
  preemptible work (unallocated jobs, jobs past their min runtime);
- ``burst``: most running work is preemptible and usage is random, so one cycle makes
  hundreds of starts and stops (about 450 starts and 650 stops);
- ``steady``: a full cluster where nothing is preemptible (what most simulator cycles
  look like), explain_queue off;
- ``scale_10k``: the live case scaled up: 1,250 hosts x 8 GPUs (10,000 GPUs), 100,000
  pending jobs, ~8,000 running, 2,000 projects (10 divisions x 20 programs x 10).

The snapshots are frozen for the garbage collector once built (`gc.freeze()`), as the
simulator freezes its inputs: a caller keeping large long-lived data should do the same
(the engine itself leaves the collector alone).

Usage: ``python bench/cycle.py [--repeat 50] [--seed 0] [--no-scale] [--scenario NAME]``
(``--scenario`` runs only the named case's keys: live, burst, steady, modes or scale_10k;
the JSON keeps the same shape, less the cases not run).
"""

from __future__ import annotations

import argparse
import gc
import json
import random
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from scheduler.core.engine import (  # noqa: E402
    BudgetNode,
    EngineState,
    Host,
    Placement,
    Policy,
    RunningWorkload,
    Snapshot,
    Workload,
    plan,
)

HOSTS = 128
GPUS = 8
PENDING = 10_000
RUNNING_TARGET = 800
SCENARIOS = ("live", "burst", "steady", "modes", "scale_10k")


def make_tree(
    rng: random.Random, divisions_n: int = 4, programs_n: int = 10, projects_n: int = 5
) -> BudgetNode:
    divisions = []
    for d in range(divisions_n):
        programs = []
        for p in range(programs_n):
            projects = tuple(
                BudgetNode(name=f"d{d}p{p}j{j}", weight=rng.choice([1, 1, 2, 3, 5]))
                for j in range(projects_n)
            )
            programs.append(
                BudgetNode(name=f"d{d}p{p}", weight=rng.randint(1, 4), children=projects)
            )
        divisions.append(
            BudgetNode(name=f"d{d}", weight=rng.randint(1, 3), children=tuple(programs))
        )
    return BudgetNode(name="org", children=tuple(divisions))


def make_snapshot(
    seed: int,
    *,
    mode: str = "live",
    hosts_n: int = HOSTS,
    pending_n: int = PENDING,
    running_target: int = RUNNING_TARGET,
    tree_shape: tuple[int, int, int] = (4, 10, 5),
) -> Snapshot:
    """A cluster state. ``live``: steady operation (about 4% of running jobs unallocated,
    about 6% past their min runtime); ``burst``: a cold start where usage is random and
    most running jobs are preemptible (hundreds of preemptions in one cycle);
    ``full``: a full cluster where every running job is protected."""
    rng = random.Random(seed)
    tree = make_tree(rng, *tree_shape)
    projects = [c.name for d in tree.children for p in d.children for c in p.children]
    now = 30 * 86400.0
    hosts = tuple(Host(name=f"h{i:04d}", gpus=GPUS) for i in range(hosts_n))
    running: list[RunningWorkload] = []
    n = 0
    # Fill hosts with aligned blocks until ~RUNNING_TARGET jobs run and the cluster is full.
    per_host = running_target / hosts_n
    for h in hosts:
        pos = 0
        sizes: list[int] = []
        while pos < GPUS:
            left = GPUS - pos
            want = 1 if rng.random() < per_host / (per_host + 1.5) else rng.choice([2, 4, 8])
            size = want
            while size > left or pos % size:
                size //= 2
            sizes.append(size)
            pos += size
        pos = 0
        for size in sizes:
            proj = rng.choice(projects)
            minrt = rng.choice([0.0, 900.0, 3600.0, 4 * 3600.0, 8 * 3600.0])
            if mode == "burst":
                started = now - rng.uniform(60, 12 * 3600)
            elif mode == "live":
                minrt = 0.0 if rng.random() < 0.04 else max(minrt, 3600.0)
                past = rng.random() < 0.06
                started = now - (minrt + rng.uniform(60, 3600) if past else rng.uniform(0, minrt))
            else:
                started = now - rng.uniform(0, 800)  # all protected
                minrt = max(minrt, 3600.0)
            w = Workload(
                id=f"r{n}",
                project=proj,
                gpus=size,
                submit_s=started - rng.uniform(0, 3600),
                min_runtime_s=minrt,
                resumable=rng.random() < 0.7,
                priority=rng.randint(0, 3),
            )
            running.append(
                RunningWorkload(
                    workload=w,
                    placements=(Placement(h.name, tuple(range(pos, pos + size))),),
                    started_s=started,
                    allocated=minrt > 0,
                    last_checkpoint_s=started + 1800 * int((now - started) // 1800),
                )
            )
            pos += size
            n += 1
    pending: dict[str, list[Workload]] = {p: [] for p in projects}
    for i in range(pending_n):
        proj = rng.choice(projects)
        g = rng.choices([1, 2, 4, 8, 16, 32], weights=[50, 15, 12, 12, 6, 5])[0]
        pending[proj].append(
            Workload(
                id=f"p{i}",
                project=proj,
                gpus=g,
                submit_s=now - rng.uniform(0, 86400),
                min_runtime_s=rng.choice([0.0, 0.0, 900.0, 3600.0, 4 * 3600.0, 8 * 3600.0]),
                resumable=rng.random() < 0.7,
                priority=rng.randint(0, 3),
            )
        )
    for lst in pending.values():
        lst.sort(key=lambda w: (-w.priority, w.submit_s, w.id))
    usage = {p: rng.uniform(0, 7 * 86400 * 20) for p in projects}
    return Snapshot(hosts=hosts, running=running, pending=pending, tree=tree, usage=usage)


def time_case(
    snap: Snapshot, policy: Policy, repeat: int, *, warm: bool = True
) -> dict[str, float]:
    now = 30 * 86400.0
    state = EngineState() if warm else None
    plan(snap, policy, now, state)  # warm the state (compiled tree, block tables, runs)
    times = []
    cpu = []
    for _ in range(repeat):
        t0, c0 = time.perf_counter(), time.process_time()
        out = plan(snap, policy, now, state)
        times.append((time.perf_counter() - t0) * 1000.0)
        cpu.append((time.process_time() - c0) * 1000.0)
    times.sort()
    p99 = times[min(len(times) - 1, int(round(0.99 * (len(times) - 1))))]
    return {
        "median_ms": round(statistics.median(times), 3),
        "cpu_median_ms": round(statistics.median(cpu), 3),  # steadier on a shared machine
        "p99_ms": round(p99, 3),
        "max_ms": round(times[-1], 3),
        "starts": len(out.starts),
        "stops": len(out.stops),
        "reservations": len(out.reservations),
        "queue": len(out.queue),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--repeat", type=int, default=50)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--no-scale", action="store_true", help="skip the scale_10k case")
    ap.add_argument(
        "--scenario",
        choices=SCENARIOS,
        action="append",
        help="run only this case (repeatable); all of them when left out",
    )
    args = ap.parse_args()
    only = set(args.scenario or SCENARIOS)
    if args.no_scale:
        only.discard("scale_10k")
    live = make_snapshot(args.seed)
    burst = make_snapshot(args.seed, mode="burst") if "burst" in only else live
    steady = make_snapshot(args.seed, mode="full") if "steady" in only else live
    # The snapshots live for the whole benchmark, as the simulator's inputs live for a
    # run: frozen, the garbage collector does not walk them at every collection (the
    # engine leaves the collector on; the simulator freezes its inputs the same way).
    gc.freeze()
    result = {
        "scenario": {
            "hosts": HOSTS,
            "gpus_per_host": GPUS,
            "pending": sum(len(v) for v in live.pending.values()),
            "running": len(live.running),
            "projects": len(live.pending),
            "tree_levels": 3,
        },
        "targets_ms": {"median": 20, "p99": 50},
    }
    if "live" in only:
        result["live_explain_on"] = time_case(live, Policy(explain_queue=True), args.repeat)
        result["live_explain_off"] = time_case(live, Policy(explain_queue=False), args.repeat)
        result["live_explain_on_cold"] = time_case(
            live, Policy(explain_queue=True), args.repeat, warm=False
        )
    if "burst" in only:
        result["burst_explain_on"] = time_case(
            burst, Policy(explain_queue=True), max(5, args.repeat // 5)
        )
        result["burst_explain_off"] = time_case(
            burst, Policy(explain_queue=False), max(5, args.repeat // 5)
        )
    if "steady" in only:
        result["steady_full_explain_off"] = time_case(
            steady, Policy(explain_queue=False), args.repeat
        )
    if "modes" in only:
        for mode in ("fifo", "priority", "static"):
            result[f"{mode}_explain_off"] = time_case(
                live, Policy(explain_queue=False, mode=mode), args.repeat
            )
    if "scale_10k" in only:
        big = make_snapshot(
            args.seed,
            hosts_n=1250,
            pending_n=100_000,
            running_target=8_000,
            tree_shape=(10, 20, 10),
        )
        gc.freeze()
        result["scale_10k_scenario"] = {
            "gpus": 1250 * GPUS,
            "pending": sum(len(v) for v in big.pending.values()),
            "running": len(big.running),
            "projects": len(big.pending),
            "target_median_ms": 100,
        }
        reps = max(5, args.repeat // 5)
        result["scale_10k_explain_off"] = time_case(big, Policy(explain_queue=False), reps)
        result["scale_10k_explain_on"] = time_case(big, Policy(explain_queue=True), reps)
    result["targets_ms"]["burst_median"] = 40
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
