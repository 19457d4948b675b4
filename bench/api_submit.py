"""Job submissions through the production server: gunicorn (config/gunicorn.py, the
production settings) with PostgreSQL and Redis, on a fresh database.

    .venv/bin/python bench/api_submit.py [--seconds 10] [--clients 4] [--threads 4]
                                         [--workers N] [--arrays 3] [--port 8391]

Needs DATABASE_URL (a server where it may create and drop `<name>_bench`) and REDIS_URL.
Client processes (each with threads, one connection per request as gunicorn's sync
workers close them) post single submissions with an Idempotency-Key for `--seconds`;
then `--arrays` requests of `array: 10000` are timed one after the other.

Prints JSON: `submissions_per_s` (accepted single submissions per second), `errors`
(responses other than 201, and connection failures), `array_10k_s` (median seconds of
one 10,000-job array request, end to end) and the details.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import statistics
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench._server import (  # noqa: E402
    fresh_database,
    gunicorn,
    manage,
    post_job,
    production_env,
    worker_cpu_s,
)

SETUP = """
from budgets.services import budget_tree_import
from django.contrib.auth import get_user_model
from accounts.services import token_create
from scheduler.models import Cluster, Host
user = get_user_model().objects.create_user("bench", password="bench-password-1")
budget_tree_import(data={"name": "org", "children": [
    {"name": "prog", "weight": 1, "children": [{"name": "p1", "weight": 1, "members": ["bench"]}]}]})
cluster = Cluster.objects.create(name="bench", host_count=128, gpus_per_host=8)
Host.objects.bulk_create([Host(cluster=cluster, name=f"h{i:03d}", gpus=8) for i in range(128)])
print(token_create(user=user, name="bench")[1])
"""

BODY = {
    "project": "org/prog/p1",
    "cluster": "bench",
    "name": "bench",
    "gpus": 8,
    "min_runtime_s": 600,
    "kind": "training",
    "spec": {"image": "pytorch:2.5", "command": "python train.py", "env": {"SEED": "1"}},
    "duration_s": 3600,
}


def _client(port: int, token: str, threads: int, until: float, out) -> None:
    """One client process: `threads` threads posting until `until` (monotonic)."""
    counts = {"ok": 0, "errors": 0, "statuses": {}}
    lock = threading.Lock()

    def loop() -> None:
        while time.monotonic() < until:
            try:
                status, _ = post_job(port, token, BODY)
            except OSError:
                status = 0
            with lock:
                counts["statuses"][status] = counts["statuses"].get(status, 0) + 1
                counts["ok" if status == 201 else "errors"] += 1

    workers = [threading.Thread(target=loop) for _ in range(threads)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    out.put(counts)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--clients", type=int, default=4, help="client processes")
    parser.add_argument("--threads", type=int, default=4, help="threads per client process")
    parser.add_argument("--workers", type=int, default=None, help="gunicorn workers")
    parser.add_argument("--arrays", type=int, default=3)
    parser.add_argument("--port", type=int, default=8391)
    args = parser.parse_args()
    with fresh_database("bench") as database_url:
        env = production_env(
            database_url, port=args.port, workers=args.workers, var_dir=ROOT / "var" / "bench"
        )
        manage(env, "migrate", "--noinput", "-v0")
        token = manage(env, "shell", "-c", SETUP).split()[-1]
        with gunicorn(env, ROOT / "var" / "bench" / "gunicorn.log") as server:
            for _ in range(20):  # warm every worker (imports, connections)
                post_job(args.port, token, BODY)
            cpu_before = worker_cpu_s(server.pid)
            result = _run_singles(args, token)
            cpu_singles = worker_cpu_s(server.pid) - cpu_before
            result["array_runs_s"] = [_time_array(args.port, token) for _ in range(args.arrays)]
    workers = int(env["WEB_CONCURRENCY"])
    arrays = [t for t in result["array_runs_s"] if t is not None]
    print(
        json.dumps(
            {
                "submissions_per_s": result["submissions_per_s"],
                "errors": result["errors"],
                "array_10k_s": round(statistics.median(arrays), 3) if arrays else None,
                "array_runs_s": result["array_runs_s"],
                # CPU of the gunicorn workers per accepted submission (PostgreSQL's and the
                # clients' not included): steadier than the rate on a shared machine
                "server_cpu_ms_per_submission": round(1000 * cpu_singles / max(1, result["ok"]), 2),
                "submitted": result["ok"],
                "statuses": result["statuses"],
                "seconds": args.seconds,
                "client_processes": args.clients,
                "client_threads": args.clients * args.threads,
                "gunicorn_workers": workers,
                "cpus": os.cpu_count(),
            },
            indent=2,
        )
    )


def _run_singles(args, token: str) -> dict:
    queue: multiprocessing.Queue = multiprocessing.Queue()
    until = time.monotonic() + args.seconds
    started = time.monotonic()
    procs = [
        multiprocessing.Process(target=_client, args=(args.port, token, args.threads, until, queue))
        for _ in range(args.clients)
    ]
    for p in procs:
        p.start()
    parts = [queue.get() for _ in procs]
    for p in procs:
        p.join()
    elapsed = time.monotonic() - started
    statuses: dict[str, int] = {}
    for part in parts:
        for status, n in part["statuses"].items():
            statuses[str(status)] = statuses.get(str(status), 0) + n
    ok = sum(p["ok"] for p in parts)
    return {
        "ok": ok,
        "submissions_per_s": round(ok / elapsed, 1),
        "errors": sum(p["errors"] for p in parts),
        "statuses": statuses,
    }


def _time_array(port: int, token: str) -> float | None:
    started = time.perf_counter()
    status, body = post_job(port, token, {**BODY, "array": 10_000}, timeout=120)
    elapsed = time.perf_counter() - started
    if status != 201 or json.loads(body)["count"] != 10_000:
        return None
    return round(elapsed, 3)


if __name__ == "__main__":
    main()
