"""Probe: one `bench/outcomes.py` run with any `SimConfig` setting, and the overload
replay at another factor or window (issue 24's unseen workloads).

Usage: python bench/latency_probe.py SCENARIO SEED [key=value ...] [--data DIR]
SCENARIO: a generated scenario, or `overload:FACTOR:FIRST_DAY` (14 days of the Philly
Oct-Nov trace from FIRST_DAY on 48 x 8 GPUs, submit times compressed to FACTOR x the
capacity, as `bench/outcomes.py` builds the 10x replay from day 7). key=value: a
`SimConfig` field (float, int, bool or str), e.g. short_reserve_take_after_s=60.
Prints one JSON line with the figures of `bench/outcomes.py`'s runs.
"""

from __future__ import annotations

import dataclasses
import json
import sys
import time
from pathlib import Path
from typing import Any

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.outcomes import DAY, _inputs  # noqa: E402
from scheduler.core.sim.io import load_trace, load_tree_with_usage  # noqa: E402
from scheduler.core.sim.model import ClusterSpec, HostSpec, SimConfig  # noqa: E402
from scheduler.core.sim.replay import simulate  # noqa: E402
from scheduler.core.sim.report import DEBUG_CLASS, build_report  # noqa: E402


def overload(data: Path, factor: float, first_day: float) -> tuple[Any, Any, Any, float]:
    """The Philly overload replay at `factor` x the capacity from `first_day`."""
    tree, _ = load_tree_with_usage(data / "philly-tree.json")
    cluster = ClusterSpec("philly-48", tuple(HostSpec(f"h{i:03d}", 8) for i in range(48)))
    jobs = load_trace(data / "philly-octnov-2017.csv", tree, cluster)
    lo, hi = first_day * DAY, (first_day + 14) * DAY
    window = [j for j in jobs if lo <= j.submit_s < hi]
    span = sum(j.gpus * j.duration_s for j in window) / (factor * cluster.total_gpus)
    scale = span / (hi - lo)
    window = [dataclasses.replace(j, submit_s=(j.submit_s - lo) * scale) for j in window]
    return cluster, tree, window, span


def _value(text: str) -> Any:
    if text in ("True", "False"):
        return text == "True"
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text


def main(argv: list[str]) -> int:
    data = Path("/work/shared/data")
    if "--data" in argv:
        i = argv.index("--data")
        data = Path(argv[i + 1])
        argv = argv[:i] + argv[i + 2 :]
    scenario, seed, *pairs = argv
    settings = {k: _value(v) for k, v in (p.split("=", 1) for p in pairs)}
    if scenario.startswith("overload:"):
        _, factor, day = scenario.split(":")
        cluster, tree, jobs, until = overload(data, float(factor), float(day))
    else:
        cluster, tree, jobs, until = _inputs(scenario, int(seed), data)
    config = SimConfig(until_s=until, seed=int(seed), **settings)
    t0 = time.monotonic()
    result = simulate(cluster, tree, jobs, config)
    report = build_report(result, tree)
    debug = report["wait_per_start_s"]["by_class"].get(DEBUG_CLASS, {})
    open_debug = sum(
        1
        for j in result.jobs
        if j.state == "pending" and j.gpus <= 8 and 0 < j.min_runtime_s <= 15 * 60
    )
    ent = report["entitlement"]
    row = {
        "run": scenario,
        "seed": int(seed),
        "settings": settings,
        "debug_p90_s": debug.get("p90"),
        "debug_p99_s": debug.get("p99"),
        "debug_open": open_debug,
        "entitlement_overall": ent["overall"],
        "entitlement_worst": ent["worst"],
        "occupancy_of_bound": report["occupancy_of_bound"],
        "wall_s": round(time.monotonic() - t0, 1),
    }
    print(json.dumps(row), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
