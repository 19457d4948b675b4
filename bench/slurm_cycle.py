"""Benchmark scheduling cycles against a real Slurm cluster; prints JSON.

Scenario (seeded): the local Slurm cluster of the tests (`scheduler.adapters.slurm_local`:
slurmctld + 16 slurmd x 8 GPUs = 128 GPUs, started here unless `--slurm-conf` names a
running one), added to Allot with `cluster_create(adapter="slurm")`, and 1,000 pending
jobs (1-8 GPUs, allocated and unallocated, 20 projects) whose command sleeps.

Cycle 1 starts what fits (every start is sbatch --hold + scontrol release); cycle 2,
once Slurm runs them, confirms the starts with the GPU indices Slurm gave; cycle 3 is
a steady one (nothing changes). For each: the cycle's wall time, the time spent in
Slurm's commands (per command) and, for cycle 1, starts per second of Slurm time and
of the whole cycle.

`--mode sbatch` (governed sbatch): the same cluster's `governed` partition, with
Allot's job_submit.lua; `--pending` jobs are sbatch'd there (held and tagged by the
plugin, as root, to the 20 projects' accounts), then cycles run until every one is
adopted (250 per cycle at most; the first starts what fits), then one more confirms
the starts, then cycles run until one writes no comment (every waiting job's answer
current; at most 15): that one is the steady cycle, the ones before it settling.
Reported: the adoption rate (jobs adopted per second of the cycles' adopt phases) and
each cycle's figures, with the comments it wrote; then `steady_cycles_with_etas`: ten
more cycles 15 s apart, each after an ETA refresh (the ETAs and shares in the answers
drift with the clock), and the comments each wrote.

At the end (both modes): `gpus_in_use`, the GPUs of Allot's attempts (api: RUNNING;
sbatch: every open one, starting and stopping too), beside `gpus_allocated_in_slurm`,
what Slurm reports its running jobs hold, and `gpus_shared_in_allot`, GPUs two open
attempts hold in Allot's books (must be 0). `gpus_in_use` above the cluster's GPUs was
a start on a host Allot believed had free GPUs (Slurm then kept it pending), fixed
with `scheduler.cycle.planned_gpus`.

Needs root (the daemons run as root) and Slurm installed (`make slurm`). Runs in a
throwaway database (`test_<DATABASE_URL name>_slurmbench`), created and dropped.
Usage: ``DATABASE_URL=... python bench/slurm_cycle.py [--pending 1000] [--seed 0]``
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings.test")

from bench._server import test_database  # noqa: E402

if TYPE_CHECKING:
    from scheduler.adapters.slurm_local import LocalSlurm

GPU_MIX = [(1, 0.5), (2, 0.25), (4, 0.15), (8, 0.10)]
# governed sbatch: cycles after the confirming one, until one writes no comment
MAX_SETTLING = 15
# then cycles of the standing queue, with ETAs refreshed before each (`steady_cycles`)
STEADY_CYCLES = 10
STEADY_PAUSE_S = 15.0


def tree_document(programs: int = 4, projects: int = 5) -> dict:
    return {
        "name": "org",
        "children": [
            {
                "name": f"prog{p}",
                "weight": 1 + p,
                "children": [{"name": f"p{p}-{q}", "weight": 1 + (q % 3)} for q in range(projects)],
            }
            for p in range(programs)
        ],
    }


def populate(cluster, pending: int, seed: int) -> None:
    """`pending` jobs spread over the tree's projects (their first events too)."""
    from django.contrib.auth import get_user_model
    from django.utils import timezone

    from budgets.models import BudgetNode
    from budgets.services import budget_tree_import
    from scheduler.models import Job, JobEvent, JobState

    budget_tree_import(data=tree_document())
    projects = list(BudgetNode.objects.filter(children__isnull=True, parent__isnull=False))
    user = get_user_model().objects.create(username="bench")
    rng = random.Random(seed)
    sizes, weights = zip(*GPU_MIX, strict=True)
    now = timezone.now()
    jobs = Job.objects.bulk_create(
        Job(
            cluster=cluster,
            project=rng.choice(projects),
            submitter=user,
            name=f"bench-{i}",
            gpus=rng.choices(sizes, weights)[0],
            min_runtime_s=rng.choice([0, 600, 3600]),
            resumable=rng.random() < 0.5,
            priority=rng.randint(0, 3),
            spec={"command": "sleep 600"},
            submitted_at=now,
            queued_at=now,
            state=JobState.PENDING,
        )
        for i in range(pending)
    )
    JobEvent.objects.bulk_create(
        JobEvent(job=j, at=now, from_state="", to_state=JobState.PENDING, reason="submitted")
        for j in jobs
    )


