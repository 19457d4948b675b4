"""Compile the engine with mypyc into build/native/ (`make install` runs this).

Compiles every module of `scheduler.core.native.NATIVE_SOURCES` as one mypyc group
(the modules call each other natively) with the strict mypy settings of
pyproject.toml, then writes build/native/manifest.json: per module its extension file
and the SHA-256 of its source, which `scheduler.core.native.install` checks before it loads
them. Needs a C compiler and the Python headers; without them it exits non-zero and the
product runs the interpreted source, with the same decisions.

Usage: python tools/build_native.py [--clean]
"""

from __future__ import annotations

import argparse
import importlib.machinery
import json
import shutil
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from scheduler.core.native import MANIFEST, NATIVE_SOURCES, source_digest  # noqa: E402

GROUP = "scheduler.core._native"  # the shared library: scheduler/core/_native__mypyc


def sources() -> list[Path]:
    """The compiled sources, relative to the repository root."""
    found = set()
    for entry in NATIVE_SOURCES:
        path = ROOT / entry
        found.update(path.rglob("*.py") if path.is_dir() else [path])
    return sorted(p.relative_to(ROOT) for p in found)


def module_name(source: Path) -> str:
    parts = list(source.with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def build(out: Path) -> dict[str, Any]:
    """Compile into `out` and return the manifest (not yet written)."""
    from mypyc.build import mypycify
    from setuptools import Distribution

    files = sources()
    extensions = mypycify(
        [str(f) for f in files],
        opt_level="3",
        group_name=GROUP,
        target_dir=str(out / "c"),
    )
    dist = Distribution({"name": "allot-native", "ext_modules": extensions})
    cmd = dist.get_command_obj("build_ext")
    cmd.build_lib = str(out / "lib")  # type: ignore[attr-defined]
    cmd.build_temp = str(out / "tmp")  # type: ignore[attr-defined]
    cmd.inplace = False  # type: ignore[attr-defined]
    dist.run_command("build_ext")
    suffix = importlib.machinery.EXTENSION_SUFFIXES[0]
    # each extension lies where its source does, under lib/ (a package's as __init__)
    modules = {
        module_name(f): {
            "source": str(f),
            "extension": str(Path("lib", f.parent, f.stem + suffix)),
            "sha256": source_digest(ROOT / f),
        }
        for f in files
    }
    shared = GROUP + "__mypyc"
    shared_library = {"module": shared, "extension": str(Path("lib", *shared.split("."))) + suffix}
    for entry in [shared_library, *modules.values()]:
        if not (out / entry["extension"]).is_file():
            raise SystemExit(f"build_native: the build did not produce {entry['extension']}")
    return {"extension_suffix": suffix, "shared_library": shared_library, "modules": modules}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--clean", action="store_true", help="remove build/native and stop")
    args = ap.parse_args(argv)
    out = MANIFEST.parent
    # never leave a manifest that describes another build: a failed build means the
    # interpreted source is used
    MANIFEST.unlink(missing_ok=True)
    if args.clean:
        shutil.rmtree(out, ignore_errors=True)
        return 0
    t0 = time.perf_counter()
    manifest = build(out)
    MANIFEST.write_text(json.dumps(manifest, indent=1, sort_keys=True) + "\n")
    n = len(manifest["modules"])
    print(f"build_native: {n} modules compiled into {out} in {time.perf_counter() - t0:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
