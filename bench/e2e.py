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
import json
import os
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings.test")

from bench._server import (  # noqa: E402
    member_token,
    post_job,
    production_env,
    start_gunicorn,
    stop_gunicorn,
    test_database,
)

DEBUG_JOB = {
    "project": "org/research/debugging",
    "cluster": "e2e",
    "name": "debug",
    "gpus": 1,
    "min_runtime_s": 900,
    "kind": "debug",
    "duration_s": 600,
}


def submit(port: int, token: str) -> int:
    """One debug job through the REST API; its id."""
    status, body = post_job(port, token, DEBUG_JOB, timeout=30, idempotency_key=False)
    if status != 201:
        raise RuntimeError(f"submission answered {status}: {body.decode(errors='replace')}")
    return json.loads(body)["jobs"][0]["id"]


def run(count: int, seed: int, workdir: Path, port: int) -> dict:
    from django.conf import settings
    from django.db import connection

    from scheduler.adapters.simcluster.control import SimClusterControl
    from scheduler.adapters.simcluster.process import SimClusterProcess
    from scheduler.models import Attempt
    from scheduler.services.clusters import cluster_create
    from tests.support.workers import WorkerProcess, test_database_url

    sim_log = (workdir / "simcluster.log").open("wb")
    sim = SimClusterProcess(state_dir=workdir / "sim", log=sim_log).start()
    worker = server = None
    try:
        token = member_token("research", "debugging")
        cluster = cluster_create(
            name="e2e", hosts=16, gpus_per_host=8, adapter_url=sim.url, cycle_s=3600
        )
        database_url = test_database_url()
        connection.close()  # the server and worker processes take it from here
        env = production_env(
            database_url,
            port=port,
            workers=2,
            var_dir=workdir / "var",
            redis_url=settings.REDIS_URL,
        )
        server = start_gunicorn(env, workdir / "gunicorn.log")
        worker = WorkerProcess(workdir, redis_url=settings.REDIS_URL).start()
        submit(port, token)  # warm a gunicorn worker and the cycle path
        rng = random.Random(seed)
        submitted: dict[int, float] = {}
        for _ in range(count):
            time.sleep(rng.uniform(0.2, 1.0))
            t = time.time()
            submitted[submit(port, token)] = t
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
            stop_gunicorn(server)
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
    with test_database("e2e"), tempfile.TemporaryDirectory() as workdir:
        result = run(args.jobs, args.seed, Path(workdir), args.port)
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
