"""Mutation testing of the pure domain rules (`make mutants`; docs/testing.md, "How the
suite was checked"): does each rule's test fail when the rule is broken?

For each target module, mutmut breaks one operator, constant or call at a time and runs
that module's own tests (only those, never the whole suite); a mutant the tests still pass
on "survived". Each target runs in its own copy of the working tree under
build/mutants/<module>/ (mutmut writes its `mutants/` folder there, not in the
repository), with `ALLOT_NATIVE=0`: the engine is otherwise loaded compiled
(scheduler/core/native.py) and a mutated source would never run.

A survivor is either equivalent (no behaviour changes; listed in EQUIVALENT with the
reason) or a gap in the tests; the command exits 1 while any gap is left.

    .venv/bin/python tools/mutants.py [--minutes 15] [MODULE ...]
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
WORK = ROOT / "build" / "mutants"

# module -> its own tests (pure, no database: each mutant forks one pytest run of those
# of them that call the mutated function)
TARGETS: dict[str, tuple[str, ...]] = {
    "scheduler/core/engine/runs.py": (
        "tests/core/engine/test_runs.py",
        "tests/core/engine/test_short_reserve.py",
        "tests/core/engine/test_idle_reclaim.py",
        "tests/core/sim/test_eta_checkpoints.py",
        "tests/core/sim/test_running_at_start.py",
    ),
    "scheduler/core/engine/fairshare.py": (
        "tests/core/engine/test_fairshare.py",
        "tests/core/engine/test_deciding_level.py",
        "tests/core/engine/test_budget_tree.py",
    ),
    "budgets/rules.py": (
        "tests/core/engine/test_budget_tree.py",
        "tests/budgets/test_shares.py",
        "tests/budgets/test_rules.py",
    ),
    "ledger/accounting.py": (
        "tests/core/sim/test_accounting.py",
        "tests/core/sim/test_figures.py",
        "tests/ledger/test_accounting_rules.py",
    ),
    "allot_common/figures.py": (
        "tests/dashboards/test_fixed_text.py",
        "tests/core/engine/test_limit_text.py",
        "tests/core/engine/test_deciding_level.py",
        "tests/cli/test_render.py",
        "tests/test_figures_text.py",
    ),
}

# Survivors that change no behaviour, by mutmut's name for them, with the reason. A name
# holds while its function's source is unchanged; a changed function is mutated anew.
_ZIP = "zip(..., strict=True) of lists of one length by construction: strict never fires"
_WIDER = "the pair's bounds only widen: more calls take the exact comparison, same answers"
_REFUSED_WHOLE = (
    "a node left out (or kept) only with a problem recorded: the document is refused whole"
)
_ONE_LEAF = "the paths part at their end only for one leaf, whose two paths have one length"
_LEAF_EXIT = "a path ends at its leaf: the is_leaf test leaves the loop before its condition"
EQUIVALENT: dict[str, str] = {
    # scheduler/core/engine/runs.py
    "scheduler.core.engine.runs.x_last_checkpoint_s__mutmut_4": "now < start: at now == start k is 0, None either way",
    "scheduler.core.engine.runs.x_saved_work_s__mutmut_4": "ran < 0: at ran == 0 the formula gives 0 too",
    # allot_common/figures.py
    "allot_common.figures.x_fixed_text__mutmut_29": "format(d) without 'f': quantized to <= 6 places, str writes the same digits",
    "allot_common.figures.x_fixed_text__mutmut_34": "'F' differs from 'f' only for inf and nan, returned before",
    # budgets/rules.py
    "budgets.rules.x_name_slug__mutmut_14": "codec names are case-insensitive ('ASCII')",
    "budgets.rules.x_name_slug__mutmut_18": "codec names are case-insensitive ('ASCII')",
    "budgets.rules.x_name_slug__mutmut_38": "strip('XX-_XX'): the value is lower-cased, no 'X' is left",
    "budgets.rules.x_shares_by_id__mutmut_30": _ZIP,
    "budgets.rules.x_shares_by_id__mutmut_33": _ZIP,
    "budgets.rules.x_shares_by_id__mutmut_34": _ZIP,
    "budgets.rules.x__people__mutmut_3": "a missing list read as None: None gives () as [] does",
    "budgets.rules.x__people__mutmut_5": "a missing list read as None: None gives () as [] does",
    # scheduler/core/engine/fairshare.py
    "scheduler.core.engine.fairshare.x__parting__mutmut_5": "two leaves' paths part before either ends (a leaf is nobody's ancestor), and one leaf's two paths stop at their common length",
    "scheduler.core.engine.fairshare.x__parting__mutmut_6": "two leaves' paths part before either ends (a leaf is nobody's ancestor), and one leaf's two paths stop at their common length",
    "scheduler.core.engine.fairshare.xǁCompiledTreeǁ__init____mutmut_16": "the root's own share and path are never read: level fair-shares are compared from level 1 down",
    "scheduler.core.engine.fairshare.xǁCompiledTreeǁ__init____mutmut_17": "the root's own share and path are never read: level fair-shares are compared from level 1 down",
    "scheduler.core.engine.fairshare.xǁCompiledTreeǁ__init____mutmut_31": "the root's own share and path are never read: level fair-shares are compared from level 1 down",
    "scheduler.core.engine.fairshare.xǁCompiledTreeǁ__init____mutmut_29": "the root's parent is only tested against 0 (a childless root is no leaf): -2 as -1",
    "scheduler.core.engine.fairshare.xǁCompiledTreeǁ__init____mutmut_42": _ZIP,
    "scheduler.core.engine.fairshare.xǁCompiledTreeǁ__init____mutmut_45": _ZIP,
    "scheduler.core.engine.fairshare.xǁCompiledTreeǁ__init____mutmut_46": _ZIP,
    "scheduler.core.engine.fairshare.xǁCompiledTreeǁ_add__mutmut_22": _ZIP,
    "scheduler.core.engine.fairshare.xǁCompiledTreeǁ__init____mutmut_62": "the last node is inner only in a root-only tree, whose usage is 0 with or without the root summed",
    "scheduler.core.engine.fairshare.xǁCompiledTreeǁ__init____mutmut_64": "the last node is inner only in a root-only tree, whose usage is 0 with or without the root summed twice",
    "scheduler.core.engine.fairshare.xǁFairShareǁdeciding_nodes__mutmut_15": _LEAF_EXIT,
    "scheduler.core.engine.fairshare.xǁFairShareǁdeciding_nodes__mutmut_16": _LEAF_EXIT,
    "scheduler.core.engine.fairshare.xǁFairShareǁdeciding_nodes__mutmut_17": _LEAF_EXIT,
    "scheduler.core.engine.fairshare.xǁFairShareǁdeciding_nodes__mutmut_20": _LEAF_EXIT,
    "scheduler.core.engine.fairshare.xǁFairShareǁ_beats_after_exact__mutmut_13": _LEAF_EXIT,
    "scheduler.core.engine.fairshare.xǁFairShareǁ_beats_after_exact__mutmut_14": _LEAF_EXIT,
    "scheduler.core.engine.fairshare.xǁFairShareǁ_beats_after_exact__mutmut_15": _LEAF_EXIT,
    "scheduler.core.engine.fairshare.xǁFairShareǁ_beats_after_exact__mutmut_42": _LEAF_EXIT,
    "scheduler.core.engine.fairshare.xǁFairShareǁ_beats_after_exact__mutmut_41": "> and >= where the two differ",
    "scheduler.core.engine.fairshare.xǁFairShareǁbeaten_all__mutmut_43": "> and >= where the two differ",
    "scheduler.core.engine.fairshare.xǁFairShareǁ_delta_bounds__mutmut_11": "two leaves' paths part before either ends, unless it is one leaf",
    "scheduler.core.engine.fairshare.xǁFairShareǁ_delta_bounds__mutmut_15": "(-inf, inf) sends the same project to the exact comparison, also False",
    "scheduler.core.engine.fairshare.xǁFairShareǁ_delta_bounds__mutmut_21": _WIDER,
    "scheduler.core.engine.fairshare.xǁFairShareǁ_delta_bounds__mutmut_22": _WIDER,
    "scheduler.core.engine.fairshare.xǁFairShareǁ_delta_bounds__mutmut_24": _WIDER,
    "scheduler.core.engine.fairshare.xǁFairShareǁ_delta_bounds__mutmut_26": _WIDER,
    "scheduler.core.engine.fairshare.xǁFairShareǁ_delta_bounds__mutmut_27": _WIDER,
    "scheduler.core.engine.fairshare.xǁFairShareǁ_delta_bounds__mutmut_28": _WIDER,
    "scheduler.core.engine.fairshare.xǁFairShareǁ_delta_bounds__mutmut_37": _WIDER,
    "scheduler.core.engine.fairshare.xǁFairShareǁ_delta_bounds__mutmut_38": _WIDER,
    "scheduler.core.engine.fairshare.xǁFairShareǁ_delta_bounds__mutmut_41": _WIDER,
    "scheduler.core.engine.fairshare.xǁFairShareǁ_delta_bounds__mutmut_42": _WIDER,
    "scheduler.core.engine.fairshare.xǁFairShareǁbeats_after__mutmut_13": _WIDER,
    "scheduler.core.engine.fairshare.xǁFairShareǁbeats_after__mutmut_14": _WIDER,
    "scheduler.core.engine.fairshare.xǁFairShareǁbeats_after__mutmut_1": "the pair's bounds computed again on every call (no cache), same answers",
    "scheduler.core.engine.fairshare.xǁFairShareǁbeats_after__mutmut_2": "the pair's bounds computed again on every call (no cache), same answers",
    "scheduler.core.engine.fairshare.xǁFairShareǁbeats_after__mutmut_5": "the pair's bounds computed again on every call (no cache), same answers",
    "scheduler.core.engine.fairshare.xǁFairShareǁbeats_after__mutmut_6": "the pair's bounds computed again on every call (no cache), same answers",
    "scheduler.core.engine.fairshare.xǁFairShareǁbeats_after__mutmut_15": "at delta == lo, 1e-9 below where the pair parts, the answer is True either way",
    "scheduler.core.engine.fairshare.xǁFairShareǁbeats_after__mutmut_18": "at delta == hi, 1e-9 above where the pair parts, the answer is False either way",
    "scheduler.core.engine.fairshare.xǁFairShareǁbeaten_all__mutmut_10": "k = 0: the root's node before it is p's leaf, which has no children",
    "scheduler.core.engine.fairshare.xǁFairShareǁbeaten_all__mutmut_46": "kb + 1 >= npa only where ab is p's leaf, tested first",
    "scheduler.core.engine.fairshare.xǁFairShareǁbeaten_all__mutmut_48": "kb + 1 >= npa only where ab is p's leaf, tested first",
    "scheduler.core.engine.fairshare.xǁFairShareǁbeaten_all__mutmut_68": "u + 0.0 == u - 0.0",
    "scheduler.core.engine.fairshare.xǁFairShareǁposition_after__mutmut_8": "only the galloping probes change: the binary search finds the same first index",
    "scheduler.core.engine.fairshare.xǁFairShareǁposition_after__mutmut_20": "only the galloping probes change: the binary search finds the same first index",
    "scheduler.core.engine.fairshare.xǁFairShareǁposition_after__mutmut_24": "only the galloping probes change: the binary search finds the same first index",
    "scheduler.core.engine.fairshare.xǁFairShareǁposition_after__mutmut_26": "only the galloping probes change: the binary search finds the same first index",
    "budgets.rules.x__parse_children__mutmut_10": "None is falsy as False is",
    "budgets.rules.x__parse_children__mutmut_27": _REFUSED_WHOLE,
    "budgets.rules.x__parse_children__mutmut_28": _REFUSED_WHOLE,
    "budgets.rules.x__parse_children__mutmut_39": _REFUSED_WHOLE,
    "budgets.rules.x__parse_node__mutmut_52": _REFUSED_WHOLE,
    "budgets.rules.x__parse_node__mutmut_53": _REFUSED_WHOLE,
    "budgets.rules.x__parse_node__mutmut_68": _REFUSED_WHOLE,
    "budgets.rules.x__parse_node__mutmut_69": _REFUSED_WHOLE,
    "budgets.rules.x__parse_node__mutmut_162": _REFUSED_WHOLE,
    "budgets.rules.x__parse_node__mutmut_72": "a missing children list read as None is made [] just below",
    "budgets.rules.x__parse_node__mutmut_74": "a missing children list read as None is made [] just below",
    "budgets.rules.x_parse_tree_document__mutmut_16": "the root's parent is only tested for truth: None as ''",
    "budgets.rules.x_parse_tree_document__mutmut_17": "the index names a child without a name only, never the root",
    "budgets.rules.x_parse_tree_document__mutmut_24": "the index names a child without a name only, never the root",
    "scheduler.core.engine.fairshare.xǁFairShareǁ_delta_bounds__mutmut_12": _ONE_LEAF,
    "scheduler.core.engine.fairshare.xǁFairShareǁ_delta_bounds__mutmut_13": _ONE_LEAF,
    # ledger/accounting.py
    "ledger.accounting.x_bucket_spans__mutmut_8": "s <= start: assigns start_s to what equals it",
    "ledger.accounting.x_bucket_spans__mutmut_10": "e >= end: assigns end_s to what equals it",
    "ledger.accounting.x_bucket_spans__mutmut_27": "one more difference slot, never read",
    "ledger.accounting.x_bucket_spans__mutmut_30": "int(x / H) == int(x // H) for x >= 0 (but within an ulp of an hour)",
    "ledger.accounting.x_bucket_spans__mutmut_34": "int(x / H) == int(x // H) for x >= 0 (but within an ulp of an hour)",
    "ledger.accounting.x_bucket_spans__mutmut_60": "he == hs + 1: the two difference updates cancel",
    "ledger.accounting.x_bucket_spans__mutmut_61": "he > hs there (hs == he returned before)",
    "ledger.accounting.x_bucket_spans__mutmut_78": "every element of res is written before it is read",
    "ledger.accounting.x_occupancy_hour__mutmut_27": "free == 0: takes 0 from draining and down",
    "ledger.accounting.x_occupancy_hour__mutmut_48": "after the down step free is <= 0 either way, then clipped to 0",
    "ledger.accounting.x_entitlement_hourly__mutmut_7": "a share of 0 gives min(0, demand) = 0 as well",
    "ledger.accounting.x_entitlement_hourly__mutmut_21": _ZIP,
    "ledger.accounting.x_entitlement_hourly__mutmut_24": _ZIP,
    "ledger.accounting.x_entitlement_hourly__mutmut_25": _ZIP,
    "ledger.accounting.x_entitlement_summary__mutmut_60": "without entitlement the ratio is set to None below",
    "ledger.accounting.x_entitlement_summary__mutmut_70": _ZIP,
    "ledger.accounting.x_entitlement_summary__mutmut_73": _ZIP,
    "ledger.accounting.x_entitlement_summary__mutmut_77": _ZIP,
    "ledger.accounting.x_entitlement_summary__mutmut_89": "sum of min(d, e) <= sum of e: the hourly ratio never exceeds 1",
    "ledger.accounting.x_entitlement_summary__mutmut_145": "> and >= differ only at exactly threshold - 1e-12",
}


def _copy_tree(dest: Path) -> None:
    """The working tree's tracked and not-ignored files (uncommitted edits included)."""
    if dest.exists():
        shutil.rmtree(dest)
    listed = subprocess.run(
        ["git", "ls-files", "-co", "--exclude-standard", "-z"],
        cwd=ROOT,
        capture_output=True,
        check=True,
    ).stdout.split(b"\0")
    for raw in listed:
        if not raw:
            continue
        rel = raw.decode()
        src = ROOT / rel
        if not src.is_file():
            continue
        target = dest / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(src, target)


