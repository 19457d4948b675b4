"""Command line of the simulator: ``python -m scheduler.core.sim {run,fairshare,generate}``.

``run``       replays a trace on a cluster under one policy (or ``all`` four) and writes
              REPORT.json (plus optional JOBS.csv and INTERVALS.csv).
``fairshare`` prints the Slurm-style fair-share figures of every tree node as JSON.
``generate``  writes a seeded scenario (cluster.json, tree.json, trace.csv).

Exit codes: 0 success, 2 invalid input or arguments (the message names the file and the
line or node/field), 1 an unexpected failure.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from scheduler.core.engine.fairshare import fair_tree
from scheduler.core.sim import replay
from scheduler.core.sim.generate import SCENARIO_NOTES, SCENARIOS, write_scenario
from scheduler.core.sim.html import chart_data, write_html
from scheduler.core.sim.io import InputError, load_cluster, load_trace, load_tree_with_usage
from scheduler.core.sim.model import POLICIES, SimConfig
from scheduler.core.sim.report import (
    build_report,
    comparison_table,
    write_intervals_csv,
    write_jobs_csv,
)

__all__ = ["build_parser", "main"]

DAY_S = 86400.0
HOUR_S = 3600.0


def _positive(kind: type = float, allow_zero: bool = False) -> Callable[[str], Any]:
    def parse(raw: str) -> Any:
        try:
            value = kind(raw)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not a number: {raw!r}") from None
        if not math.isfinite(float(value)) or value < 0 or (value == 0 and not allow_zero):
            bound = ">= 0" if allow_zero else "> 0"
            raise argparse.ArgumentTypeError(f"must be {bound}, got {raw!r}")
        return value

    return parse


def _seconds_or_inf(raw: str) -> float:
    """A duration in seconds, >= 0, or inf (never)."""
    try:
        value = float(raw)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {raw!r}") from None
    if math.isnan(value) or value < 0:
        raise argparse.ArgumentTypeError(f"must be >= 0 or inf, got {raw!r}")
    return value


def _add_run_files(r: argparse.ArgumentParser) -> None:
    """``run``'s inputs, policy and outputs."""
    r.add_argument("--cluster", required=True, type=Path, help="CLUSTER.json")
    r.add_argument("--tree", required=True, type=Path, help="TREE.json (budget tree)")
    r.add_argument("--trace", required=True, type=Path, help="TRACE.csv")
    r.add_argument("--policy", default="fairshare", choices=[*POLICIES, "all"])
    r.add_argument("--out", required=True, type=Path, help="REPORT.json to write")
    r.add_argument(
        "--jobs-out",
        type=Path,
        help="JOBS.csv (one row per job); with --policy all one file per policy, "
        "named JOBS.<policy>.csv",
    )
    r.add_argument(
        "--intervals-out",
        type=Path,
        help="INTERVALS.csv (one row per run interval); per policy as for --jobs-out",
    )


def _add_run_model(r: argparse.ArgumentParser) -> None:
    """``run``'s replay model: usage window, min runtime, checkpoints, restarts, cycles."""
    r.add_argument(
        "--lookback-days", type=_positive(), default=7.0, help="usage window (default 7)"
    )
    r.add_argument("--half-life-days", type=_positive(), default=None, help="decayed usage instead")
    r.add_argument(
        "--max-min-runtime-h", type=_positive(), default=8.0, help="cap on min runtime (8)"
    )
    r.add_argument(
        "--checkpoint-min", type=_positive(), default=30.0, help="checkpoint interval (30)"
    )
    r.add_argument(
        "--restart-overhead-s",
        type=_positive(allow_zero=True),
        default=120.0,
        help="cost of restarting a preempted job (120)",
    )
    r.add_argument("--cycle-s", type=_positive(), default=60.0, help="periodic cycle (60)")


