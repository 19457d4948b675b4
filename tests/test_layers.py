"""The layers of the Django side stay as docs/architecture.md draws them.

- One translation between the database and the engine: only
  `scheduler/selectors/translate.py` builds the engine's inputs (the tree, workloads,
  GPU holders, hosts, the policy) outside the pure core; a second implementation
  anywhere else fails here.
- No function-level imports between project modules: an import inside a function hides
  a dependency (often a cycle) from the reader and from import-linter. The one place
  allowed is `AppConfig.ready()`, Django's hook for registering checks, signals and
  collectors once the models are loaded (not a cycle breaker).
- Sizes (issue 23): no module of scheduler/, budgets/, ledger/ or dashboards/ over
  600 lines (migrations aside), no function over 80 lines in the product, the tests
  or tools/ (bench/ aside). The current offenders are listed below; the list only
  shrinks.
- No module-level mutable state (issue 23) but the memos listed with their reason, and
  no import circle between project modules.
- Selectors write nothing (no ORM, cache or SQL write, no task sent) but the read-through
  memo listed with its reason.
- The layer contracts themselves are import-linter's (`pyproject.toml`), run by
  `tests/test_project.py`.
"""

from __future__ import annotations

import ast
import functools
import re
import tomllib
from pathlib import Path

import grimp

from tests.support.sources import python_files, python_source

ROOT = Path(__file__).resolve().parent.parent
# The Django side: every package but the pure core (which builds its own inputs).
PACKAGES = ("accounts", "allot_cli", "budgets", "config", "dashboards", "ledger", "scheduler")
# Every package of the product, the pure core included (imports between its modules).
PROJECT = (*PACKAGES, "allot_common", "ops")
PURE = ("scheduler/core/",)
TRANSLATION = "scheduler/selectors/translate.py"
# The engine's input types: built from rows only by the translation module.
ENGINE_INPUTS = {"BudgetNode", "Host", "Policy", "RunningWorkload", "Workload"}
ENGINE_MODULES = ("scheduler.core.engine", "scheduler.core.engine.types")


def django_side_sources() -> list[tuple[str, ast.Module]]:
    """(path relative to the root, parsed module) of every module of the Django side."""
    return [
        (rel, tree)
        for rel, tree in project_sources()
        if rel.split("/")[0] in PACKAGES and not rel.startswith(PURE)
    ]


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
            if (
                isinstance(base, ast.Name)
                and base.id in modules
                or ast.unparse(base) in ENGINE_MODULES
            ):
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


@functools.cache
def project_sources() -> list[tuple[str, ast.Module]]:
    """(path relative to the root, parsed module) of every product module, migrations
    aside (parsed once per run)."""
    return [
        (rel, python_source(rel)[1]) for rel in python_files(PROJECT) if "/migrations/" not in rel
    ]


def _is_project_import(node: ast.AST) -> bool:
    if isinstance(node, ast.ImportFrom):
        return node.level > 0 or (node.module or "").split(".")[0] in PROJECT
    if isinstance(node, ast.Import):
        return any(alias.name.split(".")[0] in PROJECT for alias in node.names)
    return False


def _is_app_ready(path: str, fn: ast.AST, parents: dict[ast.AST, ast.AST]) -> bool:
    parent = parents.get(fn)
    return (
        path.endswith("/apps.py")
        and isinstance(fn, ast.FunctionDef)
        and fn.name == "ready"
        and isinstance(parent, ast.ClassDef)
    )


# A definition is a statement: it lies in one of these lists of its enclosing statement,
# never inside an expression (most of a tree's nodes, which the scans need not visit).
STATEMENT_LISTS = ("body", "orelse", "finalbody", "handlers", "cases")


def child_statements(node: ast.AST) -> list[ast.AST]:
    """The statements, except handlers and match cases directly inside `node`."""
    return [
        child
        for name in STATEMENT_LISTS
        for child in getattr(node, name, None) or ()
        if isinstance(child, ast.stmt | ast.excepthandler | ast.match_case)
    ]


