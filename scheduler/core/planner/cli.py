"""Command line: `python -m scheduler.core.planner run|validate|report`.

Exit codes: 0 fine, 1 the plan violates constraints, 2 bad input (scenario or
plan file, arguments).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path

from scheduler.core.planner import run_mode
from scheduler.core.planner.model import ScenarioError, load_scenario
from scheduler.core.planner.plan import MODES
from scheduler.core.planner.report import build_report, format_report
from scheduler.core.planner.validate import validate_plan

__all__ = ["main"]


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m scheduler.core.planner",
        description="Plan a GPU x time-step window: FIFO baseline, fast heuristic, CP-SAT.",
    )
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="plan one scenario and write PLAN.json")
    run.add_argument("--scenario", required=True, type=Path)
    run.add_argument("--mode", required=True, choices=MODES)
    run.add_argument("--out", required=True, type=Path)
    run.add_argument("--time-limit", type=float, default=10.0, help="seconds for full mode")
    val = sub.add_parser("validate", help="check a PLAN.json against its scenario")
    val.add_argument("--scenario", required=True, type=Path)
    val.add_argument("--plan", required=True, type=Path)
    rep = sub.add_parser("report", help="fifo, fast and full on every shipped scenario")
    rep.add_argument("--time-limit", type=float, default=10.0, help="seconds for full mode")
    rep.add_argument("--json", action="store_true", help="print JSON instead of the table")
    return parser


def _fail(message: str) -> int:
    print(f"error: {message}", file=sys.stderr)
    return 2


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point; returns the exit code."""
    args = _parser().parse_args(argv)
    if args.command == "report":
        report = build_report(time_limit_s=args.time_limit)
        if args.json:
            rows = [
                {"scenario": r.scenario, "contended": r.contended, "metrics": r.metrics}
                for r in report["rows"]
            ]
            print(
                json.dumps({"rows": rows, "contended_means": report["contended_means"]}, indent=1)
            )
        else:
            print(format_report(report))
        return 0
    try:
        scenario = load_scenario(args.scenario)
    except ScenarioError as exc:
        return _fail(f"{args.scenario}: {exc}")
    if args.command == "run":
        if args.time_limit <= 0:
            return _fail("--time-limit must be > 0")
        plan = run_mode(scenario, args.mode, args.time_limit)
        args.out.write_text(json.dumps(plan.to_json(scenario)) + "\n", encoding="utf-8")
        print(json.dumps({"out": str(args.out), "mode": plan.mode, **plan.metrics}))
        return 0
    try:
        doc = json.loads(args.plan.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        return _fail(f"{args.plan}: cannot read a JSON plan: {exc}")
    violations = validate_plan(scenario, doc)
    for v in violations:
        print(v)
    if violations:
        print(f"{len(violations)} violation(s)", file=sys.stderr)
        return 1
    print(f"ok: {args.plan} is a legal plan for {scenario.name}")
    return 0
