"""Run schemathesis (`--checks all`) over the whole OpenAPI schema of a running server.

Shared by tests/api/test_fuzz.py (bounded, in CI) and bench/fuzz.py (longer). The schema
is read from the server, so every endpoint that exists is fuzzed, whatever it contains."""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent.parent
SCHEMATHESIS = Path(sys.executable).parent / "schemathesis"
CONFIG = ROOT / "schemathesis.toml"


def run_schemathesis(
    base_url: str,
    *,
    token: str | None,
    max_examples: int,
    seed: int | None = 1,
    timeout_s: float = 1800,
    extra_args: tuple[str, ...] = (),
) -> dict:
    """Fuzz `base_url`'s API as the owner of `token` (anonymous when None).

    Returns schemathesis's JSON run report plus `output` (its console text)."""
    header = f"Authorization: Token {token}" if token else "X-Allot-Fuzz: anonymous"
    with tempfile.TemporaryDirectory() as tmp:
        report = Path(tmp) / "report.json"
        command = [
            str(SCHEMATHESIS),
            "--config-file",
            str(CONFIG),
            "--no-color",
            "run",
            f"{base_url}/api/schema/",
            "--checks",
            "all",
            "--max-examples",
            str(max_examples),
            "--workers",
            "1",
            "--header",
            header,
            "--generation-database",
            "none",
            "--report",
            "json",
            "--report-json-path",
            str(report),
            *(["--seed", str(seed)] if seed is not None else []),
            *extra_args,
        ]
        result = subprocess.run(
            command, cwd=tmp, capture_output=True, text=True, timeout=timeout_s, check=False
        )
        if not report.exists():
            raise RuntimeError(f"schemathesis wrote no report:\n{result.stdout}\n{result.stderr}")
        data = json.loads(report.read_text())
    data["output"] = result.stdout + result.stderr
    return data


def server_errors(report: dict) -> int:
    """How many distinct server-error (5xx) failures schemathesis found."""
    return sum(f["count"] for f in report["failures"] if f["code"] == "ST101")