def statement_parents(tree: ast.Module) -> dict[ast.AST, ast.AST]:
    """Each statement (except handler, match case) of `tree` -> the node it lies in."""
    parents: dict[ast.AST, ast.AST] = {}
    todo: list[ast.AST] = [tree]
    while todo:
        node = todo.pop()
        for child in child_statements(node):
            parents[child] = node
            todo.append(child)
    return parents


def function_level_imports(path: str, tree: ast.Module) -> list[int]:
    """Lines of the imports of project modules inside a function of `tree` (outside
    `AppConfig.ready`)."""
    parents = statement_parents(tree)
    lines = []
    for node in parents:
        if not _is_project_import(node):
            continue
        owner = parents.get(node)
        while owner is not None and not isinstance(owner, ast.FunctionDef | ast.AsyncFunctionDef):
            owner = parents.get(owner)
        if owner is not None and not _is_app_ready(path, owner, parents):
            lines.append(node.lineno)
    return sorted(lines)


def test_no_function_level_imports_between_project_modules():
    found = [
        f"{path}:{line}"
        for path, tree in project_sources()
        for line in function_level_imports(path, tree)
    ]
    assert not found, (
        "import project modules at the top of the module (a cycle means a module is in "
        "the wrong layer):\n" + "\n".join(found)
    )


def test_the_import_scan_sees_imports_inside_functions_and_methods():
    sample = ast.parse(
        "import os\n"
        "from budgets import services\n"
        "def f():\n"
        "    from scheduler.tasks import request_cycle\n"
        "    import json\n"
        "class C:\n"
        "    def m(self):\n"
        "        if True:\n"
        "            import ledger.selectors\n"
        "        from . import sibling\n"
        "    def ready(self):\n"
        "        from ops import checks\n"
    )
    assert function_level_imports("x/views.py", sample) == [4, 9, 10, 12]
    assert function_level_imports("x/apps.py", sample) == [4, 9, 10]


# --- Sizes -------------------------------------------------------------------------
MAX_MODULE_LINES = 600
MAX_FUNCTION_LINES = 80
SIZED_PACKAGES = ("scheduler/", "budgets/", "ledger/", "dashboards/")
# The offenders of today, to be split; the list may only shrink: an entry that is no
# longer over its limit fails too, so remove it with the split.
MODULES_OVER: set[str] = set()
FUNCTIONS_OVER: set[str] = set()
# The function limit holds everywhere but bench/: the tests and tools too.
FUNCTION_SIZED_TOO = ("tests", "tools")


def module_lines(path: str) -> int:
    return len(python_source(path)[0].splitlines())


def long_functions(path: str, tree: ast.Module) -> dict[str, int]:
    """{'path:Qualified.name': lines} of every function of `tree` over the limit
    (methods and nested functions named through their owners)."""
    found: dict[str, int] = {}

    def visit(node: ast.AST, prefix: str) -> None:
        for child in child_statements(node):
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                name = f"{prefix}{child.name}"
                if not isinstance(child, ast.ClassDef):
                    lines = child.end_lineno - child.lineno + 1
                    if lines > MAX_FUNCTION_LINES:
                        found[f"{path}:{name}"] = lines
                visit(child, f"{name}.")
            else:
                visit(child, prefix)

    visit(tree, "")
    return found


def test_no_module_over_600_lines_outside_the_allowlist():
    over = {
        path: module_lines(path)
        for path, _ in project_sources()
        if path.startswith(SIZED_PACKAGES) and module_lines(path) > MAX_MODULE_LINES
    }
    new = sorted(
        f"{path} ({lines} lines)" for path, lines in over.items() if path not in MODULES_OVER
    )
    assert not new, "split these modules (at most 600 lines each):\n" + "\n".join(new)
    stale = sorted(MODULES_OVER - over.keys())
    assert not stale, "no longer over 600 lines, remove from MODULES_OVER:\n" + "\n".join(stale)


@functools.cache
def support_sources() -> list[tuple[str, ast.Module]]:
    """(path relative to the root, parsed module) of the tests and tools (parsed once per
    run: the size scan and the test-import scan read them)."""
    return [(rel, python_source(rel)[1]) for rel in python_files(FUNCTION_SIZED_TOO)]