def one_cycle(cluster, worker) -> dict:
    """One cycle through a fresh adapter (as the worker does); its figures."""
    from scheduler.adapters.slurm import adapter_for_cluster

    adapter = adapter_for_cluster(cluster)
    written: list[int] = []
    annotate = adapter.annotate

    def counted(comments):  # the waiting jobs' comments the cycle writes in Slurm
        written.append(len(comments))
        return annotate(comments)

    adapter.annotate = counted
    t = time.perf_counter()
    record = worker.run(cluster_id=cluster.pk, adapter=adapter)
    wall_s = time.perf_counter() - t
    stats = adapter.client.stats
    # a start is sbatch --hold + scontrol release (cycle 1 runs no other scontrol)
    slurm_start_s = sum(stats.by_command.get(c, [0, 0.0])[1] for c in ("sbatch", "scontrol"))
    out = {
        "wall_ms": round(wall_s * 1000.0, 1),
        "starts": record.starts,
        "stops": record.stops,
        "reconciled": record.reconciled,
        "errors": record.errors[:3],
        "slurm_calls": stats.calls,
        "slurm_ms": round(stats.seconds * 1000.0, 1),
        "slurm_ms_by_command": {
            k: {"calls": n, "ms": round(s * 1000.0, 1)}
            for k, (n, s) in sorted(stats.by_command.items())
        },
        "phases_ms": getattr(record, "phases_ms", {}),
        "comments_written": sum(written),
    }
    if record.starts:
        out["starts_per_s_of_slurm_time"] = round(record.starts / slurm_start_s, 1)
        out["starts_per_s_of_cycle"] = round(record.starts / wall_s, 1)
    return out


def slurm_allocated_gpus(adapter) -> int:
    """GPUs Slurm itself reports allocated (squeue's GPU indices of the jobs it runs),
    to set beside `gpus_in_use`, Allot's count of its open attempts' GPUs."""
    return sum(len(p.gpu_indices) for cj in adapter.jobs() if not cj.ended for p in cj.placements)


def shared_gpus(cluster) -> int:
    """GPUs (host, index) that two open attempts hold in Allot's books (0 unless the
    GPUs Slurm gave and those Allot planned got mixed up: `scheduler.cycle.planned_gpus`)."""
    from collections import Counter

    from scheduler.models import Attempt, AttemptState

    held = Counter(
        (p["host"], i)
        for placements in Attempt.objects.filter(cluster=cluster)
        .exclude(state=AttemptState.ENDED)
        .values_list("placements", flat=True)
        for p in placements
        for i in p["gpu_indices"]
    )
    return sum(1 for n in held.values() if n > 1)


def local_cluster(slurm_conf: str | None) -> tuple[LocalSlurm | None, str]:
    """The cluster to drive: `slurm_conf`'s, or a local test cluster started (and
    returned, for the caller to stop) when none is given."""
    from scheduler.adapters.slurm_local import LocalSlurm, install_slurm

    if slurm_conf is not None:
        return None, slurm_conf
    reason = install_slurm()
    if reason:
        raise SystemExit(f"no local Slurm cluster: {reason}")
    local = LocalSlurm.create()
    local.start()
    return local, str(local.conf_path)


