"""Benchmark one full live scheduling cycle with its database and cluster I/O; prints JSON.

Scenario (seeded, the engine benchmark's cluster in `bench/cycle.py` written into
PostgreSQL and started on the cluster): 128 hosts x 8 GPUs, ~800 running jobs (each
with its open attempt), 10,000 pending jobs, 200 projects in a 3-level budget tree, a
week of ended attempts for fair-share usage. Each timed cycle is
`scheduler.cycle.worker.CycleWorker.run` (one worker, warm between cycles): read the cluster through its adapter, reconcile,
snapshot, plan (queue explained), apply, store the queue snapshot and the cycle
record. The cycles run back to back; the first one (which preempts the unprotected
work the scenario starts with) is reported apart.

The cluster is a simulated cluster process reached over HTTP (`--adapter simulated`,
the default), or the in-memory cluster of the tests on a clock moved 1 s per cycle
(`--adapter memory`: no network I/O).

Runs in a throwaway database (`test_<DATABASE_URL name>_bench`), created and dropped.
Usage: ``DATABASE_URL=... python bench/live_cycle.py [--cycles 20] [--seed 0] [--adapter memory]``
"""

from __future__ import annotations

import argparse
import datetime as dt
import importlib.util
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

from bench._server import test_database  # noqa: E402