def test_no_function_over_80_lines_outside_the_allowlist():
    over: dict[str, int] = {}
    for path, tree in [*project_sources(), *support_sources()]:
        over.update(long_functions(path, tree))
    new = sorted(
        f"{name} ({lines} lines)" for name, lines in over.items() if name not in FUNCTIONS_OVER
    )
    assert not new, "split these functions into named steps (80 lines at most):\n" + "\n".join(new)
    stale = sorted(FUNCTIONS_OVER - over.keys())
    assert not stale, "no longer over 80 lines, remove from FUNCTIONS_OVER:\n" + "\n".join(stale)


def test_the_size_scan_names_methods_and_nested_functions():
    body = "\n".join(["    x = 1"] * MAX_FUNCTION_LINES)
    sample = ast.parse(
        f"def short():\n    pass\n"
        f"def long():\n{body}\n"
        f"class C:\n    def m(self):\n    {body.replace(chr(10), chr(10) + '    ')}\n"
        f"def outer():\n    def inner():\n    {body.replace(chr(10), chr(10) + '    ')}\n"
    )
    assert set(long_functions("x.py", sample)) == {
        "x.py:long",
        "x.py:C.m",
        "x.py:outer",
        "x.py:outer.inner",
    }


# --- Tests ---------------------------------------------------------------------------
def imported_test_modules(tree: ast.Module) -> list[tuple[int, str]]:
    """(line, module) of every import of a test module (a `test_*.py` file of the
    repository) in `tree`."""
    found = []
    for node in ast.walk(tree):
        names: list[str] = []
        if isinstance(node, ast.ImportFrom) and node.module:
            names = [node.module, *(f"{node.module}.{a.name}" for a in node.names)]
        elif isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        found += [
            (node.lineno, n)
            for n in names
            if n.rpartition(".")[2].startswith("test_")
            and (ROOT / (n.replace(".", "/") + ".py")).is_file()
        ]
    return found


def test_no_test_module_imports_another():
    """Issue 23: shared helpers live in conftest.py files, tests/factories.py and
    tests/support/ (or a package's helper module), never in a test module that others
    import (importing one runs its module-level code and hides where a helper lives)."""
    found = [
        f"{path}:{line} imports {name}"
        for path, tree in support_sources()
        if path.startswith("tests/")
        for line, name in imported_test_modules(tree)
    ]
    assert not found, "move the shared helper out of the test module:\n" + "\n".join(found)


def test_the_test_import_scan_sees_both_import_forms():
    sample = ast.parse(
        "from tests.cli.test_cli import Cli\nimport tests.core.engine.test_plan_hash\n"
        "from tests.e2e import test_cycle\nfrom tests.support.cli import Cli\n"
        "from tests.support.workers import test_database_url\n"
    )
    assert [line for line, _ in imported_test_modules(sample)] == [1, 2, 3]


# --- Module-level state ------------------------------------------------------------
# Issue 23: no module-level mutable state outside constants. A module-level name that a
# function writes into (an item, `append`, `update`, ...) or rebinds (`global`) is state
# every caller of the process shares; a memo (`functools.cache`) is one too. What the
# live cycle keeps warm belongs to an object its owner creates (the cycle worker). The
# ones left are memos of a value fixed by the code and the settings (the same whichever
# request or test computes it first), each with why it stays; the list only shrinks.
STATE_MUTATORS = {
    "append",
    "extend",
    "add",
    "update",
    "setdefault",
    "pop",
    "popitem",
    "clear",
    "insert",
    "remove",
    "discard",
}
MODULE_STATE_ALLOWED = {
    # memo of a SQL text built from the model classes' fields (fixed by the code)
    "accounts/authentication.py:memo _token_sql": "SQL text of the models",
    "config/plainsql.py:memo columns": "select list of a model class",
    "config/plainsql.py:memo _layout": "column converters of a model class",
    "scheduler/selectors/job_reads.py:memo _job_detail_sql": "SQL text of the models",
    "scheduler/selectors/clusters.py:memo _select": "SQL text of the models",
    # DRF deep-copies every declared field per serializer instance; the built fields of a
    # serializer class are kept once per class (fixed by the code)
    "config/api_fields.py:item write _FIELD_TEMPLATES": "built fields per serializer class",
    # the CSP header values built once per settings object (a test's override_settings
    # makes a new object, hence a new entry)
    "config/csp.py:item write _BUILT": "CSP headers per settings object",
    # whether this process loaded the compiled engine: the finder it installs on
    # `sys.meta_path` is process-wide by nature, and `status()` reports what it did
    "scheduler/core/native.py:global _status,_build_unused": "the native loader's outcome",
}


