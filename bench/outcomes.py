"""Benchmark: the outcomes of the default policy (issue 24's figure table).

Replays the generated scenarios and the Philly traces with the simulator's defaults
(no flags: the adaptive short-job reserve and the share floor on) and prints JSON: one
line per run (`"run"`: scenario, seed, policy, reserve and floor on/off and its figures), then one line per
figure of the table (`"figure"`: value, target, met). Debug waits are those of the
report's debug class (<= 8 GPUs, min runtime <= 15 min); `debug_open` counts debug jobs
still waiting when the run ends (their waits are not in the percentiles).

- `month`: ai2-month seeds 0-9: debug p90 / p99, entitlement overall / worst,
  occupancy of bound;
- `saturated`: ai2-saturated seeds 0-2: debug p90;
- `small`: host-failures, large-gang, zero-weight seeds 0-2, reserve on vs off
  (`short_reserve_auto=False`) and share floor on vs off (`share_floor=False`):
  entitlement overall / worst, at most 1 point lower;
- `philly`: Philly Oct-Nov 2017 on 64 x 8 GPUs (61 days): occupancy of bound;
- `overload`: 48 x 8 GPUs, 14 days of the Philly Oct-Nov trace (from day 7) with their
  submit times compressed so that the GPU-time submitted is 10x the capacity over the
  compressed span: debug p90, replayed until the last submission;
- `baselines`: fifo, priority and static on seed 0 of every generated scenario and on
  the overload replay: behind fair share on entitlement overall and debug p90 (the
  figure's value lists, per scenario and baseline, both figures beside fair share's, the
  debug jobs still waiting, and the verdict: ahead, or behind or equal).

`--share-floor off` replays every run without the share floor (`Policy.share_floor`, on
by default), to measure what it changes. `--demand-window S` (an experiment, off by
default) sizes the short-job reserve's budget for under-served projects' work from the
allocated work waiting that was submitted in the last S seconds
(`Policy.short_reserve_demand_window_s`). `--take-after S`, `--room-now on|off` and
`--fewest-gpus on|off` set how the reserve serves short jobs under overload
(`Policy.short_reserve_take_after_s`, `_room_now`, `_fewest_gpus`; default 15 s, on, on);
`--take-after inf --room-now off --fewest-gpus off` replays the earlier rule (the budget
alone). `--consolidate off` replays every run without consolidation (`Policy.consolidate`,
on by default: planned migrations that merge free pieces into a block for a waiting job).

Usage: python bench/outcomes.py [--figures month,saturated,small,philly,overload,baselines]
       [--month-seeds 0-9] [--saturated-seeds 0-2] [--small-seeds 0-2] [--workers 1]
       [--baseline-scenarios ai2-month,ai2-saturated,host-failures,large-gang,zero-weight,philly-overload]
       [--share-floor on|off] [--demand-window S] [--take-after S] [--room-now on|off]
       [--fewest-gpus on|off] [--consolidate on|off] [--data DIR]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import tempfile
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from scheduler.core.sim.generate import write_scenario  # noqa: E402
from scheduler.core.sim.io import load_cluster, load_trace, load_tree_with_usage  # noqa: E402
from scheduler.core.sim.model import ClusterSpec, HostSpec, SimConfig  # noqa: E402
from scheduler.core.sim.replay import simulate  # noqa: E402
from scheduler.core.sim.report import DEBUG_CLASS, build_report  # noqa: E402

DAY = 86400.0
ROOT = Path(__file__).resolve().parents[1]
FIGURES = ("month", "saturated", "small", "philly", "overload", "baselines")
BASELINES = ("fifo", "priority", "static")
GENERATED = ("ai2-month", "ai2-saturated", "host-failures", "large-gang", "zero-weight")


def _seeds(text: str) -> list[int]:
    lo, _, hi = text.partition("-")
    return list(range(int(lo), int(hi or lo) + 1))


def overload_replay(
    data: Path, tree: Any, factor: float = 10.0, first_day: float = 7.0
) -> tuple[Any, Any, Any, float]:
    """(cluster, tree, jobs, until_s) of the overload replay: 14 days of the Philly
    Oct-Nov trace from `first_day` on 48 x 8 GPUs, submit times compressed so that the
    GPU-time submitted is `factor` x the capacity over the compressed span."""
    cluster = ClusterSpec("philly-48", tuple(HostSpec(f"h{i:03d}", 8) for i in range(48)))
    jobs = load_trace(data / "philly-octnov-2017.csv", tree, cluster)
    lo, hi = first_day * DAY, (first_day + 14) * DAY
    window = [j for j in jobs if lo <= j.submit_s < hi]
    work = sum(j.gpus * j.duration_s for j in window)
    span = work / (factor * cluster.total_gpus)
    scale = span / (hi - lo)
    window = [dataclasses.replace(j, submit_s=(j.submit_s - lo) * scale) for j in window]
    return cluster, tree, window, span


def _inputs(scenario: str, seed: int, data: Path) -> tuple[Any, Any, Any, float | None]:
    """(cluster, tree, jobs, until_s) of a scenario."""
    if scenario.startswith("philly"):
        tree, _ = load_tree_with_usage(data / "philly-tree.json")
        if scenario == "philly":
            cluster = load_cluster(data / "philly-cluster.json")
            return (
                cluster,
                tree,
                load_trace(data / "philly-octnov-2017.csv", tree, cluster),
                61 * DAY,
            )
        return overload_replay(data, tree)
    with tempfile.TemporaryDirectory() as tmp:
        write_scenario(scenario, tmp, seed=seed)
        tree, _ = load_tree_with_usage(Path(tmp) / "tree.json")
        cluster = load_cluster(Path(tmp) / "cluster.json")
        jobs = load_trace(Path(tmp) / "trace.csv", tree, cluster)
    until = 30 * DAY if scenario in ("ai2-month", "ai2-saturated") else None
    return cluster, tree, jobs, until


# The reserve's overload rule: take-after bound (s, inf: never), room now, fewest GPUs
Rule = tuple[float, bool, bool]
# scenario, seed, policy, reserve, data, floor, the reserve's demand window (s, inf: default),
# the reserve's overload rule
Spec = tuple[str, int, str, bool, str, bool, float, Rule, bool]


def run_one(spec: Spec) -> dict[str, Any]:
    scenario, seed, policy, reserve, data, floor, window, rule, consolidate = spec
    take_after, room_now, fewest_gpus = rule
    cluster, tree, jobs, until = _inputs(scenario, seed, Path(data))
    config = SimConfig(
        policy=policy,
        until_s=until,
        short_reserve_auto=reserve,
        seed=seed,
        share_floor=floor,
        short_reserve_demand_window_s=window,
        short_reserve_take_after_s=take_after,
        short_reserve_room_now=room_now,
        short_reserve_fewest_gpus=fewest_gpus,
        consolidate=consolidate,
    )
    result = simulate(cluster, tree, jobs, config)
    return {
        "run": scenario,
        "seed": seed,
        "policy": policy,
        "reserve": "auto" if reserve else "off",
        "share_floor": "on" if floor else "off",
        "demand_window_s": window if window < float("inf") else None,
        "take_after_s": take_after if take_after < float("inf") else None,
        "room_now": room_now,
        "fewest_gpus": fewest_gpus,
        "consolidate": consolidate,
        **run_figures(result, tree),
    }


def run_figures(result: Any, tree: Any) -> dict[str, Any]:
    """The figures of one replay that the outcome rows read: debug waits (and debug jobs
    still waiting at the end), entitlement, occupancy against its bound, wall time."""
    report = build_report(result, tree)
    debug = report["wait_per_start_s"]["by_class"].get(DEBUG_CLASS, {})
    open_debug = sum(
        1
        for j in result.jobs
        if j.pending_since_s is not None
        and j.state == "pending"
        and j.gpus <= 8
        and 0 < j.min_runtime_s <= 15 * 60
    )
    ent = report["entitlement"]
    return {
        "debug_p90_s": debug.get("p90"),
        "debug_p99_s": debug.get("p99"),
        "debug_count": debug.get("count", 0),
        "debug_open": open_debug,
        "entitlement_overall": ent["overall"],
        "entitlement_worst": ent["worst"],
        "occupancy": report["occupancy"],
        "occupancy_bound": report["occupancy_bound"],
        "occupancy_of_bound": report["occupancy_of_bound"],
        "wall_s": round(result.wall_s, 1),
    }


def _specs(args: argparse.Namespace) -> list[Spec]:
    want, data = set(args.figures.split(",")), str(args.data)
    floor = args.share_floor == "on"
    rule = (args.take_after, args.room_now == "on", args.fewest_gpus == "on")
    specs: list[Spec] = []

    def add(
        scenario: str, seed: int, policy: str = "fairshare", reserve: bool = True, fl: bool = floor
    ) -> None:
        spec = (
            scenario,
            seed,
            policy,
            reserve,
            data,
            fl,
            args.demand_window,
            rule,
            args.consolidate == "on",
        )
        if spec not in specs:
            specs.append(spec)

    if "month" in want:
        for s in _seeds(args.month_seeds):
            add("ai2-month", s)
    if "saturated" in want:
        for s in _seeds(args.saturated_seeds):
            add("ai2-saturated", s)
    if "small" in want:
        for sc in ("host-failures", "large-gang", "zero-weight"):
            for s in _seeds(args.small_seeds):
                add(sc, s)
                add(sc, s, reserve=False)
                if floor:
                    add(sc, s, fl=False)
    if "philly" in want:
        add("philly", 0)
    if "overload" in want:
        add("philly-overload", 0)
    if "baselines" in want:
        for sc in args.baseline_scenarios.split(","):
            for p in ("fairshare", *BASELINES):
                add(sc, 0, p)
    return specs


def _figure(name: str, value: Any, target: str, met: bool) -> dict[str, Any]:
    return {"figure": name, "value": value, "target": target, "met": met}


def baseline_rows(pick: Any) -> list[dict[str, Any]]:
    """Per scenario (seed 0) and baseline: its entitlement overall and debug p90 beside
    fair share's, and the verdict: "ahead" when it delivers a higher entitlement overall
    or a lower debug p90 than fair share, else "behind or equal"; "not run" when either
    run is missing. `pick(scenario, policy)` gives the runs of a scenario and policy."""
    out: list[dict[str, Any]] = []
    for sc in (*GENERATED, "philly-overload"):
        fs = [r for r in pick(sc) if r["seed"] == 0]
        for p in BASELINES:
            b = [r for r in pick(sc, p) if r["seed"] == 0]
            if not fs and not b:
                continue
            row: dict[str, Any] = {"scenario": sc, "baseline": p}
            if not (fs and b):
                out.append({**row, "verdict": "not run"})
                continue
            ent = [b[0]["entitlement_overall"], fs[0]["entitlement_overall"]]
            p90 = [b[0]["debug_p90_s"] or 0.0, fs[0]["debug_p90_s"] or 0.0]
            ahead = [
                what
                for what, yes in (
                    ("entitlement", ent[0] > ent[1] + 1e-9),
                    ("debug p90", p90[0] < p90[1]),
                )
                if yes
            ]
            out.append(
                {
                    **row,
                    "entitlement_overall": [round(v, 4) for v in ent],
                    "debug_p90_s": [round(v, 1) for v in p90],
                    "debug_open": [b[0]["debug_open"], fs[0]["debug_open"]],
                    "verdict": "ahead" if ahead else "behind or equal",
                    **({"ahead_on": ahead} if ahead else {}),
                }
            )
    return out


def figures(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []

    floor = rows[0]["share_floor"] if rows else "on"  # the runs' setting (--share-floor)

    def pick(
        run: str, policy: str = "fairshare", reserve: str = "auto", fl: str = ""
    ) -> list[dict[str, Any]]:
        fl = fl or floor
        return [
            r
            for r in rows
            if r["run"] == run
            and r["policy"] == policy
            and r["reserve"] == reserve
            and r["share_floor"] == fl
        ]

    def drop(pairs: list[tuple[dict[str, Any], dict[str, Any]]]) -> float:
        """The largest shortfall of the first of each pair below the second, overall or
        worst (a ratio above 1 is delivery beyond what is owed: only shortfalls count)."""

        def owed(r: dict, key: str) -> float:
            return min(1.0, r[key])

        return max(
            owed(b, key) - owed(a, key)
            for a, b in pairs
            for key in ("entitlement_overall", "entitlement_worst")
        )

    def worst(rs: list[dict[str, Any]], key: str, hi: bool = True) -> float:
        vals = [r[key] or 0.0 for r in rs]
        return max(vals) if hi else min(vals)

    month = pick("ai2-month")
    if month:
        p90, p99 = worst(month, "debug_p90_s"), worst(month, "debug_p99_s")
        seeds = f"seeds {month[0]['seed']}-{month[-1]['seed']}"
        out.append(
            _figure(
                f"debug wait p90 / p99, ai2-month {seeds} (worst seed)",
                [p90, p99],
                "<= 60 s / <= 600 s",
                p90 <= 60 and p99 <= 600,
            )
        )
        ov, wo = (
            worst(month, "entitlement_overall", False),
            worst(month, "entitlement_worst", False),
        )
        out.append(
            _figure(
                f"entitlement overall / worst, ai2-month {seeds} (lowest seed)",
                [ov, wo],
                ">= 0.99 / >= 0.95",
                ov >= 0.99 and wo >= 0.95,
            )
        )
        ob = worst(month, "occupancy_of_bound", False)
        out.append(
            _figure(f"occupancy of bound, ai2-month {seeds} (lowest)", ob, ">= 0.99", ob >= 0.99)
        )
    sat = pick("ai2-saturated")
    if sat:
        p90 = worst(sat, "debug_p90_s")
        out.append(_figure("debug wait p90, ai2-saturated (worst seed)", p90, "<= 60 s", p90 <= 60))
    for sc in ("host-failures", "large-gang", "zero-weight"):
        on = {r["seed"]: r for r in pick(sc)}
        without = {
            "reserve": {r["seed"]: r for r in pick(sc, reserve="off")},
            "share floor": {r["seed"]: r for r in pick(sc, fl="off")} if floor == "on" else {},
        }
        for what, off in without.items():
            pairs = [(on[k], off[k]) for k in sorted(on) if k in off]
            if pairs:
                d = drop(pairs)
                name = f"entitlement on {sc}, {what} off minus on (overall or worst, worst seed)"
                out.append(_figure(name, d, "<= 0.01", d <= 0.01))
    ph = pick("philly")
    if ph:
        ob = ph[0]["occupancy_of_bound"]
        out.append(_figure("occupancy of bound, Philly Oct-Nov", ob, ">= 0.99", ob >= 0.99))
    ov = pick("philly-overload")
    if ov:
        p90 = ov[0]["debug_p90_s"] or 0.0
        out.append(
            _figure("debug wait p90, 48-host Philly at 10x overload", p90, "<= 300 s", p90 <= 300)
        )
    rows_vs = baseline_rows(pick)
    if rows_vs:
        met = all(r["verdict"] == "behind or equal" for r in rows_vs)
        out.append(
            _figure(
                "baselines (fifo, priority, static) behind fair share, seed 0 of each scenario: "
                "per scenario and baseline, entitlement overall and debug p90 [baseline, "
                "fair share] and the verdict",
                rows_vs,
                "none ahead",
                met,
            )
        )
    return out


def main() -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--figures", default=",".join(FIGURES))
    ap.add_argument("--month-seeds", default="0-9")
    ap.add_argument("--saturated-seeds", default="0-2")
    ap.add_argument("--small-seeds", default="0-2")
    ap.add_argument("--baseline-scenarios", default=",".join((*GENERATED, "philly-overload")))
    ap.add_argument("--workers", type=int, default=1)
    ap.add_argument("--share-floor", choices=("on", "off"), default="on")
    ap.add_argument(
        "--demand-window",
        type=float,
        default=float("inf"),
        help="the short-job reserve's demand window in seconds (an experiment; default inf)",
    )
    ap.add_argument(
        "--take-after",
        type=float,
        default=15.0,
        help="seconds a short job waits before it may take under-served work on the reserve "
        "beyond the budget (default 15; inf: never, the earlier rule)",
    )
    ap.add_argument("--room-now", choices=("on", "off"), default="on")
    ap.add_argument("--fewest-gpus", choices=("on", "off"), default="on")
    ap.add_argument("--consolidate", choices=("on", "off"), default="on")
    ap.add_argument("--data", type=Path, default=ROOT.parent / "shared" / "data")
    args = ap.parse_args()
    specs = _specs(args)
    rows: list[dict[str, Any]] = []
    with ProcessPoolExecutor(max(1, args.workers)) as pool:
        for row in pool.map(run_one, specs):
            print(json.dumps(row), flush=True)
            rows.append(row)
    for fig in figures(rows):
        print(json.dumps(fig), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
