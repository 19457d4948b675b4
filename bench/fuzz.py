"""Fuzz the whole API for longer than the CI test: schemathesis `--checks all` as each
role against gunicorn under the production settings, each role on its own copy of a
freshly seeded demo database (a role's fuzzing deletes memberships and tokens: as the
superuser it once removed the manager's role, and the manager was then fuzzed as a user
without one).

    .venv/bin/python bench/fuzz.py [--max-examples 100] [--port 8390]

Needs DATABASE_URL (a server where it may create and drop `<name>_fuzz` and
`<name>_fuzz_seed`) and REDIS_URL. Prints JSON: HTTP requests served, server errors (5xx
in the access log), schemathesis test cases and failures, per role, and the operations
that answered the role only 401/403 although the permission matrix
(tests/security/permissions.py) opens them to it (`not_reached`: each one a finding);
each role's findings in detail (with a curl command that reproduces each) go to
`var/fuzz/<role>.txt`, its server's log to `var/fuzz/gunicorn-<role>.log`."""

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
from tests.security.permissions import operation_key, refused_operations  # noqa: E402

# fuzzing role -> (demo user, the permission matrix's role): the demo's manager manages
# the program language-models, its researcher is a member of projects
ROLES = {
    "superuser": ("admin", "superuser"),
    "manager": ("manager", "program_manager"),
    "member": ("researcher", "member"),
    "anonymous": (None, "anonymous"),
}
DEMO_PASSWORD = "allot-demo"
ADD_FUZZ_MEMBERS = (
    "from tests.api.fuzz_world import add_fuzz_members; add_fuzz_members({manager!r})"
)
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
    var_dir = ROOT / "var" / "fuzz"
    started = time.monotonic()
    statuses: list[int] = []
    roles = {}
    with fresh_database("fuzz_seed") as seeded_url:
        seed_env = production_env(seeded_url, port=args.port, workers=1, var_dir=var_dir)
        manage(seed_env, "migrate", "--noinput", "-v0")
        manage(seed_env, "seed_demo")
        # members in the manager's program, so that the membership ids the fuzzer draws
        # are nearly all ones the manager may remove (tests/api/fuzz_world.py)
        manage(seed_env, "shell", "-c", ADD_FUZZ_MEMBERS.format(manager=ROLES["manager"][0]))
        # as a deploy does (deploy/allot-run): the 404 page a probe of an unknown path
        # gets renders the site's layout, with its hashed static names
        manage(seed_env, "collectstatic", "--noinput", "-v0")
        for role in args.roles.split(","):
            with fresh_database("fuzz", template=seeded_url) as database_url:
                roles[role], served = _fuzz_as(role, database_url, args, var_dir)
            statuses += served
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


def _fuzz_as(role: str, database_url: str, args, var_dir: Path) -> tuple[dict, list[int]]:
    """Fuzz as `role` against gunicorn on `database_url`: the role's figures, and the
    HTTP statuses its server logged."""
    env = production_env(
        database_url,
        port=args.port,
        workers=args.workers,
        var_dir=var_dir,
        ALLOT_LOGIN_FAILURE_LIMIT="1000000",  # the fuzzer signs in with random passwords
    )
    username, matrix_role = ROLES[role]
    log_path = var_dir / f"gunicorn-{role}.log"
    only = ("--include-path-regex", args.paths) if args.paths else ()
    with gunicorn(env, log_path):
        report = run_schemathesis(
            f"http://127.0.0.1:{args.port}",
            login=(username, DEMO_PASSWORD) if username else None,
            max_examples=args.max_examples,
            seed=None,
            extra_args=only,
        )
    served = _statuses(log_path)
    only_refused = {operation_key(op) for op in report["warnings"]["missing_auth"]}
    # schemathesis's console text: each finding with the request that reproduces it
    (var_dir / f"{role}.txt").write_text(report["output"])
    figures = {
        "test_cases": report["test_cases"]["generated"],
        "failures": [f"{f['code']} {f['title']}: {f['count']}" for f in report["failures"]],
        "server_error_failures": server_errors(report),
        "not_reached": sorted(only_refused - refused_operations(matrix_role)),
        "seconds": round(report["running_time"], 1),
        "requests_fuzzed": len(served),
        "server_errors": sum(1 for s in served if s >= 500),
    }
    return figures, served


if __name__ == "__main__":
    main()