def module_state(tree: ast.Module) -> list[str]:
    """'line kind name' of every piece of module-level state in `tree`: a memoized
    module-level function, a `global` rebinding, or a write into a module-level name
    (an item assignment or a mutating method) from inside a function."""
    top = set()
    for node in tree.body:
        targets = node.targets if isinstance(node, ast.Assign) else []
        if isinstance(node, ast.AnnAssign):
            targets = [node.target]
        top.update(n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name))
    found = [
        (node.lineno, f"memo {node.name}")
        for node in tree.body
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
        for deco in node.decorator_list
        if ast.unparse(deco).split("(")[0].rpartition(".")[2] in ("cache", "lru_cache")
    ]
    for fn in outermost_functions(tree):  # a nested function is walked with its owner
        for node in ast.walk(fn):
            found += _state_writes(node, top)
    return [f"{line} {what}" for line, what in sorted(set(found))]


def outermost_functions(tree: ast.Module) -> list[ast.AST]:
    """The functions and methods of `tree` that no other function encloses."""
    parents = statement_parents(tree)
    functions = [n for n in parents if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)]
    return [fn for fn in functions if not _enclosed_by_a_function(fn, parents)]


def _enclosed_by_a_function(node: ast.AST, parents: dict[ast.AST, ast.AST]) -> bool:
    owner = parents.get(node)
    while owner is not None and not isinstance(owner, ast.FunctionDef | ast.AsyncFunctionDef):
        owner = parents.get(owner)
    return owner is not None


def _state_writes(node: ast.AST, top: set[str]) -> list[tuple[int, str]]:
    if isinstance(node, ast.Global):
        return [(node.lineno, f"global {','.join(node.names)}")]
    targets: list[ast.expr] = []
    if isinstance(node, ast.Assign | ast.Delete):
        targets = node.targets
    elif isinstance(node, ast.AugAssign):
        targets = [node.target]
    found = [
        (node.lineno, f"item write {t.value.id}")
        for t in targets
        if isinstance(t, ast.Subscript) and isinstance(t.value, ast.Name) and t.value.id in top
    ]
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr in STATE_MUTATORS
        and isinstance(node.func.value, ast.Name)
        and node.func.value.id in top
    ):
        found.append((node.lineno, f"{node.func.value.id}.{node.func.attr}"))
    return found


def test_no_module_level_mutable_state_outside_the_allowlist():
    found = {
        f"{path}:{entry.partition(' ')[2]}": f"{path}:{entry.partition(' ')[0]}"
        for path, tree in project_sources()
        for entry in module_state(tree)
    }
    new = sorted(
        f"{where} {key.partition(':')[2]}"
        for key, where in found.items()
        if key not in MODULE_STATE_ALLOWED
    )
    assert not new, (
        "module-level state (keep it in an object its owner creates, or pass it in):\n"
        + "\n".join(new)
    )
    stale = sorted(MODULE_STATE_ALLOWED.keys() - found.keys())
    assert not stale, "no longer found, remove from MODULE_STATE_ALLOWED:\n" + "\n".join(stale)


