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

import json
import sys
from pathlib import Path
from typing import Any

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.outcomes import ROOT, _inputs, overload_replay, run_figures  # noqa: E402
from scheduler.core.sim.io import load_tree_with_usage  # noqa: E402
from scheduler.core.sim.model import SimConfig  # noqa: E402
from scheduler.core.sim.replay import simulate  # noqa: E402


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
    data = ROOT.parent / "shared" / "data"
    if "--data" in argv:
        i = argv.index("--data")
        data = Path(argv[i + 1])
        argv = argv[:i] + argv[i + 2 :]
    scenario, seed, *pairs = argv
    settings = {k: _value(v) for k, v in (p.split("=", 1) for p in pairs)}
    if scenario.startswith("overload:"):
        _, factor, day = scenario.split(":")
        tree, _ = load_tree_with_usage(data / "philly-tree.json")
        cluster, tree, jobs, until = overload_replay(data, tree, float(factor), float(day))
    else:
        cluster, tree, jobs, until = _inputs(scenario, int(seed), data)
    config = SimConfig(until_s=until, seed=int(seed), **settings)
    result = simulate(cluster, tree, jobs, config)
    row = {"run": scenario, "seed": int(seed), "settings": settings, **run_figures(result, tree)}
    print(json.dumps(row), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