def _add_run_fairshare(r: argparse.ArgumentParser) -> None:
    """``run``'s fair-share options: the short-job reserve and idle reclaim."""
    r.add_argument(
        "--short-reserve-hosts",
        type=_positive(int, allow_zero=True),
        default=0,
        help="fairshare: hold this many of the largest hosts for jobs protected for at most "
        "--short-job-max-min (and for unallocated backfill) (0: none)",
    )
    r.add_argument(
        "--short-reserve-auto",
        choices=("on", "off"),
        default="on",
        help="fairshare: size the short-job reserve from the short jobs running and waiting "
        "(on); off: only --short-reserve-hosts (off with 0 hosts: no reserve)",
    )
    r.add_argument(
        "--share-floor",
        choices=("on", "off"),
        default="on",
        help="fairshare: a project below its entitled share keeps its oldest jobs up to "
        "that share from the fair-share preemption of projects served clearly better (on)",
    )
    r.add_argument(
        "--idle-reclaim",
        choices=("on", "off"),
        default="off",
        help="fairshare: preempt first the jobs idle (trace column idle_after_s) for "
        "--idle-reclaim-after-min past their min runtime (off)",
    )
    r.add_argument(
        "--idle-reclaim-after-min",
        type=_positive(),
        default=30.0,
        help="how long a job's GPUs stay idle before idle reclaim may take them, minutes (30)",
    )
    r.add_argument(
        "--short-job-max-min",
        type=_positive(),
        default=15.0,
        help="longest protection of a job the short-job reserve admits, minutes (15)",
    )
    r.add_argument(
        "--reservation-admit-min",
        type=_positive(allow_zero=True),
        default=60.0,
        help="fairshare: hosts held for a job that waits for work it may not preempt admit "
        "allocated jobs it may preempt protected for at most this, minutes (60; 0: none, "
        "only unallocated backfill, the rule before)",
    )


def _add_run_reserve_rule(r: argparse.ArgumentParser) -> None:
    """``run``'s options for how the short-job reserve serves short jobs under overload;
    ``--short-reserve-take-after-s inf --short-reserve-room-now off
    --short-reserve-fewest-gpus off`` is the earlier rule (the budget alone)."""
    r.add_argument(
        "--short-reserve-take-after-s",
        type=_seconds_or_inf,
        default=15.0,
        help="fairshare: a short job that waited this long may take under-served projects' "
        "work past its protection on the reserve beyond the budget (15; inf: never)",
    )
    r.add_argument(
        "--short-reserve-room-now",
        choices=("on", "off"),
        default="on",
        help="fairshare: the reserve counts as room only GPUs a short job can take now (on)",
    )
    r.add_argument(
        "--short-reserve-fewest-gpus",
        choices=("on", "off"),
        default="on",
        help="fairshare: on the reserve, take the block whose under-served victims hold the "
        "fewest GPUs (on); off: the fewest such victims",
    )


def _add_run_span(r: argparse.ArgumentParser) -> None:
    """``run``'s span and reporting: end, warm-up, HTML page, seed, progress bar."""
    r.add_argument("--until-days", type=_positive(), default=None, help="stop the replay then")
    r.add_argument(
        "--warmup-days",
        type=_positive(allow_zero=True),
        default=0.0,
        help="also report every figure without the first D days (an empty cluster fills "
        "up first); the report keeps the full-run figures and adds 'after_warmup'",
    )
    r.add_argument(
        "--html",
        type=Path,
        help="REPORT.html: one self-contained page with the charts of every policy side by "
        "side (occupancy over time, delivery per project, waits by kind)",
    )
    r.add_argument("--seed", type=int, default=0)
    r.add_argument("--quiet", action="store_true", help="no progress bar on stderr")


