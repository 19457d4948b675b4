"""A governed job's owner cannot get around Allot (deploy/slurm/job_submit.lua), against
the real slurmctld: the owner, a real non-root process (`runuser`, so that slurmctld sees
their uid as the submitter, unlike root's `sbatch --uid`), can neither release their
held job nor skip the hold with a forged `allot-attempt:` comment; Allot still adopts
and starts the job."""

from __future__ import annotations

import subprocess

import pytest

from scheduler.models import Attempt, JobState, SlurmAdoption
from tests.adapters.slurm.governed import MEMBER, adopted

pytestmark = pytest.mark.django_db


def as_owner(gov, *command: str, script: str | None = None) -> subprocess.CompletedProcess:
    """Run a Slurm command as the member's own (non-root) process."""
    return subprocess.run(
        ["runuser", "-u", MEMBER, "--", "env", f"SLURM_CONF={gov.slurm.conf_path}", *command],
        input=script,
        env=gov.slurm.client_env,
        capture_output=True,
        text=True,
    )


def owner_sbatch(gov, *args: str, command: str = "sleep 1") -> str:
    done = as_owner(
        gov,
        "sbatch",
        "--parsable",
        "--chdir=/tmp",
        "--output=/dev/null",
        "-p",
        "governed",
        "-A",
        "a1",
        "--gres=gpu:8",
        *args,
        script=f"#!/bin/bash\n{command}\n",
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def run_to_success(gov, slurm_id: str) -> None:
    gov.cycles_until(lambda: adopted(slurm_id).state == JobState.SUCCEEDED)
    attempt = Attempt.objects.get(job=adopted(slurm_id))
    assert attempt.external_id == slurm_id  # Allot released the owner's own Slurm job


def test_the_owner_cannot_release_or_recomment_a_held_job_and_allot_still_starts_it(gov):
    slurm_id = owner_sbatch(gov)
    assert gov.raw(slurm_id)["state_reason"] == "JobHeldUser"
    tries = [
        ("scontrol", "release", slurm_id),
        ("scontrol", "hold", slurm_id),
        ("scontrol", "update", f"jobid={slurm_id}", "comment=allot-attempt:mine"),
    ]
    for command in tries:
        done = as_owner(gov, *command)
        assert done.returncode != 0 and "denied" in done.stderr.lower(), (command, done)
    job = gov.raw(slurm_id)
    assert (job["job_state"], job["state_reason"]) == ("PENDING", "JobHeldUser")
    assert job["comment"] in ("", None)  # nothing written by the owner
    # a change that does not release it stays the owner's to make
    assert as_owner(gov, "scontrol", "update", f"jobid={slurm_id}", "timelimit=30").returncode == 0
    run_to_success(gov, slurm_id)


def test_a_forged_allot_attempt_comment_is_dropped_and_the_job_held_and_adopted(gov):
    slurm_id = owner_sbatch(gov, "--comment=allot-attempt:forged")
    job = gov.raw(slurm_id)
    assert (job["job_state"], job["state_reason"]) == ("PENDING", "JobHeldUser")
    assert not str(job["comment"] or "").startswith("allot-")
    record = gov.cycle()
    assert record.errors == []
    assert SlurmAdoption.objects.get(slurm_job_id=slurm_id).job == adopted(slurm_id)
    assert adopted(slurm_id).submitter.username == MEMBER
    run_to_success(gov, slurm_id)


def test_the_owner_cannot_move_a_job_into_or_out_of_a_governed_partition(gov):
    # a held job of Slurm's own partition, moved into the governed one, would run there
    # unheld and unseen by Allot
    own = as_owner(
        gov,
        "sbatch",
        "--parsable",
        "--hold",
        "--chdir=/tmp",
        "--output=/dev/null",
        "-p",
        "gpu",
        "-A",
        "a1",
        "--gres=gpu:8",
        script="#!/bin/bash\nsleep 1\n",
    )
    assert own.returncode == 0, own.stderr
    own_id = own.stdout.strip()
    done = as_owner(gov, "scontrol", "update", f"jobid={own_id}", "partition=governed")
    assert done.returncode != 0 and "denied" in done.stderr.lower(), done
    assert gov.raw(own_id)["partition"] == "gpu"
    # nor may a governed job leave for a partition where Slurm alone schedules it
    slurm_id = owner_sbatch(gov)
    done = as_owner(gov, "scontrol", "update", f"jobid={slurm_id}", "partition=gpu")
    assert done.returncode != 0 and "denied" in done.stderr.lower(), done
    job = gov.raw(slurm_id)
    assert (job["partition"], job["state_reason"]) == ("governed", "JobHeldUser")
    gov.cycle()
    assert not SlurmAdoption.objects.filter(slurm_job_id=own_id).exists()  # not Allot's
    assert as_owner(gov, "scancel", own_id).returncode == 0
    run_to_success(gov, slurm_id)
