"""Running `manage.py` as a user would: a separate process, its exit code and output."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def run_manage(*args: str) -> subprocess.CompletedProcess[str]:
    """`python manage.py ARGS` under the test settings, from the repository root."""
    env = dict(os.environ, DJANGO_SETTINGS_MODULE="config.settings.test")
    return subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
