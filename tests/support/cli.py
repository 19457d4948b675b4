"""The `allot` CLI as a user runs it: a subprocess with its own home and config, the
server's URL and (optionally) a token (tests/cli/test_cli.py, the cross-surface tests)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path


class Cli:
    """`cli('queue', '--me')` runs `allot queue --me` and returns the finished process."""

    def __init__(self, url: str, home: Path, token: str | None):
        self.env = {
            "PATH": os.environ.get("PATH", ""),
            "HOME": str(home),
            "XDG_CONFIG_HOME": str(home / ".config"),
            "ALLOT_URL": url,
            "COLUMNS": "250",
        }
        if token:
            self.env["ALLOT_TOKEN"] = token

    def __call__(self, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess:
        return subprocess.run(
            [sys.executable, "-m", "allot_cli", *args],
            env=self.env,
            input=stdin,
            capture_output=True,
            text=True,
            timeout=60,
        )