def _engine_bench():
    spec = importlib.util.spec_from_file_location("bench_cycle", ROOT / "bench" / "cycle.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def tree_document(node) -> dict:
    doc = {"name": node.name}
    if node.children:
        doc["children"] = [dict(tree_document(c), weight=c.weight) for c in node.children]
    return doc


def populate(seed: int, now: dt.datetime, adapter_url: str = ""):
    """Write the engine benchmark's cluster into the database; returns (cluster, running
    attempts as (attempt id, placements, started_at))."""
    from django.contrib.auth import get_user_model

    from budgets.models import BudgetNode
    from budgets.services import budget_tree_import
    from scheduler.adapters.simcluster import host_names
    from scheduler.models import Attempt, AttemptEnd, AttemptState, Cluster, Host, Job, JobState

    engine = _engine_bench()
    snap = engine.make_snapshot(seed)
    epoch = now.timestamp() - 30 * 86400.0  # the engine bench's "now" is day 30
    at = lambda s: dt.datetime.fromtimestamp(epoch + s, dt.UTC)  # noqa: E731
    budget_tree_import(data=tree_document(snap.tree))
    leaf = {n.name: n.pk for n in BudgetNode.objects.filter(children__isnull=True)}
    user = get_user_model().objects.create(username="bench")
    cluster = Cluster.objects.create(
        name="bench",
        host_count=len(snap.hosts),
        gpus_per_host=8,
        cycle_s=10,
        adapter_url=adapter_url,
        adapter_options={"start_delay_s": 0, "exit_delay_s": 5},
    )
    # the simulated cluster's host names (h000, ...), in the engine benchmark's order
    name = dict(zip((h.name for h in snap.hosts), host_names(len(snap.hosts)), strict=True))
    Host.objects.bulk_create(
        Host(cluster=cluster, name=name[h.name], gpus=h.gpus) for h in snap.hosts
    )

    def job(w, state):
        return Job(
            cluster=cluster,
            project_id=leaf[w.project],
            submitter=user,
            name=w.id,
            gpus=w.gpus,
            min_runtime_s=int(w.min_runtime_s),
            resumable=w.resumable,
            priority=w.priority,
            submitted_at=at(w.submit_s),
            queued_at=at(w.submit_s),
            duration_s=7 * 86400,
            state=state,
            attempt_count=1 if state == JobState.RUNNING else 0,
        )

    running = Job.objects.bulk_create(job(rw.workload, JobState.RUNNING) for rw in snap.running)
    attempts = Attempt.objects.bulk_create(
        Attempt(
            job=j,
            number=1,
            attempt_id=f"bench-{j.pk}",
            cluster=cluster,
            project_id=j.project_id,
            gpus=j.gpus,
            placements=[
                {"host": name[p.host], "gpu_indices": list(p.gpu_indices)} for p in rw.placements
            ],
            allocated=rw.allocated,
            state=AttemptState.RUNNING,
            created_at=at(rw.started_s),
            started_at=at(rw.started_s),
        )
        for j, rw in zip(running, snap.running, strict=True)
    )
    Job.objects.bulk_create(job(w, JobState.PENDING) for lst in snap.pending.values() for w in lst)
    # a week of ended allocated runs, so fair-share usage is read from real history
    rng = random.Random(seed)
    history = Job.objects.bulk_create(
        job(rng.choice(snap.running).workload, JobState.SUCCEEDED) for _ in range(2000)
    )
    Attempt.objects.bulk_create(
        Attempt(
            job=j,
            number=1,
            attempt_id=f"bench-{j.pk}",
            cluster=cluster,
            project_id=j.project_id,
            gpus=j.gpus,
            placements=[],
            allocated=True,
            state=AttemptState.ENDED,
            end_reason=AttemptEnd.SUCCEEDED,
            created_at=(start := now - dt.timedelta(seconds=rng.uniform(3600, 7 * 86400))),
            started_at=start,
            ended_at=start + dt.timedelta(seconds=rng.uniform(600, 3600)),
        )
        for j in history
    )
    return cluster, [(a.attempt_id, a.placements, a.started_at) for a in attempts]


def start_on_simulated_cluster(cluster, running) -> None:
    """Register the cluster in the simulated cluster process and start the running
    attempts there (on their GPUs, for a week)."""
    from scheduler.adapters import ClusterPlacement, StartRequest
    from scheduler.adapters.simulated import adapter_for_cluster

    with adapter_for_cluster(cluster) as adapter:
        adapter.ensure_cluster()
        for attempt_id, placements, _ in running:
            pls = tuple(ClusterPlacement(p["host"], tuple(p["gpu_indices"])) for p in placements)
            adapter.start(
                StartRequest(
                    attempt_id=attempt_id,
                    job_name=attempt_id,
                    gpus=sum(len(p.gpu_indices) for p in pls),
                    placements=pls,
                    run_for_s=7 * 86400,
                )
            )


def memory_cluster(cluster, running, now):
    from scheduler.adapters import ClusterPlacement
    from tests.support.memcluster import MemoryCluster, _Job

    memory = MemoryCluster({h.name: h.gpus for h in cluster.hosts.all()}, now)
    for attempt_id, placements, started_at in running:
        memory.running[attempt_id] = _Job(
            attempt_id=attempt_id,
            placements=tuple(
                ClusterPlacement(p["host"], tuple(p["gpu_indices"])) for p in placements
            ),
            run_for_s=7 * 86400,
            started_at=started_at,
        )
    return memory


def run(cycles: int, seed: int, adapter_kind: str, workdir: Path) -> dict:
    from django.db import connection

    from scheduler.adapters.simcluster.process import SimClusterProcess
    from scheduler.core.engine import plan
    from scheduler.cycle.worker import CycleWorker
    from scheduler.models import Attempt, Job, JobState
    from scheduler.selectors.snapshot import cluster_snapshot

    now = dt.datetime.now(dt.UTC).replace(microsecond=0)
    sim = None
    if adapter_kind == "simulated":
        log = (workdir / "simcluster.log").open("wb")
        sim = SimClusterProcess(state_dir=workdir / "sim", log=log).start()
    try:
        t0 = time.perf_counter()
        cluster, running = populate(seed, now, sim.url if sim else "")
        if sim:
            start_on_simulated_cluster(cluster, running)
            adapter, clock = None, None  # each cycle opens the cluster's adapter itself
        else:
            adapter = memory_cluster(cluster, running, now)
            clock = now
        setup_s = time.perf_counter() - t0
        with connection.cursor() as cursor:
            cursor.execute("ANALYZE")
        worker = CycleWorker()
        first = worker.run(cluster_id=cluster.pk, now=clock, adapter=adapter)  # reported apart
        times, cpu, records, phases = [], [], [], {}
        for _ in range(cycles):
            if adapter is not None:
                clock = clock + dt.timedelta(seconds=1)
                adapter.advance(1)
            start, start_cpu = time.perf_counter(), time.process_time()
            record = worker.run(cluster_id=cluster.pk, now=clock, adapter=adapter)
            times.append((time.perf_counter() - start) * 1000.0)
            cpu.append((time.process_time() - start_cpu) * 1000.0)
            records.append(record)
            for k, v in record.phases_ms.items():
                phases.setdefault(k, []).append(v)
    finally:
        if sim:
            sim.stop()
            log.close()
    at = clock or dt.datetime.now(dt.UTC)
    # where the time goes, on the final state
    t = time.perf_counter()
    cs = cluster_snapshot(cluster=cluster, now=at)
    snapshot_ms = (time.perf_counter() - t) * 1000.0
    t = time.perf_counter()
    plan(cs.snapshot, cs.policy, cs.now)
    plan_ms = (time.perf_counter() - t) * 1000.0
    times.sort()
    return {
        "scenario": {
            "hosts": cluster.host_count,
            "gpus": cluster.host_count * 8,
            "pending": Job.objects.filter(cluster=cluster, state=JobState.PENDING).count(),
            "running": Attempt.objects.filter(cluster=cluster, ended_at__isnull=True).count(),
            "history_attempts": 2000,
            "adapter": (
                "simulated cluster process over HTTP"
                if adapter_kind == "simulated"
                else "in-memory cluster (no network)"
            ),
            "setup_s": round(setup_s, 1),
        },
        "target": {"median_ms": 200},
        "cycles": cycles,
        "median_ms": round(statistics.median(times), 1),
        "p90_ms": round(times[int(0.9 * (len(times) - 1))], 1),
        "max_ms": round(times[-1], 1),
        # CPU time of this process only (the database server's is not counted): less
        # sensitive to other work on a shared machine than the wall-clock figures
        "median_cpu_ms": round(statistics.median(cpu), 1),
        "first_cycle": {
            "ms": round(first.duration_ms, 1),
            "starts": first.starts,
            "stops": first.stops,
        },
        "starts": sum(r.starts for r in records),
        "stops": sum(r.stops for r in records),
        "errors": sorted({e for r in [first, *records] for e in r.errors})[:5],
        "phases_median_ms": {k: round(statistics.median(v), 1) for k, v in phases.items()},
        "final_state_ms": {"snapshot": round(snapshot_ms, 1), "plan": round(plan_ms, 1)},
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--cycles", type=int, default=20)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--adapter", choices=["simulated", "memory"], default="simulated")
    args = parser.parse_args()

    import django

    django.setup()
    with test_database("bench"), tempfile.TemporaryDirectory() as workdir:
        result = run(args.cycles, args.seed, args.adapter, Path(workdir))
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
