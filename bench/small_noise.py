"""Benchmark: what the short-job reserve costs on a small shape, beside how far the same
replay moves by chance (issue 24's row "entitlement on host-failures, large-gang,
zero-weight: not below the same run with the mechanism off by more than 1 point").

Per seed, three replays with the simulator's defaults: the reserve on, the reserve off
(`short_reserve_auto=False`), and the reserve off again with one debug job left out of
the trace (picked by the seed; at most 8 GPUs for at most 15 minutes of a run of about
20,000 GPU-h). The second difference is no mechanism at all: it is how far one job moves
the run, the noise floor the row's per-seed bound sits on. Prints one JSON line per
seed, then one summary line per difference: mean and standard error of the overall
entitlement difference (points, each run capped at 100% as the row), and on how many
seeds the row's value (the larger shortfall, overall or worst) is above 1 point.

Usage: python bench/small_noise.py [--scenario host-failures] [--seeds 0-29]
       [--workers 1] [--data DIR]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import statistics
import sys
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.outcomes import ROOT, _inputs, _seeds, run_figures  # noqa: E402
from scheduler.core.sim.model import SimConfig  # noqa: E402
from scheduler.core.sim.replay import simulate  # noqa: E402

KEYS = ("entitlement_overall", "entitlement_worst")
# scenario, seed, data folder
Spec = tuple[str, int, str]


def _left_out(jobs: list[Any], seed: int) -> str:
    """The id of the debug job the seed leaves out (deterministic)."""
    debug = [j for j in jobs if j.kind == "debug"]
    return str(debug[(seed * 104729 + 7919) % len(debug)].job_id)


def run_seed(spec: Spec) -> dict[str, Any]:
    """The three replays of one seed and their figures."""
    scenario, seed, data = spec
    cluster, tree, jobs, until = _inputs(scenario, seed, Path(data))
    gone = _left_out(jobs, seed)
    base = SimConfig(until_s=until, seed=seed)
    runs = {
        "on": (jobs, base),
        "off": (jobs, dataclasses.replace(base, short_reserve_auto=False)),
        "off_one_job_less": (
            [j for j in jobs if j.job_id != gone],
            dataclasses.replace(base, short_reserve_auto=False),
        ),
    }
    row: dict[str, Any] = {"run": scenario, "seed": seed, "left_out": gone}
    for name, (trace, config) in runs.items():
        figures = run_figures(simulate(cluster, tree, trace, config), tree)
        row[name] = {k: figures[k] for k in (*KEYS, "debug_p90_s", "debug_p99_s")}
    return row


def _shortfall(a: dict[str, Any], b: dict[str, Any]) -> float:
    """The row's value: how far `a` falls below `b`, overall or worst, capped at 100%."""
    return max(min(1.0, float(b[k])) - min(1.0, float(a[k])) for k in KEYS)


def summary(rows: list[dict[str, Any]], first: str, second: str) -> dict[str, Any]:
    """Mean (standard error) of `first` minus `second`, overall, in points, and the
    seeds where `first` falls more than 1 point below `second`."""
    diffs = [100 * (min(1.0, r[first][KEYS[0]]) - min(1.0, r[second][KEYS[0]])) for r in rows]
    se = statistics.stdev(diffs) / math.sqrt(len(diffs)) if len(diffs) > 1 else 0.0
    return {
        "difference": f"{first} minus {second}",
        "seeds": len(rows),
        "overall_mean_points": round(statistics.mean(diffs), 3),
        "standard_error": round(se, 3),
        "seeds_below_by_more_than_1_point": sum(
            1 for r in rows if _shortfall(r[first], r[second]) > 0.01
        ),
    }


def main() -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--scenario", default="host-failures")
    ap.add_argument("--seeds", default="0-29")
    ap.add_argument("--workers", type=int, default=1)
    ap.add_argument("--data", type=Path, default=ROOT.parent / "shared" / "data")
    args = ap.parse_args()
    specs = [(args.scenario, s, str(args.data)) for s in _seeds(args.seeds)]
    rows = []
    with ProcessPoolExecutor(max(1, args.workers)) as pool:
        for row in pool.map(run_seed, specs):
            print(json.dumps(row), flush=True)
            rows.append(row)
    for first, second in (("on", "off"), ("off_one_job_less", "off")):
        print(json.dumps(summary(rows, first, second)), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
