"""Scaling out the scheduler: cycles per second with one and with two Celery workers on
one database and broker, clusters spread across them; prints JSON.

Four simulated clusters (16 x 8 GPUs each, in one simulated cluster process) with
1,000 pending jobs each. For each worker count, the broker is kept fed with one
`run_cycle` per cluster for `--seconds`; the figure is completed cycles per second.
Afterwards it checks the rule that makes scaling out safe: cycles of one cluster never
overlapped (the advisory lock), whichever worker ran them.
Runs in a throwaway database (`test_<database name>_scale`) and the configured Redis.
Usage: ``DATABASE_URL=... REDIS_URL=... python bench/scale_workers.py [--seconds 30]``
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import random
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings.test")

from bench._server import test_database  # noqa: E402

CLUSTERS = 4
PENDING = 1000
TREE = {
    "name": "org",
    "children": [
        {
            "name": f"prog{p}",
            "weight": 1,
            "children": [{"name": f"proj{p}{q}", "weight": 1} for q in range(5)],
        }
        for p in range(4)
    ],
}


def seed(sim_url: str) -> list[int]:
    from django.contrib.auth import get_user_model
    from django.utils import timezone

    from budgets.models import BudgetNode
    from budgets.services import budget_tree_import
    from scheduler.models import Job, JobState
    from scheduler.services.clusters import cluster_create

    user = get_user_model().objects.create_user("bench", password="bench-password-1")
    budget_tree_import(data=TREE)
    projects = list(BudgetNode.objects.filter(name__startswith="proj"))
    rng = random.Random(0)
    now = timezone.now()
    ids = []
    for c in range(CLUSTERS):
        cluster = cluster_create(
            name=f"c{c}", hosts=16, gpus_per_host=8, adapter_url=sim_url, cycle_s=3600
        )
        ids.append(cluster.pk)
        Job.objects.bulk_create(
            Job(
                cluster=cluster,
                project=rng.choice(projects),
                submitter=user,
                name="scale",
                gpus=rng.choice([1, 2, 4, 8]),
                min_runtime_s=rng.choice([0, 600, 3600]),
                resumable=True,
                duration_s=rng.randint(3600, 36000),
                state=JobState.PENDING,
                submitted_at=now - dt.timedelta(seconds=i),
                queued_at=now - dt.timedelta(seconds=i),
            )
            for i in range(PENDING)
        )
    return ids


def measure(workers: int, cluster_ids: list[int], seconds: float, workdir: Path) -> dict:
    import redis
    from django.conf import settings

    from scheduler import tasks
    from scheduler.models import CycleRecord
    from tests.support.workers import WorkerProcess

    broker = redis.Redis.from_url(settings.CELERY_BROKER_URL)
    processes = [
        WorkerProcess(workdir, redis_url=settings.REDIS_URL).start() for _ in range(workers)
    ]
    try:
        before = CycleRecord.objects.filter(duration_ms__isnull=False).count()
        started = time.monotonic()
        while time.monotonic() - started < seconds:
            if broker.llen("celery") < len(cluster_ids):
                for cluster_id in cluster_ids:
                    tasks.run_cycle.apply_async((cluster_id,))
            time.sleep(0.02)
        done = CycleRecord.objects.filter(duration_ms__isnull=False).count() - before
        elapsed = time.monotonic() - started
        broker.delete("celery")
        time.sleep(3)  # the cycles in flight finish
    finally:
        for process in processes:
            process.stop()
    return {"workers": workers, "cycles": done, "cycles_per_s": round(done / elapsed, 2)}


def overlaps(cluster_ids: list[int]) -> int:
    from scheduler.models import CycleRecord

    count = 0
    for cluster_id in cluster_ids:
        spans = sorted(
            (r.started_at, r.started_at + dt.timedelta(milliseconds=r.duration_ms))
            for r in CycleRecord.objects.filter(cluster_id=cluster_id, duration_ms__isnull=False)
        )
        count += sum(
            1 for (_, end), (start, _) in zip(spans, spans[1:], strict=False) if start < end
        )
    return count


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seconds", type=float, default=30)
    args = parser.parse_args()

    import django

    django.setup()
    from django.db import connection

    from scheduler.adapters.simcluster.process import SimClusterProcess

    with test_database("scale"), tempfile.TemporaryDirectory() as tmp:
        workdir = Path(tmp)
        with (workdir / "sim.log").open("wb") as sim_log:
            sim = SimClusterProcess(state_dir=workdir / "sim", log=sim_log).start()
            try:
                cluster_ids = seed(sim.url)
                connection.close()  # the worker processes take it from here
                runs = [measure(n, cluster_ids, args.seconds, workdir) for n in (1, 2)]
                result = {
                    "scenario": {
                        "clusters": f"{CLUSTERS} simulated, 16 x 8 GPUs, {PENDING} pending each",
                        "seconds": args.seconds,
                        "cpus": os.cpu_count(),
                    },
                    "runs": runs,
                    "speedup_2_workers": round(
                        runs[1]["cycles_per_s"] / max(runs[0]["cycles_per_s"], 1e-9), 2
                    ),
                    "overlapping_cycles_of_one_cluster": overlaps(cluster_ids),
                }
            finally:
                sim.stop()
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