def _configure(dest: Path, module: str, tests: tuple[str, ...]) -> None:
    """mutmut's settings for one module, appended to the copy's pyproject.toml."""
    entries = sorted(p.name for p in dest.iterdir())
    packages = [e for e in entries if (dest / e / "__init__.py").exists() and e != "tests"]
    others = [e for e in entries if e not in packages and e not in ("tests", "pyproject.toml")]
    existing = [t for t in tests if (dest / t).exists()]
    block = "\n".join(
        [
            "",
            "[tool.mutmut]",
            f"source_paths = {json.dumps(packages)}",
            f"only_mutate = {json.dumps([module])}",
            f"also_copy = {json.dumps(others)}",
            f"pytest_add_cli_args_test_selection = {json.dumps(existing)}",
            'pytest_add_cli_args = ["-p", "no:cacheprovider", "-n", "0"]',
            "use_git_change_detection = false",
            "",
        ]
    )
    with (dest / "pyproject.toml").open("a") as f:
        f.write(block)


def _results(dest: Path) -> dict[str, int | None]:
    """mutmut's exit code per mutant (None: not run)."""
    codes: dict[str, int | None] = {}
    for meta in (dest / "mutants").rglob("*.meta"):
        codes.update(json.loads(meta.read_text())["exit_code_by_key"])
    return codes