def run(pending: int, seed: int, slurm_conf: str | None) -> dict:
    from scheduler.cycle.worker import CycleWorker
    from scheduler.models import Attempt, AttemptState
    from scheduler.services.clusters import cluster_create

    local, slurm_conf = local_cluster(slurm_conf)
    workdir = Path(slurm_conf).parent.parent / "jobs"
    workdir.mkdir(exist_ok=True)
    try:
        worker = CycleWorker()  # a worker that starts cold
        cluster = cluster_create(
            name="slurm-bench",
            adapter="slurm",
            gpus_per_host=None,
            adapter_options={"slurm_conf": slurm_conf, "workdir": str(workdir)},
        )
        populate(cluster, pending, seed)
        first = one_cycle(cluster, worker)
        # wait until Slurm runs every started job, then confirm them
        deadline = time.monotonic() + 60
        started = Attempt.objects.filter(cluster=cluster)
        from scheduler.adapters.slurm import adapter_for_cluster

        adapter = adapter_for_cluster(cluster)
        ids = set(started.values_list("attempt_id", flat=True))
        while time.monotonic() < deadline:
            running = {j.attempt_id for j in adapter.jobs() if j.state == "running"}
            if ids <= running:
                break
            time.sleep(0.5)
        second = one_cycle(cluster, worker)
        third = one_cycle(cluster, worker)
        return {
            "scenario": {
                "slurm": adapter.client.version(),
                "hosts": cluster.host_count,
                "gpus": cluster.gpu_capacity,
                "pending_before": pending,
                "local_cluster": local is not None,
            },
            "cycle_1_starts": first,
            "cycle_2_confirms": second,
            "cycle_3_steady": third,
            "running_attempts": started.filter(state=AttemptState.RUNNING).count(),
            "gpus_in_use": sum(a.gpus for a in started.filter(state=AttemptState.RUNNING)),
            "gpus_allocated_in_slurm": slurm_allocated_gpus(adapter),
            "gpus_shared_in_allot": shared_gpus(cluster),
        }
    finally:
        if local is not None:
            local.stop(remove=True)


def sbatch_jobs(slurm_conf: str, accounts: list[str], count: int, seed: int) -> float:
    """sbatch `count` jobs to the governed partition (8 at a time); the seconds it took."""
    import subprocess
    from concurrent.futures import ThreadPoolExecutor

    rng = random.Random(seed)
    sizes, weights = zip(*GPU_MIX, strict=True)
    env = {**os.environ, "SLURM_CONF": slurm_conf}
    args = [
        [
            "sbatch",
            "--parsable",
            "-p",
            "governed",
            "--chdir=/tmp",
            "--output=/dev/null",
            f"--account={rng.choice(accounts)}",
            f"--gres=gpu:{rng.choices(sizes, weights)[0]}",
            f"--time-min={rng.choice([1, 10, 60])}",
            *(["--requeue"] if rng.random() < 0.5 else []),
            f"--job-name=sb-{i}",
        ]
        for i in range(count)
    ]

    def one(a: list[str]) -> None:
        subprocess.run(
            a, input="#!/bin/bash\nsleep 600\n", env=env, text=True, capture_output=True, check=True
        )

    t = time.perf_counter()
    with ThreadPoolExecutor(8) as pool:
        list(pool.map(one, args))
    return time.perf_counter() - t