def _add_run(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """The ``run`` subcommand."""
    r = sub.add_parser("run", help="replay a trace and write REPORT.json")
    _add_run_files(r)
    _add_run_model(r)
    _add_run_fairshare(r)
    _add_run_reserve_rule(r)
    _add_run_span(r)


def _add_fairshare(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """The ``fairshare`` subcommand."""
    f = sub.add_parser("fairshare", help="print the fair-share figures of every tree node")
    f.add_argument("--tree", required=True, type=Path, help="TREE.json with leaf 'usage'")


def _add_generate(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """The ``generate`` subcommand."""
    g = sub.add_parser("generate", help="write a seeded scenario")
    g.add_argument("--scenario", required=True, choices=sorted(SCENARIOS))
    g.add_argument("--out-dir", required=True, type=Path)
    g.add_argument("--seed", type=int, default=0)


def build_parser() -> argparse.ArgumentParser:
    """The argparse parser of ``python -m scheduler.core.sim``."""
    p = argparse.ArgumentParser(
        prog="python -m scheduler.core.sim",
        description="Allot's discrete-event simulator: replay a trace with the real engine.",
    )
    sub = p.add_subparsers(dest="command", required=True)
    _add_run(sub)
    _add_fairshare(sub)
    _add_generate(sub)
    return p


class _Progress:
    """Adapts the replay's ``progress`` callback to a tqdm bar on stderr.

    Accepts ``progress(done, total)`` (any units) or ``progress(fraction)``; the bar shows
    percent of simulated time.
    """

    def __init__(self, label: str, enabled: bool) -> None:
        self.bar = None
        if enabled:
            from tqdm import tqdm

            self.bar = tqdm(
                total=100,
                desc=label,
                unit="%",
                file=sys.stderr,
                leave=False,
                bar_format="{desc}: {percentage:3.0f}%|{bar}| [{elapsed}<{remaining}]",
                mininterval=0.5,
            )
        self.pos = 0

    def __call__(self, *args: float) -> None:
        if self.bar is None or not args:
            return
        frac = float(args[0])
        if len(args) >= 2 and args[1]:
            frac /= float(args[1])
        step = int(100 * min(1.0, max(0.0, frac)))
        if step > self.pos:
            self.bar.update(step - self.pos)
            self.pos = step

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


def _per_policy(path: Path, policy: str, many: bool) -> Path:
    return path.with_name(f"{path.stem}.{policy}{path.suffix}") if many else path


def _cmd_run(args: argparse.Namespace) -> int:
    tree, _usage = load_tree_with_usage(args.tree)
    cluster = load_cluster(args.cluster)
    jobs = load_trace(args.trace, tree, cluster)

    policies = list(POLICIES) if args.policy == "all" else [args.policy]
    many = len(policies) > 1
    reports: dict[str, dict[str, Any]] = {}
    charts: dict[str, dict[str, Any]] = {}
    for policy in policies:
        config = SimConfig(
            policy=policy,
            lookback_s=args.lookback_days * DAY_S,
            half_life_s=args.half_life_days * DAY_S if args.half_life_days else None,
            max_min_runtime_s=args.max_min_runtime_h * HOUR_S,
            checkpoint_interval_s=args.checkpoint_min * 60.0,
            restart_overhead_s=args.restart_overhead_s,
            cycle_period_s=args.cycle_s,
            short_reserve_hosts=args.short_reserve_hosts,
            short_job_max_s=args.short_job_max_min * 60.0,
            short_reserve_auto=args.short_reserve_auto == "on",
            short_reserve_take_after_s=args.short_reserve_take_after_s,
            short_reserve_room_now=args.short_reserve_room_now == "on",
            short_reserve_fewest_gpus=args.short_reserve_fewest_gpus == "on",
            idle_reclaim=args.idle_reclaim == "on",
            share_floor=args.share_floor == "on",
            reservation_admit_s=args.reservation_admit_min * 60.0,
            idle_reclaim_after_s=args.idle_reclaim_after_min * 60.0,
            until_s=args.until_days * DAY_S if args.until_days else None,
            seed=args.seed,
        )
        bar = _Progress(policy, enabled=not args.quiet)
        t0 = time.perf_counter()
        try:
            result = replay.simulate(cluster, tree, jobs, config, progress=bar)
        finally:
            bar.close()
        if not result.wall_s:
            result.wall_s = time.perf_counter() - t0
        reports[policy] = build_report(result, tree, warmup_s=args.warmup_days * DAY_S)
        if args.html:
            charts[policy] = chart_data(result, reports[policy])
        if args.jobs_out:
            write_jobs_csv(result, _per_policy(args.jobs_out, policy, many))
        if args.intervals_out:
            write_intervals_csv(result, _per_policy(args.intervals_out, policy, many))

    doc = reports if many else reports[policies[0]]
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(doc, indent=2) + "\n", encoding="utf-8")
    if args.html:
        write_html(args.html, charts, title=f"{cluster.name}: {', '.join(policies)}")
    print(comparison_table(reports))
    return 0


def _jsonable(value: Any) -> Any:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _jsonable(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    if isinstance(value, float) and not math.isfinite(value):
        return None if math.isnan(value) else ("inf" if value > 0 else "-inf")
    return value


def _cmd_fairshare(args: argparse.Namespace) -> int:
    tree, usage = load_tree_with_usage(args.tree)
    print(json.dumps(_jsonable(fair_tree(tree, usage)), indent=2))
    return 0


def _cmd_generate(args: argparse.Namespace) -> int:
    paths = write_scenario(args.scenario, args.out_dir, seed=args.seed)
    for p in paths:
        print(p)
    notes = SCENARIO_NOTES.get(args.scenario)
    if notes:
        print(f"note: {notes}", file=sys.stderr)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point; returns the process exit code."""
    args = build_parser().parse_args(argv)
    try:
        if args.command == "run":
            return _cmd_run(args)
        if args.command == "fairshare":
            return _cmd_fairshare(args)
        return _cmd_generate(args)
    except InputError as exc:
        print(f"error: invalid input\n{exc}", file=sys.stderr)
        return 2