_SHOW = """import sys
from mutmut.__main__ import find_mutant, get_diff_for_mutant
for name in sys.argv[1:]:
    print("\\0" + name)
    print(get_diff_for_mutant(name, path=find_mutant(name).path))
"""


def _diffs(dest: Path, env: dict[str, str], names: list[str]) -> list[tuple[str, str]]:
    """Each mutant's diff, as `mutmut show` writes it (one process for all)."""
    if not names:
        return []
    out = subprocess.run(
        [sys.executable, "-c", _SHOW, *names], cwd=dest, env=env, capture_output=True, text=True
    ).stdout
    parts = [p.split("\n", 1) for p in out.split("\0")[1:]]
    return [(p[0], p[1] if len(p) > 1 else "") for p in parts]


def run_module(module: str, minutes: float) -> dict[str, object]:
    """Mutate `module`, run its tests per mutant for at most `minutes`, and count."""
    slug = module.removesuffix(".py").replace("/", ".")
    dest = WORK / slug
    _copy_tree(dest)
    _configure(dest, module, TARGETS[module])
    env = dict(os.environ, ALLOT_NATIVE="0", PYTHONDONTWRITEBYTECODE="1")
    cmd = [sys.executable, "-m", "mutmut", "run", "--max-children", "1"]
    # its own process group: at the cap, the forked worker goes with it
    with (dest / "mutmut.log").open("w") as log:
        proc = subprocess.Popen(
            cmd, cwd=dest, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
        )
        try:
            proc.wait(timeout=minutes * 60)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            print(f"{module}: stopped after {minutes} min; counted what ran", file=sys.stderr)
    from mutmut.stats import status_by_exit_code  # what each of mutmut's exit codes means

    codes = _results(dest)
    status = {name: status_by_exit_code[code] for name, code in codes.items()}
    # a mutant no test calls survives too
    survivors = sorted(k for k, s in status.items() if s in ("survived", "no tests"))
    gaps = [s for s in survivors if s not in EQUIVALENT]
    diffs = [
        f"## {name} ({EQUIVALENT.get(name, 'GAP')})\n{diff}"
        for name, diff in _diffs(dest, env, survivors)
    ]
    (dest / "survivors.txt").write_text("\n".join(diffs))
    return {
        "module": module,
        "mutants": len(codes),
        "killed": sum(1 for s in status.values() if s in ("killed", "caught by type check")),
        "survived": len(survivors),
        "equivalent": len(survivors) - len(gaps),
        "timeouts": sum(1 for s in status.values() if s == "timeout"),
        "not run": sum(1 for s in status.values() if s == "not checked"),
        "other": sorted(
            f"{k}: {s}" for k, s in status.items() if s in ("suspicious", "segfault", "skipped")
        ),
        "gaps": gaps,
        "survivors": str(dest.relative_to(ROOT) / "survivors.txt"),
    }


