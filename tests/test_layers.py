"""The layers of the Django side stay as docs/architecture.md draws them.

- One translation between the database and the engine: only
  `scheduler/selectors/translate.py` builds the engine's inputs (the tree, workloads,
  GPU holders, hosts, the policy) outside the pure core; a second implementation
  anywhere else fails here.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# The Django side: every package but the pure core (which builds its own inputs).
PACKAGES = ("accounts", "allot_cli", "budgets", "config", "dashboards", "ledger", "scheduler")
PURE = ("scheduler/core/",)
TRANSLATION = "scheduler/selectors/translate.py"
# The engine's input types: built from rows only by the translation module.
ENGINE_INPUTS = {"BudgetNode", "Host", "Policy", "RunningWorkload", "Workload"}
ENGINE_MODULES = ("scheduler.core.engine", "scheduler.core.engine.types")


def django_side_sources() -> list[tuple[str, ast.Module]]:
    """(path relative to the root, parsed module) of every module of the Django side,
    migrations aside."""
    out = []
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            rel = path.relative_to(ROOT).as_posix()
            if "/migrations/" in rel or rel.startswith(PURE):
                continue
            out.append((rel, ast.parse(path.read_text(), filename=rel)))
    return out


def engine_input_calls(tree: ast.Module) -> list[tuple[int, str]]:
    """(line, type) of every call that constructs an engine input type in `tree`,
    however it was imported (by name, under another name, or through the module)."""
    local: dict[str, str] = {}  # name in this module -> engine type
    modules: set[str] = set()  # names bound to an engine module
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module in ENGINE_MODULES:
            for alias in node.names:
                if alias.name in ENGINE_INPUTS:
                    local[alias.asname or alias.name] = alias.name
        elif isinstance(node, ast.ImportFrom) and node.module == "scheduler.core":
            modules.update(a.asname or a.name for a in node.names if a.name == "engine")
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name in ENGINE_MODULES and alias.asname:
                    modules.add(alias.asname)
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        if isinstance(func, ast.Name) and func.id in local:
            found.append((node.lineno, local[func.id]))
        elif isinstance(func, ast.Attribute) and func.attr in ENGINE_INPUTS:
            base = func.value
            if isinstance(base, ast.Name) and base.id in modules or ast.unparse(base) in ENGINE_MODULES:
                found.append((node.lineno, func.attr))
    return found


def test_only_the_translation_module_builds_engine_inputs():
    offenders = [
        f"{path}:{line} builds {kind}"
        for path, tree in django_side_sources()
        if path != TRANSLATION
        for line, kind in engine_input_calls(tree)
    ]
    assert not offenders, (
        "engine inputs are built from rows only in scheduler/selectors/translate.py; "
        "call its builders instead:\n" + "\n".join(offenders)
    )


def test_the_scan_sees_each_way_of_building_an_engine_input():
    """The guard itself: every import style is caught, and the translation module is
    where the builders really are."""
    sample = ast.parse(
        "from scheduler.core.engine import Workload\n"
        "from scheduler.core.engine.types import BudgetNode as EngineNode\n"
        "from scheduler.core import engine\n"
        "import scheduler.core.engine.types as types\n"
        "Workload('1', 'p', 1, 0.0)\n"
        "EngineNode(name='root')\n"
        "engine.RunningWorkload(None, (), 0.0, True)\n"
        "types.Host('h', 8)\n"
        "scheduler.core.engine.Policy()\n"
    )
    assert sorted(kind for _, kind in engine_input_calls(sample)) == [
        "BudgetNode",
        "Host",
        "Policy",
        "RunningWorkload",
        "Workload",
    ]
    translation = dict(django_side_sources())[TRANSLATION]
    assert {kind for _, kind in engine_input_calls(translation)} == ENGINE_INPUTS
