"""The engine compiled with mypyc, used when it matches the source.

`make install` runs `tools/build_native.py`, which compiles the modules of
`NATIVE_SOURCES` (strictly typed, pure Python) with mypyc into `build/native/` and
records there a manifest: every compiled module's extension file and the SHA-256 of
the source it was compiled from. `install()` (called when `scheduler.core` is imported)
puts a finder first on `sys.meta_path` that loads those extension modules instead of
the sources, but only if every recorded source is unchanged and the interpreter's
extension suffix is the one they were built for: a compiled module calls the others
natively, so the group is used whole or not at all. The decisions are the same either
way (the source is the specification; tests compare the two).

Set `ALLOT_NATIVE=0` to run the interpreted source (to debug or to patch the engine).
An edited source silently falls back to the interpreted modules until the next
`make install`; `status()` says which is in use and why.
"""

from __future__ import annotations

import hashlib
import importlib.abc
import importlib.machinery
import importlib.util
import json
import logging
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from types import ModuleType
from typing import Any, NamedTuple

__all__ = ["NATIVE_SOURCES", "ROOT", "install", "log_status", "source_digest", "status"]

ROOT = Path(__file__).resolve().parent.parent.parent
# compiled by tools/build_native.py: the engine, and the simulator's event loop and usage
# decay (what `bench/sim.py` spends its time in besides the engine)
NATIVE_SOURCES = (
    "scheduler/core/engine",
    "scheduler/core/sim/replay.py",
    "scheduler/core/sim/replay_state.py",
    "scheduler/core/sim/usage.py",
)
MANIFEST = ROOT / "build" / "native" / "manifest.json"

_status = "not checked"
_build_unused = False  # a build exists, but this process runs the source


def source_digest(path: Path) -> str:
    """SHA-256 of a source file (what the manifest records per compiled module)."""
    return hashlib.sha256(path.read_bytes()).hexdigest()


class _NativeLoader(importlib.machinery.ExtensionFileLoader):
    """Loads a compiled module and points its `__file__` at the extension and a
    package's `__path__` at the source folder (mypyc derives both from where the shared
    library lies, which is not where the modules are)."""

    def __init__(self, fullname: str, extension: Path, package_dir: Path | None) -> None:
        super().__init__(fullname, str(extension))
        self.package_dir = package_dir  # a package's source folder; None for a module

    def exec_module(self, module: ModuleType) -> None:
        super().exec_module(module)
        module.__file__ = self.path
        if self.package_dir is not None:
            module.__path__ = [str(self.package_dir)]


class _NativeFinder(importlib.abc.MetaPathFinder):
    """Finds the compiled extension of each module named in the manifest."""

    def __init__(self, extensions: dict[str, tuple[Path, Path | None]]) -> None:
        self.extensions = extensions  # module -> (extension file, package source folder)

    def find_spec(
        self,
        fullname: str,
        path: Sequence[str] | None = None,
        target: ModuleType | None = None,
    ) -> importlib.machinery.ModuleSpec | None:
        found = self.extensions.get(fullname)
        if found is None:
            return None
        extension, package_dir = found
        return importlib.util.spec_from_file_location(
            fullname,
            str(extension),
            loader=_NativeLoader(fullname, extension, package_dir),
            submodule_search_locations=None if package_dir is None else [str(package_dir)],
        )


class _Build(NamedTuple):
    extensions: dict[str, tuple[Path, Path | None]]  # module -> (extension, package dir)
    shared_library: str  # the module holding all the compiled code


def _valid_build(manifest: Path) -> _Build | str:
    """The manifest's build, or why it cannot be used."""
    try:
        data = json.loads(manifest.read_text())
    except FileNotFoundError:
        return "not built (make install builds it)"
    except (OSError, ValueError) as e:
        return f"unreadable manifest {manifest}: {e}"
    try:
        return _checked_build(manifest.parent, data)
    except (KeyError, TypeError) as e:  # another shape: an older build, a stray file
        return f"unreadable manifest {manifest}: {e!r}"


def _checked_build(where: Path, data: dict[str, Any]) -> _Build | str:
    """`_valid_build` for a parsed manifest whose build files lie in `where`."""
    suffix = importlib.machinery.EXTENSION_SUFFIXES[0]
    if data["extension_suffix"] != suffix:
        return f"built for {data['extension_suffix']!r}, this interpreter loads {suffix!r}"
    shared = data["shared_library"]
    extensions: dict[str, tuple[Path, Path | None]] = {}
    for module, entry in [(shared["module"], shared), *data["modules"].items()]:
        extension = where / entry["extension"]
        if not extension.is_file():
            return f"missing {extension}"
        package_dir = None
        if "source" in entry:  # the shared library has no source of its own
            source = ROOT / entry["source"]
            if not source.is_file() or source_digest(source) != entry["sha256"]:
                return f"stale: {entry['source']} changed since the build (make install)"
            if source.name == "__init__.py":
                package_dir = source.parent
        extensions[module] = (extension, package_dir)
    if len(extensions) == 1:
        return "empty manifest"
    return _Build(extensions, shared["module"])


def install(manifest: Path = MANIFEST) -> bool:
    """Put the compiled modules first on the import path if they match the source;
    returns whether they are in use. Does nothing once any of them is imported."""
    global _status, _build_unused
    if os.environ.get("ALLOT_NATIVE", "1") == "0":
        _status = "interpreted: ALLOT_NATIVE=0"
        return False
    if any(isinstance(f, _NativeFinder) for f in sys.meta_path):
        return True
    build = _valid_build(manifest)
    if isinstance(build, str):
        _status = f"interpreted: {build}"
        _build_unused = manifest.is_file()
        return False
    if any(m in sys.modules for m in build.extensions):
        _status = "interpreted: imported before the compiled modules could be installed"
        _build_unused = True
        return False
    finder = _NativeFinder(build.extensions)
    sys.meta_path.insert(0, finder)
    # load the shared library (all the compiled code) now: a build that does not load
    # (a missing library, a truncated file) leaves the source in use instead of failing
    # at the engine's first import
    try:
        importlib.import_module(build.shared_library)
    except ImportError as e:
        sys.meta_path.remove(finder)
        sys.modules.pop(build.shared_library, None)
        _status = f"interpreted: the build in {manifest.parent} does not load ({e})"
        _build_unused = True
        return False
    _status = f"compiled: {len(build.extensions) - 1} modules from {manifest.parent}"
    return True


def status() -> str:
    """Which engine this process runs, compiled or interpreted, and why."""
    return _status


def log_status(logger: logging.Logger) -> None:
    """Say which engine this process runs: a warning when a build exists but is not used
    (a source edited since, a build that does not load), so an operator notices that
    the service runs at half speed; else a line at debug level."""
    logger.log(logging.WARNING if _build_unused else logging.DEBUG, "engine %s", _status)
