"""Governed sbatch survives a worker killed anywhere: a cycle process (Allot's real
cycle, in its own process on the test database) is SIGKILLed at a random point of its
run 20 times while sbatch'd jobs arrive, then one clean worker goes on. No Slurm job
is adopted twice (one Allot job and one adoption row per Slurm id) and none is lost
(every sbatch'd job is an Allot job in the end).

Each cycle process is forked from one process that has set Django up (`FORKS`), as
a fresh process it starts with no connection, no cycle worker and no cycle run: the
20 kills cost 20 forks, not 20 interpreter and Django start-ups (a second each)."""

from __future__ import annotations

import contextlib
import os
import random
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from django.db.models import Count

from budgets.models import Membership, Role
from scheduler.models import Job, SlurmAdoption
from scheduler.services.clusters import cluster_create
from scheduler.tasks import run_cycle
from tests.factories import UserFactory
from tests.support import workers

pytestmark = pytest.mark.django_db(transaction=True)

ROOT = Path(__file__).resolve().parents[3]
# On "fork" forks a cycle process (it prints "ready" and runs cycles until killed); on
# "kill" SIGKILLs it, reaps it and prints "gone". The parent never opens a connection or
# makes the cycle worker (`run_cycle.worker` is made on first use), so every child
# starts as a fresh process would.
FORKS = """
import os, signal, sys, django
django.setup()
from django.db import connections
from scheduler.tasks import run_cycle
connections.close_all()
for line in sys.stdin:
    if line.strip() == "fork":
        pid = os.fork()
        if pid == 0:
            try:
                print("ready", flush=True)
                while True:
                    run_cycle.worker.run(cluster_id=int(sys.argv[1]))
            finally:
                os._exit(1)
    else:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        print("gone", flush=True)
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


@contextlib.contextmanager
def _forks(cluster_id: int, slurm) -> Iterator[subprocess.Popen]:
    """The process that forks the cycle processes (`FORKS`), stopped at the end."""
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "config.settings.test",
        "DATABASE_URL": workers.test_database_url(),
        "SLURM_CONF": str(slurm.conf_path),
    }
    proc = subprocess.Popen(
        [sys.executable, "-c", FORKS, str(cluster_id)],
        cwd=ROOT,
        env=env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        yield proc
    finally:
        proc.kill()
        proc.wait()


def _killed_cycle(forks: subprocess.Popen, rng: random.Random) -> None:
    """Fork a cycle process, let it run up to ~0.6 s past its start, SIGKILL it."""
    assert forks.stdin is not None and forks.stdout is not None
    forks.stdin.write("fork\n")
    forks.stdin.flush()
    assert forks.stdout.readline().strip() == "ready"
    try:
        time.sleep(rng.uniform(0.0, 0.6))  # a random point of its cycles
    finally:
        forks.stdin.write("kill\n")
        forks.stdin.flush()
        assert forks.stdout.readline().strip() == "gone"


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
    with _forks(cluster.pk, slurm) as forks:
        for _ in range(20):
            submitted += [
                _sbatch(slurm, rng.choice(["a1", "a2"])) for _ in range(rng.randint(2, 6))
            ]
            _killed_cycle(forks, rng)
    for _ in range(5):  # a clean worker goes on
        run_cycle.worker.run(cluster_id=cluster.pk)
    rows = SlurmAdoption.objects.filter(cluster=cluster)
    assert sorted(rows.values_list("slurm_job_id", flat=True)) == sorted(submitted)  # none lost
    assert not rows.exclude(refused="").exists()
    jobs = Job.objects.filter(cluster=cluster)
    assert jobs.count() == len(submitted)  # none twice
    assert set(rows.values_list("job_id", flat=True)) == set(jobs.values_list("pk", flat=True))
    assert not jobs.values("spec").annotate(n=Count("id")).filter(n__gt=1).exists()
