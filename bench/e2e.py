"""Benchmark submit -> start on the cluster for debug jobs; prints JSON.

The real path with real processes: a debug job is posted to `POST /api/v1/jobs/` on
gunicorn (production settings), whose submit service asks for a cycle after its
commit; a Celery worker process takes the cycle from Redis and starts the job through
the simulated cluster process. The time measured is from just before the HTTP request
to the moment the simulated cluster received the start (its own record of the job).
Debug jobs (1 GPU, 15 min minimum runtime) are posted one at a time, 0.2-1 s apart, on
a 16 x 8 GPU cluster with free GPUs; beat is not running, so every start comes from
the cycle the submission asked for.

Runs in a throwaway database (`test_<database name>_e2e`) and the configured Redis
(`REDIS_URL`, or the embedded one); starts and stops its own gunicorn, worker and
simulated cluster processes (gunicorn on `--port`, 8601 by default).
Usage: ``DATABASE_URL=... REDIS_URL=... python bench/e2e.py [--jobs 50] [--seed 0]``
"""

from __future__ import annotations

import argparse
import datetime as dt
import http.client
import json
import os
import random
import secrets
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings.test")

TREE = {
    "name": "org",
    "children": [
        {
            "name": "research",
            "weight": 1,
            "children": [{"name": "debugging", "weight": 1, "members": ["bench"]}],
        }
    ],
}


def post_job(port: int, token: str) -> int:
    """One debug job through the REST API; its id."""
    body = {
        "project": "org/research/debugging",
        "cluster": "e2e",
        "name": "debug",
        "gpus": 1,
        "min_runtime_s": 900,
        "kind": "debug",
        "duration_s": 600,
    }
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        conn.request(
            "POST",
            "/api/v1/jobs/",
            body=json.dumps(body),
            headers={"Authorization": f"Token {token}", "Content-Type": "application/json"},
        )
        response = conn.getresponse()
        data = json.loads(response.read())
    finally:
        conn.close()
    if response.status != 201:
        raise RuntimeError(f"submission answered {response.status}: {data}")
    return data["jobs"][0]["id"]


def start_gunicorn(port: int, workdir: Path, database_url: str, redis_url: str):
    env = dict(
        os.environ,
        DATABASE_URL=database_url,
        REDIS_URL=redis_url,
        CELERY_BROKER_URL=redis_url,
        CELERY_RESULT_BACKEND=redis_url,
        DJANGO_SETTINGS_MODULE="config.settings.production",
        SECRET_KEY=secrets.token_urlsafe(50),
        ALLOWED_HOSTS="127.0.0.1,localhost",
        ALLOT_SSL_REDIRECT="false",
        ALLOT_PORT=str(port),
        WEB_CONCURRENCY="2",
        ALLOT_VAR_DIR=str(workdir / "var"),
    )
    log = (workdir / "gunicorn.log").open("wb")
    server = subprocess.Popen(
        [str(Path(sys.executable).parent / "gunicorn"), "config.wsgi", "-c", "config/gunicorn.py"],
        cwd=ROOT,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    log.close()
    for _ in range(240):
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=2)
            return server
        except OSError:
            time.sleep(0.25)
    server.terminate()
    raise RuntimeError(f"gunicorn did not answer; see {workdir / 'gunicorn.log'}")


def run(count: int, seed: int, workdir: Path, port: int) -> dict:
    from django.conf import settings
    from django.contrib.auth import get_user_model
    from django.db import connection

    from accounts.services import token_create
    from budgets.services import budget_tree_import
    from scheduler.models import Attempt
    from scheduler.services.clusters import cluster_create
    from scheduler.simcluster.control import SimClusterControl
    from scheduler.simcluster.process import SimClusterProcess
    from tests.live.workers import WorkerProcess, test_database_url

    sim_log = (workdir / "simcluster.log").open("wb")
    sim = SimClusterProcess(state_dir=workdir / "sim", log=sim_log).start()
    worker = server = None
    try:
        user = get_user_model().objects.create_user("bench", password="bench-password-1")
        budget_tree_import(data=TREE)
        token = token_create(user=user, name="bench")[1]
        cluster = cluster_create(
            name="e2e", hosts=16, gpus_per_host=8, adapter_url=sim.url, cycle_s=3600
        )
        database_url = test_database_url()
        connection.close()  # the server and worker processes take it from here
        server = start_gunicorn(port, workdir, database_url, settings.REDIS_URL)
        worker = WorkerProcess(workdir, redis_url=settings.REDIS_URL).start()
        post_job(port, token)  # warm a gunicorn worker and the cycle path
        rng = random.Random(seed)
        submitted: dict[int, float] = {}
        for _ in range(count):
            time.sleep(rng.uniform(0.2, 1.0))
            t = time.time()
            submitted[post_job(port, token)] = t
        deadline = time.monotonic() + 60
        with SimClusterControl(sim.url, "e2e") as control:
            while time.monotonic() < deadline:
                started = {j["attempt_id"]: j["submitted_at"] for j in control.jobs()}
                if len(started) > count:
                    break
                time.sleep(0.2)
        job_of = dict(Attempt.objects.filter(cluster=cluster).values_list("attempt_id", "job_id"))
        latency = sorted(
            dt.datetime.fromisoformat(at).timestamp() - submitted[job_of[attempt_id]]
            for attempt_id, at in started.items()
            if job_of.get(attempt_id) in submitted
        )
    finally:
        if worker is not None:
            worker.stop()
        if server is not None:
            server.terminate()
            server.wait(30)
        sim.stop()
        sim_log.close()
        connection.close()
    p90 = latency[min(len(latency) - 1, int(round(0.9 * (len(latency) - 1))))] if latency else None
    return {
        "scenario": {
            "jobs": count,
            "started": len(latency),
            "cluster": "16 x 8 GPUs, free",
            "path": "POST /api/v1/jobs/ on gunicorn -> on_commit request_cycle -> Redis -> "
            "Celery worker process -> cycle -> simulated cluster process",
        },
        "target": {"p90_s": 2.0},
        "p50_s": round(statistics.median(latency), 3) if latency else None,
        "p90_s": round(p90, 3) if p90 is not None else None,
        "max_s": round(latency[-1], 3) if latency else None,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--jobs", type=int, default=50)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--port", type=int, default=8601)
    args = parser.parse_args()

    import django

    django.setup()
    from django.conf import settings
    from django.test.utils import setup_databases, teardown_databases

    db = settings.DATABASES["default"]
    db["TEST"]["NAME"] = f"test_{db['NAME']}_e2e"
    config = setup_databases(verbosity=0, interactive=False)
    try:
        with tempfile.TemporaryDirectory() as workdir:
            result = run(args.jobs, args.seed, Path(workdir), args.port)
    finally:
        teardown_databases(config, verbosity=0)
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
