"""Run schemathesis (`--checks all`) over the whole OpenAPI schema of a running server.

Shared by tests/api/test_fuzz.py (bounded, in CI) and bench/fuzz.py (longer). The schema
is read from the server, so every endpoint that exists is fuzzed, whatever it contains.

A signed-in role signs in through `POST /api/v1/auth/token/` (schemathesis's dynamic
token auth, sent as `Authorization: Bearer`) and signs in again whenever a request gets
401: the fuzzer revokes its own tokens (`DELETE /api/v1/auth/tokens/`), and with a fixed
token every operation after that answered 401 and was fuzzed as anonymous."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent.parent
SCHEMATHESIS = Path(sys.executable).parent / "schemathesis"
CONFIG = ROOT / "schemathesis.toml"
# Hypothesis's caches (its Unicode tables, made on first use: 1.2 CPU-seconds), shared with
# the suite's own processes; in the run's temporary directory each run made them again.
# No example database is kept (`--generation-database none`): what is generated is the same.
HYPOTHESIS_STORAGE = ROOT / ".hypothesis"


def config_for(login: tuple[str, str] | None) -> str:
    """schemathesis.toml, plus the dynamic token auth of `login` (user name, password)."""
    text = CONFIG.read_text()
    if login is None:
        return text
    username, password = login
    return (
        f"{text}\n[auth.dynamic.openapi.tokenAuth]\n"
        'path = "/api/v1/auth/token/"\n'
        f"payload = {{ username = {json.dumps(username)}, password = {json.dumps(password)} }}\n"
        'extract_selector = "/token"\n'
    )


def run_schemathesis(
    base_url: str,
    *,
    login: tuple[str, str] | None,
    max_examples: int,
    seed: int | None = 1,
    timeout_s: float = 1800,
    schema_path: Path | None = None,
    extra_args: tuple[str, ...] = (),
) -> dict:
    """Fuzz `base_url`'s API signed in as `login` (user name, password; anonymous when
    None). `schema_path`: the schema read once from a file (its operations are the
    server's), else schemathesis reads `base_url`'s.

    Returns schemathesis's JSON run report plus `output` (its console text)."""
    with tempfile.TemporaryDirectory() as tmp:
        report = Path(tmp) / "report.json"
        config = Path(tmp) / "schemathesis.toml"
        config.write_text(config_for(login))
        location = (
            [str(schema_path), "--url", base_url] if schema_path else [f"{base_url}/api/schema/"]
        )
        command = [
            str(SCHEMATHESIS),
            "--config-file",
            str(config),
            "--no-color",
            "run",
            *location,
            "--checks",
            "all",
            "--max-examples",
            str(max_examples),
            "--workers",
            "1",
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
            command,
            cwd=tmp,
            env={**os.environ, "HYPOTHESIS_STORAGE_DIRECTORY": str(HYPOTHESIS_STORAGE)},
            capture_output=True,
            text=True,
            timeout=timeout_s,
            check=False,
        )
        if not report.exists():
            raise RuntimeError(f"schemathesis wrote no report:\n{result.stdout}\n{result.stderr}")
        data = json.loads(report.read_text())
    data["output"] = result.stdout + result.stderr
    return data


def server_errors(report: dict) -> int:
    """How many distinct server-error (5xx) failures schemathesis found."""
    return sum(f["count"] for f in report["failures"] if f["code"] == "ST101")
