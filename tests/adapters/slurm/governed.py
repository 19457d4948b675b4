"""Governed sbatch on the local Slurm cluster: an Allot cluster on its `governed`
partition (`Governed`, the `gov` fixture of tests/adapters/slurm/conftest.py), the local
user who sbatches as an Allot member, and the Allot job a Slurm job was adopted as;
shared by the governed-partition tests."""

from __future__ import annotations

import pwd
import subprocess
import time

import pytest
from rest_framework.test import APIClient

from budgets.models import Membership, Role
from scheduler.adapters.slurm import SlurmClient
from scheduler.adapters.slurm.parsing import slurm_id_of
from scheduler.models import (
    Attempt,
    Job,
    SlurmAdoption,
)
from scheduler.services.clusters import cluster_create
from scheduler.tasks import run_cycle
from tests.factories import SuperUserFactory, UserFactory

MEMBER = "cloudsdk"


def _uid(name: str) -> int:
    try:
        return pwd.getpwnam(name).pw_uid
    except KeyError:
        pytest.fail(f"the local user {name!r} is needed to sbatch as someone else")


class Governed:
    """An Allot cluster on the `governed` partition and a way to sbatch into Slurm."""

    def __init__(self, tree, slurm, workdir) -> None:
        run_cycle.worker.reset()
        self.tree, self.slurm, self.workdir = tree, slurm, workdir
        self.cluster = cluster_create(
            name="gov",
            adapter="slurm",
            gpus_per_host=None,
            grace_s=2,
            adapter_options={
                "slurm_conf": str(slurm.conf_path),
                "partition": "governed",
                "workdir": str(workdir),
            },
        )
        self.client = SlurmClient(slurm_conf=slurm.conf_path)
        self.root = SuperUserFactory(username="root")
        self.member = UserFactory(username=MEMBER)
        Membership.objects.create(user=self.member, node=tree.node("a1"), role=Role.MEMBER)

    def sbatch(self, *args: str, user: str = MEMBER, command: str = "sleep 300") -> str:
        """sbatch a script as `user`; the Slurm job id (an array's: its array job id)."""
        out = subprocess.run(
            [
                "sbatch",
                "--parsable",
                f"--uid={_uid(user)}",
                "--chdir=/tmp",
                "--output=/dev/null",
                *args,
            ],
            input=f"#!/bin/bash\n{command}\n",
            env=self.slurm.client_env,
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        return out.strip().split(";")[0]

    def cycle(self):
        record = run_cycle.worker.run(cluster_id=self.cluster.pk)
        assert record is not None
        return record

    def cycles_until(self, done, *, timeout_s: float = 90) -> None:
        """Run cycles (each without errors) until `done()`."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            record = self.cycle()
            assert record.errors == [], (
                record.errors,
                list(
                    Attempt.objects.values_list("attempt_id", "state", "end_reason", "end_detail")
                ),
            )
            if done():
                return
            time.sleep(0.3)
        states = list(Job.objects.values_list("pk", "state", "state_reason"))
        raise AssertionError(f"not done after {timeout_s} s: {states}")

    def squeue(self) -> dict[str, str]:
        """{job id as squeue shows it: "state|comment"}."""
        out = subprocess.run(
            ["squeue", "--noheader", "--states=all", "--format=%i|%T|%k"],
            env=self.slurm.client_env,
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        rows = (line.split("|", 1) for line in out.splitlines() if line.strip())
        return {job_id.strip(): rest for job_id, rest in rows}

    def show(self, slurm_id: str) -> str:
        return subprocess.run(
            ["scontrol", "show", "job", slurm_id],
            env=self.slurm.client_env,
            capture_output=True,
            text=True,
        ).stdout

    def raw(self, slurm_id: str) -> dict:
        return next(j for j in self.client.jobs() if slurm_id in (str(j["job_id"]), slurm_id_of(j)))

    def api(self, user) -> APIClient:
        client = APIClient()
        client.force_authenticate(user)
        return client


def adopted(slurm_id: str) -> Job:
    return SlurmAdoption.objects.select_related("job").get(slurm_job_id=slurm_id).job