def main(argv: list[str] | None = None) -> int:
    """Run the targets named (all by default) and print a row per module."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("modules", nargs="*", help=f"default: all of {', '.join(TARGETS)}")
    parser.add_argument("--minutes", type=float, default=15.0, help="cap per module (default 15)")
    args = parser.parse_args(argv)
    unknown = [m for m in args.modules if m not in TARGETS]
    if unknown:
        parser.error(f"not a target: {', '.join(unknown)}")
    today = datetime.date.today().isoformat()
    print("| module | mutants | killed | survived (equivalent) | timeouts | date |")
    print("|---|---|---|---|---|---|")
    gaps = 0
    for module in args.modules or list(TARGETS):
        row = run_module(module, args.minutes)
        not_run = f", {row['not run']} not run" if row["not run"] else ""
        print(
            f"| `{module}` | {row['mutants']} | {row['killed']} | {row['survived']} ({row['equivalent']}) "
            f"| {row['timeouts']}{not_run} | {today} |",
            flush=True,
        )
        for other in row["other"]:  # type: ignore[attr-defined]
            print(f"  {other}", flush=True)
        if row["gaps"]:
            print(f"  {len(row['gaps'])} not equivalent: {row['survivors']}", flush=True)
        gaps += len(row["gaps"])  # type: ignore[arg-type]
    return 1 if gaps else 0


if __name__ == "__main__":
    sys.exit(main())