def test_the_state_scan_sees_memos_globals_and_writes_into_module_names():
    sample = ast.parse(
        "import functools\n"
        "_SEEN = {}\n"
        "_LIST: list = []\n"
        "LIMITS = {'a': 1}\n"
        "_count = 0\n"
        "@functools.cache\n"
        "def memo(x):\n"
        "    return x\n"
        "def write(key, local={}):\n"
        "    _SEEN[key] = 1\n"
        "    _LIST.append(key)\n"
        "    local[key] = 1\n"
        "    return LIMITS['a']\n"
        "def bump():\n"
        "    global _count\n"
        "    _count += 1\n"
    )
    assert module_state(sample) == [
        "7 memo memo",
        "10 item write _SEEN",
        "11 _LIST.append",
        "15 global _count",
    ]


# --- No import circle ----------------------------------------------------------------
def import_cycles(graph) -> list[list[str]]:
    """The strongly connected groups (more than one module) of `graph`'s imports."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles: list[list[str]] = []

    def visit(module: str) -> None:
        index[module] = low[module] = len(index)
        stack.append(module)
        on_stack.add(module)
        for imported in sorted(graph.find_modules_directly_imported_by(module)):
            if imported not in index:
                visit(imported)
                low[module] = min(low[module], low[imported])
            elif imported in on_stack:
                low[module] = min(low[module], index[imported])
        if low[module] == index[module]:
            group = []
            while not group or group[-1] != module:
                group.append(stack.pop())
                on_stack.discard(group[-1])
            if len(group) > 1:
                cycles.append(sorted(group))

    for module in sorted(graph.modules):
        if module not in index:
            visit(module)
    return cycles


def test_no_import_circle_between_project_modules():
    """Issue 23 measured a 12-file circle (budgets.services -> scheduler.tasks -> ...);
    a module that imports one importing it back is in the wrong layer."""
    graph = grimp.build_graph(*PROJECT)
    cycles = import_cycles(graph)
    assert not cycles, "import circles:\n" + "\n".join(" -> ".join(c) for c in cycles)


def test_the_circle_scan_finds_a_circle():
    graph = grimp.ImportGraph()
    for module in ("a", "b", "c", "d"):
        graph.add_module(module)
    graph.add_import(importer="a", imported="b")
    graph.add_import(importer="b", imported="c")
    graph.add_import(importer="c", imported="a")
    graph.add_import(importer="c", imported="d")
    assert import_cycles(graph) == [["a", "b", "c"]]


# --- Every module that writes is in the layers contract ----------------------------------
# The contract (pyproject.toml) only checks the modules it names: a module of an app that
# imports the services (or the live cycle beside them) but is named in no layer could be
# imported by a selector or a model, and lint-imports would pass (issue 23:
# scheduler.cycle). The modules that only read may stay outside it.
LAYERS_CONTRACT = "Layers point one way"
WRITING_LAYERS = {"services", "cycle"}


def layers_contract() -> tuple[list[str], list[set[str]]]:
    """(containers, the modules of each layer, top first) of the layers contract."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]
    (contract,) = [c for c in config["contracts"] if c["name"].startswith(LAYERS_CONTRACT)]
    layers = [set(re.findall(r"\(?(\w+)\)?", layer)) for layer in contract["layers"]]
    return contract["containers"], layers


def unlayered_writers(graph, containers: list[str], layered: set[str]) -> list[str]:
    """'importer -> imported' for each module of a container that is in no layer and
    imports a writing layer's module directly."""
    found = []
    for module in sorted(graph.modules):
        parts = module.split(".")
        if len(parts) < 2 or parts[0] not in containers or parts[1] in layered:
            continue
        for imported in sorted(graph.find_modules_directly_imported_by(module)):
            names = imported.split(".")
            if len(names) > 1 and names[0] in containers and names[1] in WRITING_LAYERS:
                found.append(f"{module} -> {imported}")
    return found


def test_every_module_that_imports_the_services_is_in_the_layers_contract():
    containers, layers = layers_contract()
    assert {"cycle", "services"} <= layers[1] and "process_state" in layers[-1]
    found = unlayered_writers(grimp.build_graph(*PROJECT), containers, set().union(*layers))
    assert not found, (
        "name these modules in a layer of the layers contract (pyproject.toml):\n"
        + "\n".join(found)
    )


