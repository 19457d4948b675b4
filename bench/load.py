"""Load: 200 simulated users for 5 minutes against the production server; prints JSON.

    .venv/bin/python bench/load.py [--users 200] [--minutes 5] [--workers N] [--port 8621]

Needs DATABASE_URL (a server where it may create and drop `<name>_load`) and REDIS_URL.
Seeds a fresh database (20 projects with a member each, a 128 x 8 GPU cluster, 2,000
jobs), starts gunicorn (production settings) and runs locust headless with the users of
bench/locustfile.py (submit, my jobs, queue, job detail, tree, budget history, and the
dashboard endpoints that are served). Prints requests, failures and the p50/p95 latency
per endpoint (`endpoints`), and `errors` (failed requests of any kind).
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench._server import fresh_database, gunicorn, manage, production_env  # noqa: E402

SETUP = """
import json, datetime as dt
from django.contrib.auth import get_user_model
from django.utils import timezone
from accounts.services import token_create
from budgets.services import budget_tree_import
from scheduler.models import Cluster, Host, Job
programs = [{"name": f"prog{p}", "weight": 1, "children": [
    {"name": f"proj{p}{q}", "weight": 1, "members": [f"user{p}{q}"]} for q in range(5)]}
    for p in range(4)]
User = get_user_model()
for program in programs:
    for project in program["children"]:
        User.objects.create_user(project["members"][0], password="load-password-1")
budget_tree_import(data={"name": "org", "children": programs})
cluster = Cluster.objects.create(name="load", host_count=128, gpus_per_host=8)
Host.objects.bulk_create([Host(cluster=cluster, name=f"h{i:03d}", gpus=8) for i in range(128)])
members = []
from budgets.models import BudgetNode
for program in programs:
    for project in program["children"]:
        user = User.objects.get(username=project["members"][0])
        node = BudgetNode.objects.get(name=project["name"])
        members.append({"token": token_create(user=user, name="load")[1],
                        "project": f"org/{program['name']}/{project['name']}",
                        "user_id": user.pk, "node_id": node.pk})
now = timezone.now()
jobs = Job.objects.bulk_create([
    Job(cluster=cluster, project_id=members[i % 20]["node_id"], submitter_id=members[i % 20]["user_id"],
        name="seed", gpus=[1, 2, 4, 8][i % 4], min_runtime_s=900, submitted_at=now - dt.timedelta(seconds=i),
        queued_at=now - dt.timedelta(seconds=i), spec={"image": "x", "command": "y"})
    for i in range(2000)])
print(json.dumps({"members": members, "job_ids": [j.pk for j in jobs[:200]],
                  "cluster": "load"}))
"""


DASHBOARD_PATHS = [
    "/api/v1/occupancy/?cluster=load",
    "/api/v1/usage/?cluster=load&step=day",
    "/api/v1/fairshare/?cluster=load",
    "/api/v1/waits/?cluster=load",
]


def _served(port: int, token: str) -> list[str]:
    """The dashboard endpoints this build serves (they landed one by one)."""
    served = []
    for path in DASHBOARD_PATHS:
        request = urllib.request.Request(
            f"http://127.0.0.1:{port}{path}", headers={"Authorization": f"Token {token}"}
        )
        try:
            urllib.request.urlopen(request, timeout=30)
            served.append(path)
        except urllib.error.HTTPError as error:
            if error.code != 404:
                served.append(path)  # served, but failing: locust counts it
    return served


def _percentile_rows(stats_csv: Path) -> dict[str, dict]:
    endpoints = {}
    with stats_csv.open() as f:
        for row in csv.DictReader(f):
            if row["Name"] == "Aggregated":
                continue
            endpoints[row["Name"]] = {
                "requests": int(row["Request Count"]),
                "failures": int(row["Failure Count"]),
                "p50_ms": float(row["50%"] or 0),
                "p95_ms": float(row["95%"] or 0),
                "rps": round(float(row["Requests/s"]), 1),
            }
    return endpoints


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--users", type=int, default=200)
    parser.add_argument("--minutes", type=float, default=5.0)
    parser.add_argument("--workers", type=int, default=None, help="gunicorn workers")
    parser.add_argument("--port", type=int, default=8621)
    args = parser.parse_args()
    with fresh_database("load") as database_url, tempfile.TemporaryDirectory() as tmp:
        env = production_env(
            database_url, port=args.port, workers=args.workers, var_dir=ROOT / "var" / "bench"
        )
        manage(env, "migrate", "--noinput", "-v0")
        seeded = json.loads(manage(env, "shell", "-c", SETUP).strip().splitlines()[-1])
        workdir = Path(tmp)
        with gunicorn(env, workdir / "gunicorn.log"):
            seeded["dashboard_paths"] = _served(args.port, seeded["members"][0]["token"])
            (workdir / "setup.json").write_text(json.dumps(seeded))
            started = time.monotonic()
            subprocess.run(
                [
                    str(Path(sys.executable).parent / "locust"),
                    "-f",
                    str(ROOT / "bench" / "locustfile.py"),
                    "--headless",
                    "-u",
                    str(args.users),
                    "-r",
                    str(max(1, args.users // 20)),
                    "-t",
                    f"{int(args.minutes * 60)}s",
                    "--host",
                    f"http://127.0.0.1:{args.port}",
                    "--csv",
                    str(workdir / "load"),
                    "--only-summary",
                    "--loglevel",
                    "WARNING",
                ],
                env=dict(os.environ, ALLOT_LOAD_SETUP=str(workdir / "setup.json")),
                check=False,
                stdout=subprocess.DEVNULL,
            )
            seconds = time.monotonic() - started
            endpoints = _percentile_rows(workdir / "load_stats.csv")
    requests = sum(e["requests"] for e in endpoints.values())
    print(
        json.dumps(
            {
                "scenario": {
                    "users": args.users,
                    "seconds": round(seconds),
                    "workers": env["WEB_CONCURRENCY"],
                    "server": "gunicorn, production settings, PostgreSQL, Redis",
                },
                "requests": requests,
                "errors": sum(e["failures"] for e in endpoints.values()),
                "requests_per_s": round(requests / seconds, 1),
                "endpoints": endpoints,
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
