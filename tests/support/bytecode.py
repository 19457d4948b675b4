"""The bytecode of the project and the tests written once, before the xdist workers start.

From a clean clone no module has its bytecode yet: every worker of `make test` started
at the same moment, and each compiled the project's modules and rewrote the assertions
of every test module again (pytest's rewritten modules are cached as `<name>.cpython-
311-pytest-<version>.pyc`), four times the same work on two cores before the first test
ran (one collection of the suite took 12.8 CPU-s without the bytecode, 5.2 with it).
The controller writes both once here (`pytest_configure`, before xdist starts its
workers in `pytest_sessionstart`), in one process per core; the workers then read them,
as any later run does: from a clean clone, `-n 4` up to the first test took 41.5 CPU-s
before, 31.9 with this (two runs each, back to back). Nothing is written where the run
writes no bytecode (PYTHONDONTWRITEBYTECODE), nor in a worker or a run without xdist.

A plugin of tests/conftest.py."""

from __future__ import annotations

import compileall
import os
import sys
from pathlib import Path

import pytest
from _pytest.assertion import rewrite
from _pytest.assertion.rewrite import assertstate_key

ROOT = Path(__file__).resolve().parents[2]
# Not the project's own: the virtual environment (its bytecode written by pip), the
# engine's build and the run's state.
OUTSIDE = ("/.venv/", "/build/", "/var/", "/.git/", "/staticfiles/", "/node_modules/")


def _sources(folder: str) -> list[Path]:
    """The Python files under `folder` of the repository, outside OUTSIDE."""
    found = (ROOT / folder).rglob("*.py")
    return sorted(p for p in found if not any(o in f"/{p.relative_to(ROOT)}" for o in OUTSIDE))


def rewritten_pyc(path: Path) -> Path:
    """Where pytest caches the assertion-rewritten code of the test module `path`."""
    return rewrite.get_cache_dir(path) / (path.name[:-3] + rewrite.PYC_TAIL)


def _write(config: pytest.Config, paths: list[Path]) -> None:
    """Compile `paths` (plain bytecode) and, for those under tests/, pytest's rewritten
    bytecode as its import hook would (the same code, in the same file)."""
    state = config.stash[assertstate_key]
    tests = ROOT / "tests"
    for path in paths:
        compileall.compile_file(str(path), quiet=2)
        pyc = rewritten_pyc(path)
        if (
            path.is_relative_to(tests)
            and rewrite._read_pyc(path, pyc, state.trace) is None
            and rewrite.try_makedirs(pyc.parent)
        ):
            try:
                source_hash, code = rewrite._rewrite_test(path, config)
            except (SyntaxError, ValueError, OSError):
                continue  # the worker that imports it reports the error, as before
            rewrite._write_pyc(state, code, source_hash, pyc)


def write_bytecode(config: pytest.Config, folders: list[str], processes: int) -> None:
    """Write the bytecode of `folders`' files, shared among `processes` processes (this
    one and forked ones, which exit as soon as their share is written)."""
    paths = [p for folder in folders for p in _sources(folder)]
    shares = [paths[i::processes] for i in range(processes)]
    children = []
    for share in shares[1:]:
        pid = os.fork()
        if pid == 0:  # pragma: no cover - the child's work is checked by its files
            try:
                _write(config, share)
            finally:
                os._exit(0)
        children.append(pid)
    _write(config, shares[0])
    for pid in children:
        os.waitpid(pid, 0)


def _is_xdist_controller(config: pytest.Config) -> bool:
    workers = getattr(config.option, "numprocesses", None)
    return bool(workers) and not hasattr(config, "workerinput")


@pytest.hookimpl(trylast=True)
def pytest_configure(config: pytest.Config) -> None:
    if sys.dont_write_bytecode or not _is_xdist_controller(config):
        return
    folders = [p.name for p in ROOT.iterdir() if p.is_dir() and (p / "__init__.py").exists()]
    write_bytecode(config, sorted(set(folders) | {"tests"}), os.cpu_count() or 1)
