"""Window planner benchmark: fast-mode timings and the report's gains, as JSON.

    .venv/bin/python bench/planner.py [--seed 1] [--repeats 21] [--time-limit 10]

Times fast (and fifo) on the 8-GPU scenarios, on scale (64 GPUs / 30 jobs) and on
a generated 1024 GPUs / 500 jobs / 48 steps scenario (seeded), as medians of
`--repeats` runs of each mode's own `runtime_ms`; then runs the report (fifo,
fast, full on the seven shipped scenarios) and prints everything as one JSON
object. Not a test: figures only.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from scheduler.core.planner import run_mode  # noqa: E402
from scheduler.core.planner.generate import generate_scenario  # noqa: E402
from scheduler.core.planner.model import Scenario, load_scenario, parse_scenario  # noqa: E402
from scheduler.core.planner.report import build_report, shipped_paths  # noqa: E402
from scheduler.core.planner.validate import validate_plan  # noqa: E402


def _median_ms(scenario: Scenario, mode: str, repeats: int) -> float:
    return round(
        statistics.median(run_mode(scenario, mode).metrics["runtime_ms"] for _ in range(repeats)), 3
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--repeats", type=int, default=21)
    parser.add_argument("--time-limit", type=float, default=10.0, help="full mode, per scenario")
    args = parser.parse_args()

    timings: dict[str, dict[str, float]] = {}
    for path in shipped_paths():
        sc = load_scenario(path)
        timings[sc.name] = {
            "gpus": sc.gpus,
            "jobs": len(sc.batch),
            "fifo_ms": _median_ms(sc, "fifo", args.repeats),
            "fast_ms": _median_ms(sc, "fast", args.repeats),
        }
    small = [t["fast_ms"] for t in timings.values() if t["gpus"] == 8]

    big = parse_scenario(
        generate_scenario(
            "generated-1024", gpus=1024, jobs=500, steps=48, services=4, seed=args.seed
        )
    )
    big_plans = {mode: run_mode(big, mode) for mode in ("fifo", "fast")}
    big_repeats = max(3, args.repeats // 4)
    generated = {
        "seed": args.seed,
        "gpus": big.gpus,
        "jobs": len(big.batch),
        "steps": big.steps,
        "contended": big.contended,
        "fast_ms": _median_ms(big, "fast", big_repeats),
        "fifo_ms": _median_ms(big, "fifo", big_repeats),
        "valid": all(not validate_plan(big, p.to_json(big)) for p in big_plans.values()),
        **{
            mode: {k: v for k, v in p.metrics.items() if k != "runtime_ms"}
            for mode, p in big_plans.items()
        },
    }

    report = build_report(time_limit_s=args.time_limit)
    rows = []
    for r in report["rows"]:
        rows.append(
            {
                "scenario": r.scenario,
                "contended": r.contended,
                **{
                    mode: {k: r.metrics[mode][k] for k in ("utilization", "value", "objective",
                                                          "completed", "runtime_ms")}
                    for mode in ("fifo", "fast", "full")
                },
                "fast_gain": dict(zip(("utilization_points", "value_pct"), r.gain("fast"), strict=True)),
                "full_gain": dict(zip(("utilization_points", "value_pct"), r.gain("full"), strict=True)),
                "all_valid": not any(r.violations.values()),
                "full_ge_fast": r.metrics["full"]["objective"] >= r.metrics["fast"]["objective"],
            }
        )  # fmt: skip
    print(
        json.dumps(
            {
                "fast_ms": {
                    "median_8_gpu_scenarios": round(statistics.median(small), 3),
                    "max_8_gpu_scenarios": max(small),
                    "scale_64_gpu_30_jobs": timings["scale"]["fast_ms"],
                    "generated_1024_gpu_500_jobs_48_steps": generated["fast_ms"],
                },
                "per_scenario_ms": timings,
                "generated": generated,
                "report": {
                    "time_limit_s": args.time_limit,
                    "rows": rows,
                    "contended_means": report["contended_means"],
                },
            },
            indent=1,
        )
    )


if __name__ == "__main__":
    main()
