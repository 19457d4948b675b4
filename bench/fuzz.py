"""Fuzz the whole API for longer than the CI test: schemathesis `--checks all` as each
role against gunicorn under the production settings, on a fresh database.

    .venv/bin/python bench/fuzz.py [--max-examples 100] [--port 8390]

Needs DATABASE_URL (a server where it may create and drop `<name>_fuzz`) and REDIS_URL.
Prints JSON: HTTP requests served, server errors (5xx in the access log), schemathesis
test cases and failures, per role; each role's findings in detail (with a curl command
that reproduces each) go to `var/fuzz/<role>.txt`."""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench._server import fresh_database, gunicorn, manage, production_env  # noqa: E402
from tests.api.fuzz import run_schemathesis, server_errors  # noqa: E402

ROLES = {"superuser": "admin", "manager": "manager", "member": "researcher", "anonymous": None}
DEMO_PASSWORD = "allot-demo"
ACCESS_LINE = re.compile(r'"[A-Z]+ \S+ HTTP/[\d.]+" (\d{3}) ')


def _statuses(log_path: Path) -> list[int]:
    """HTTP statuses of the requests gunicorn has logged so far, in order."""
    return [int(m.group(1)) for m in ACCESS_LINE.finditer(log_path.read_text())]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--max-examples", type=int, default=100)
    parser.add_argument("--port", type=int, default=8390)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--roles", default=",".join(ROLES), help="comma-separated roles to fuzz as")
    parser.add_argument(
        "--paths", default=None, help="fuzz only the operations whose path matches this regex"
    )
    args = parser.parse_args()
    log_path = ROOT / "var" / "fuzz" / "gunicorn.log"
    with fresh_database("fuzz") as database_url:
        env = production_env(
            database_url,
            port=args.port,
            workers=args.workers,
            var_dir=ROOT / "var" / "fuzz",
            ALLOT_LOGIN_FAILURE_LIMIT="1000000",  # the fuzzer signs in with random passwords
        )
        manage(env, "migrate", "--noinput", "-v0")
        manage(env, "seed_demo")
        started = time.monotonic()
        base = f"http://127.0.0.1:{args.port}"
        with gunicorn(env, log_path):
            roles = {}
            for role in args.roles.split(","):
                served_before = _statuses(log_path)
                username = ROLES[role]
                login = (username, DEMO_PASSWORD) if username else None
                only = ("--include-path-regex", args.paths) if args.paths else ()
                report = run_schemathesis(
                    base, login=login, max_examples=args.max_examples, seed=None, extra_args=only
                )
                roles[role] = {
                    "test_cases": report["test_cases"]["generated"],
                    "failures": [
                        f"{f['code']} {f['title']}: {f['count']}" for f in report["failures"]
                    ],
                    "server_error_failures": server_errors(report),
                    "seconds": round(report["running_time"], 1),
                }
                time.sleep(1)  # let the workers write their last access lines
                served = _statuses(log_path)[len(served_before) :]
                roles[role]["requests_fuzzed"] = len(served)
                roles[role]["server_errors"] = sum(1 for s in served if s >= 500)
                # schemathesis's console text: each finding with the request that reproduces it
                (log_path.parent / f"{role}.txt").write_text(report["output"])
    statuses = _statuses(log_path)
    print(
        json.dumps(
            {
                "requests_fuzzed": len(statuses),
                "server_errors": sum(1 for s in statuses if s >= 500),
                "statuses": {str(s): statuses.count(s) for s in sorted(set(statuses))},
                "max_examples_per_operation": args.max_examples,
                "gunicorn_workers": args.workers,
                "roles": roles,
                "wall_s": round(time.monotonic() - started, 1),
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
