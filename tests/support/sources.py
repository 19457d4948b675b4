"""The repository's Python sources, each read and parsed once per process: the layer
checks (tests/test_layers.py) and the path check of tests/test_project.py read the same
files, and both modules are one xdist group (`layers`), so the ~700 files are parsed
once, not once per module."""

from __future__ import annotations

import ast
import functools
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent.parent


def python_files(folders: tuple[str, ...]) -> list[str]:
    """The `.py` files under `folders`, relative to the root, in path order per folder."""
    return [
        path.relative_to(ROOT).as_posix()
        for folder in folders
        for path in sorted((ROOT / folder).rglob("*.py"))
    ]


@functools.cache
def python_source(rel: str) -> tuple[str, ast.Module]:
    """The text of the file at `rel` (relative to the root) and its parsed module."""
    text = (ROOT / rel).read_text()
    return text, ast.parse(text, filename=rel)
