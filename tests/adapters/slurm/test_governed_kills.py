"""Governed sbatch survives a worker killed anywhere: a cycle process (Allot's real
cycle, in its own process on the test database) is SIGKILLed at a random point of its
run 20 times while sbatch'd jobs arrive, then one clean worker goes on. No Slurm job
is adopted twice (one Allot job and one adoption row per Slurm id) and none is lost
(every sbatch'd job is an Allot job in the end)."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from django.db.models import Count

from budgets.models import Membership, Role
from scheduler.models import Job, SlurmAdoption
from scheduler.services.clusters import cluster_create
from scheduler.tasks import run_cycle
from tests.factories import UserFactory
from tests.live import workers

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.xdist_group("slurm")]

ROOT = Path(__file__).resolve().parents[3]
CYCLES = """
import os, sys, django
django.setup()
from scheduler.tasks import run_cycle
print("ready", flush=True)
while True:
    run_cycle.worker.run(cluster_id=int(sys.argv[1]))
"""


def _sbatch(slurm, account: str) -> str:
    out = subprocess.run(
        ["sbatch", "--parsable", "--uid=1000", "--chdir=/tmp", "--output=/dev/null"]
        + ["-p", "governed", "-A", account, "--gres=gpu:1", "--time-min=1"],
        input="#!/bin/bash\nsleep 600\n",
        env=slurm.client_env,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return out.strip()


def _killed_cycle(cluster_id: int, slurm, rng: random.Random) -> None:
    """Start a cycle process, let it run up to ~0.6 s past its start-up, SIGKILL it."""
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "config.settings.test",
        "DATABASE_URL": workers.test_database_url(),
        "SLURM_CONF": str(slurm.conf_path),
    }
    proc = subprocess.Popen(
        [sys.executable, "-c", CYCLES, str(cluster_id)],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
        time.sleep(rng.uniform(0.0, 0.6))  # a random point of its cycles
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()


def test_a_worker_killed_at_random_points_adopts_every_job_once(tree, slurm):
    run_cycle.worker.reset()
    cluster = cluster_create(
        name="gov",
        adapter="slurm",
        gpus_per_host=None,
        grace_s=2,
        adapter_options={"slurm_conf": str(slurm.conf_path), "partition": "governed"},
    )
    member = UserFactory(username="cloudsdk")
    for project in ("a1", "a2"):
        Membership.objects.create(user=member, node=tree.node(project), role=Role.MEMBER)
    rng = random.Random(27)
    submitted: list[str] = []
    for _ in range(20):
        submitted += [_sbatch(slurm, rng.choice(["a1", "a2"])) for _ in range(rng.randint(2, 6))]
        _killed_cycle(cluster.pk, slurm, rng)
    for _ in range(5):  # a clean worker goes on
        run_cycle.worker.run(cluster_id=cluster.pk)
    rows = SlurmAdoption.objects.filter(cluster=cluster)
    assert sorted(rows.values_list("slurm_job_id", flat=True)) == sorted(submitted)  # none lost
    assert not rows.exclude(refused="").exists()
    jobs = Job.objects.filter(cluster=cluster)
    assert jobs.count() == len(submitted)  # none twice
    assert set(rows.values_list("job_id", flat=True)) == set(jobs.values_list("pk", flat=True))
    assert not jobs.values("spec").annotate(n=Count("id")).filter(n__gt=1).exists()