def run_sbatch(pending: int, seed: int, slurm_conf: str | None) -> dict:
    """Governed sbatch: `pending` jobs sbatch'd, adopted and started by Allot's cycles."""
    from django.contrib.auth import get_user_model

    from budgets.services import budget_tree_import
    from scheduler.adapters.slurm import adapter_for_cluster
    from scheduler.cycle.worker import CycleWorker
    from scheduler.models import Attempt, AttemptState, Job, SlurmAdoption
    from scheduler.services.clusters import cluster_create
    from scheduler.services.slurm import project_accounts

    local, slurm_conf = local_cluster(slurm_conf)
    try:
        worker = CycleWorker()
        cluster = cluster_create(
            name="slurm-sbatch-bench",
            adapter="slurm",
            gpus_per_host=None,
            adapter_options={"slurm_conf": slurm_conf, "partition": "governed"},
        )
        budget_tree_import(data=tree_document())
        get_user_model().objects.create(username="root", is_superuser=True, is_staff=True)
        sbatch_s = sbatch_jobs(slurm_conf, sorted(project_accounts()), pending, seed)
        cycles = []  # until every job is adopted, then a confirming and a steady one
        while len(cycles) < 20 and Job.objects.filter(cluster=cluster).count() < pending:
            cycles.append(one_cycle(cluster, worker))
        cycles.append(one_cycle(cluster, worker))  # confirms the starts
        # then cycles until one writes no comment (the waiting jobs' answers all current)
        settling = [one_cycle(cluster, worker)]
        while len(settling) < MAX_SETTLING and "scontrol" in settling[-1]["slurm_ms_by_command"]:
            settling.append(one_cycle(cluster, worker))
        cycles.append(settling[-1])
        steady = steady_cycles(cluster, worker)
        adopt_ms = sum(c["phases_ms"].get("adopt", 0.0) for c in cycles)
        adopted = SlurmAdoption.objects.filter(cluster=cluster, job__isnull=False).count()
        running = Attempt.objects.filter(cluster=cluster).exclude(state=AttemptState.ENDED)
        return {
            "scenario": {
                "slurm": adapter_for_cluster(cluster).client.version(),
                "gpus": cluster.gpu_capacity,
                "sbatch_jobs": pending,
                "sbatch_s": round(sbatch_s, 1),
            },
            "adopted": adopted,
            "refused": SlurmAdoption.objects.filter(cluster=cluster, job__isnull=True).count(),
            "adopt_phase_ms": adopt_ms,
            "adoption_rate_jobs_per_s": round(adopted / (adopt_ms / 1000.0), 1)
            if adopt_ms
            else None,
            "adopting_cycles": len(cycles) - 2,
            "cycle_1_adopt_and_start": cycles[0],
            "adopting_cycles_wall_ms": [c["wall_ms"] for c in cycles[:-2]],
            "cycle_confirms": cycles[-2],
            "settling_cycles_wall_ms": [c["wall_ms"] for c in settling[:-1]],
            "settling_cycles_scontrol_ms": [
                c["slurm_ms_by_command"]["scontrol"]["ms"] for c in settling[:-1]
            ],
            "cycle_steady": cycles[-1],
            "steady_cycles_with_etas": {
                "cycles": len(steady),
                "pause_s": STEADY_PAUSE_S,
                "comments_written": [c["comments_written"] for c in steady],
                "starts_stops": [(c["starts"], c["stops"]) for c in steady],
                "wall_ms": [c["wall_ms"] for c in steady],
            },
            "allot_jobs": Job.objects.filter(cluster=cluster).count(),
            "gpus_in_use": sum(a.gpus for a in running),
            "gpus_allocated_in_slurm": slurm_allocated_gpus(adapter_for_cluster(cluster)),
            "gpus_shared_in_allot": shared_gpus(cluster),
            "waiting_comments_written": SlurmAdoption.objects.exclude(comment="").count(),
        }
    finally:
        if local is not None:
            local.stop(remove=True)


def steady_cycles(cluster, worker) -> list[dict]:
    """STEADY_CYCLES cycles STEADY_PAUSE_S apart on the wall clock after the queue
    settled, each after an ETA refresh (as the worker's `refresh_etas` task runs in
    production): what a standing queue costs in comment writes per cycle, its answers
    carrying ETAs and shares that drift with the clock."""
    from scheduler.services.eta import cluster_etas

    out = []
    for _ in range(STEADY_CYCLES):
        time.sleep(STEADY_PAUSE_S)
        cluster_etas(cluster=cluster, fresh=True)
        out.append(one_cycle(cluster, worker))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--pending", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--mode", choices=["api", "sbatch"], default="api")
    parser.add_argument("--slurm-conf", help="a running cluster's slurm.conf (default: start one)")
    args = parser.parse_args()

    import django

    django.setup()
    with test_database("slurmbench"):
        runner = run_sbatch if args.mode == "sbatch" else run
        result = runner(args.pending, args.seed, args.slurm_conf)
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