def test_the_writer_scan_finds_an_unlayered_module_that_imports_the_services():
    graph = grimp.ImportGraph()
    for module in ("app.services", "app.cycle.apply", "app.helpers", "app.views", "app.reads"):
        graph.add_module(module)
    graph.add_import(importer="app.helpers", imported="app.cycle.apply")
    graph.add_import(importer="app.views", imported="app.services")
    graph.add_import(importer="app.reads", imported="app.views")
    layered = {"services", "cycle", "views"}
    assert unlayered_writers(graph, ["app"], layered) == ["app.helpers -> app.cycle.apply"]


# --- Selectors never write ------------------------------------------------------------
# The import-linter contract keeps services, tasks and the task queue out of selectors;
# this finds the writes a selector could still make itself: an ORM write, a cache write,
# a task sent, or SQL that inserts, updates or deletes.
WRITE_SQL = re.compile(r"\b(INSERT\s+INTO|UPDATE\s+\S+\s+SET|DELETE\s+FROM)\b")
CACHE_WRITES = {"set", "set_many", "add", "delete", "delete_many", "incr", "decr", "touch", "clear"}
ALWAYS_WRITES = {
    "save",
    "bulk_create",
    "bulk_update",
    "get_or_create",
    "update_or_create",
    "select_for_update",
    "delay",
    "apply_async",
    "send_task",
}
QUERYSET_WRITES = {"create", "update", "delete"}
# A read-through memo of an expensive aggregate (the dashboards' sums, the window usage
# as of a cycle) is no write of its own: it goes through `config.cache.kept`, which also
# computes the figure when Redis is down.
SELECTOR_WRITES_ALLOWED: set[str] = set()


def selector_writes(tree: ast.Module) -> list[str]:
    """'line what' of every write a module makes (see above)."""
    found = []
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Constant)
            and isinstance(node.value, str)
            and WRITE_SQL.search(node.value)
        ):
            found.append((node.lineno, "SQL write"))
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
            continue
        method, receiver = node.func.attr, ast.unparse(node.func.value)
        if (
            method in ALWAYS_WRITES
            or (receiver == "cache" and method in CACHE_WRITES)
            or (method in QUERYSET_WRITES and "objects" in receiver)
        ):
            found.append((node.lineno, f"{receiver.rpartition('.')[2]}.{method}"))
    return [f"{line} {what}" for line, what in sorted(set(found))]


def selector_modules() -> list[tuple[str, ast.Module]]:
    return [
        (path, tree)
        for path, tree in project_sources()
        if "/selectors/" in path or path.endswith("/selectors.py")
    ]


def test_selectors_write_nothing():
    found = {
        f"{path} {entry.partition(' ')[2]}": f"{path}:{entry}"
        for path, tree in selector_modules()
        for entry in selector_writes(tree)
    }
    new = sorted(where for key, where in found.items() if key not in SELECTOR_WRITES_ALLOWED)
    assert not new, "a selector reads; move the write to a service:\n" + "\n".join(new)
    stale = sorted(SELECTOR_WRITES_ALLOWED - found.keys())
    assert not stale, "no longer found, remove from SELECTOR_WRITES_ALLOWED:\n" + "\n".join(stale)
    assert len(selector_modules()) > 10  # the scan sees the selectors


def test_the_write_scan_sees_orm_cache_task_and_sql_writes():
    sample = ast.parse(
        "def f(job, seen):\n"
        "    job.save()\n"
        "    Job.objects.filter(pk=1).update(state='x')\n"
        "    Job.objects.create(name='x')\n"
        "    cache.set('k', 1)\n"
        "    refresh.delay(1)\n"
        "    cursor.execute('UPDATE scheduler_job SET state = %s')\n"
        "    seen.add(1)\n"
        "    {}.update(a=1)\n"
        "    cache.get('k')\n"
        "    cursor.execute('SELECT 1 FROM t WHERE updated')\n"
    )
    assert selector_writes(sample) == [
        "2 job.save",
        "3 filter(pk=1).update",
        "4 objects.create",
        "5 cache.set",
        "6 refresh.delay",
        "7 SQL write",
    ]
