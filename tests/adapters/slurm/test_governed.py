"""Governed sbatch against the real slurmctld (job_submit.lua enabled): jobs sbatch'd to
the `governed` partition are held and tagged by the plugin, adopted by Allot's cycle and
scheduled like any Allot job; other partitions are Slurm's own.

Slurm users: the local cluster runs every daemon as root, and `sbatch --uid` (root
only) submits as another local user: `cloudsdk` (uid 1000, an Allot member of a1) and
`nobody` (no Allot account)."""

from __future__ import annotations

import os
import shutil
import subprocess
import time

import pytest
from django.contrib.auth import get_user_model
from django.test import Client
from django.utils import timezone
from django.utils.html import escape
from rest_framework.test import APIClient

from budgets.models import Membership, Role
from ledger.selectors import window_usage
from scheduler.adapters.slurm import adapter_for_cluster, scontrol_word
from scheduler.models import (
    Attempt,
    AttemptEnd,
    AttemptState,
    Job,
    JobEvent,
    JobState,
    SlurmAdoption,
)
from scheduler.tasks import run_cycle
from tests.adapters.slurm.conftest import DrainsBeforeRelease
from tests.adapters.slurm.governed import MEMBER, adopted
from tests.support.live import assert_consistent

pytestmark = pytest.mark.django_db


def test_a_member_sbatch_is_adopted_and_runs_on_the_nodes_allot_chose(gov):
    slurm_id = gov.sbatch(
        "-p",
        "governed",
        "-A",
        "a1",
        "--gres=gpu:8",
        "--time-min=00:30:00",
        "--requeue",
        "-J",
        "train",
        command="sleep 1",
    )
    assert gov.raw(slurm_id)["state_reason"] == "JobHeldUser"  # held by the plugin
    record = gov.cycle()
    assert record.errors == []
    job = adopted(slurm_id)
    assert (job.project, job.submitter.username, job.gpus) == (gov.tree.node("a1"), MEMBER, 8)
    assert (job.min_runtime_s, job.resumable, job.name) == (1800, True, "train")
    attempt = Attempt.objects.get(job=job)
    for _ in range(200):
        gov.cycle()
        job.refresh_from_db()
        if job.state == JobState.SUCCEEDED:
            break
    assert job.state == JobState.SUCCEEDED, job.state_reason
    attempt.refresh_from_db()
    ran_on = gov.raw(slurm_id)["nodes"]
    assert attempt.host_names == [ran_on] and attempt.state == AttemptState.ENDED
    assert attempt.external_id == slurm_id
    usage = window_usage(
        cluster_id=gov.cluster.pk, now=timezone.now(), lookback_s=3600, half_life_s=None
    )
    runtime = (attempt.ended_at - attempt.started_at).total_seconds()
    assert usage[gov.tree.node("a1").pk] == pytest.approx(8 * runtime, rel=0.01)  # the ledger
    path = list(JobEvent.objects.filter(job=job).values_list("to_state", flat=True))
    assert path == ["pending", "starting", "running", "succeeded"]
    assert_consistent(gov.cluster)
    assert f"allot-attempt:{attempt.attempt_id}" in gov.show(slurm_id)  # Allot's ids in scontrol


def test_an_array_is_one_allot_array_and_a_waiting_job_shows_allot_s_answer(gov):
    array = gov.sbatch("-p", "governed", "-A", "a1", "--gres=gpu:8", "--array=0-16")
    gov.cycle()
    jobs = list(Job.objects.filter(cluster=gov.cluster).order_by("array_index"))
    assert len(jobs) == 17 and len({j.array_id for j in jobs}) == 1 and jobs[0].array_id
    assert [j.spec["slurm_job_id"] for j in jobs] == [f"{array}_{i}" for i in range(17)]
    running = [j for j in jobs if Attempt.objects.filter(job=j).exists()]
    assert len(running) == 16  # 16 nodes x 8 GPUs
    waiting = next(j for j in jobs if j not in running)
    queue = gov.api(gov.root).get("/api/v1/queue/", {"cluster": "gov"}).json()["results"]
    assert [(r["job"], r["project_path"], r["submitter"]) for r in queue] == [
        (waiting.pk, "org/prog-a/a1", MEMBER)
    ]
    gov.cycle()  # writes the waiting job's answer in its comment
    # the 16 started ones are Allot's attempts (some may still be pending in Slurm)
    # (ended jobs of earlier tests are listed too)
    shown = {
        k: v.split("|", 1)[1]
        for k, v in gov.squeue().items()
        if k.startswith(f"{array}_") and "|allot-attempt:" not in v
    }
    assert list(shown) == [waiting.spec["slurm_job_id"]]
    comment = shown[waiting.spec["slurm_job_id"]]
    # spaces are no-break spaces there (one scontrol writes every comment, see scontrol_word)
    assert comment == scontrol_word(waiting.slurm_adoption.comment)
    assert comment.split()[:2] == [f"allot-job:{waiting.pk}", "#1"], comment


@pytest.mark.parametrize(
    ("args", "user", "why"),
    [
        (("-A", "a2", "--gres=gpu:8"), MEMBER, "may not submit"),
        (("-A", "nosuch", "--gres=gpu:8"), MEMBER, "account 'nosuch' is no Allot project"),
        (("-A", "a1", "--gres=gpu:3"), MEMBER, "gpus is 3"),
        (("-A", "a1", "--gres=gpu:8", "--time-min=10:00:00"), MEMBER, "min_runtime_s"),
        (("-A", "a1", "--gres=gpu:8"), "nobody", "Slurm user 'nobody' has no Allot account"),
    ],
)
def test_a_job_allot_cannot_adopt_is_cancelled_with_the_reason_in_its_comment(gov, args, user, why):
    slurm_id = gov.sbatch("-p", "governed", *args, user=user)
    record = gov.cycle()
    assert not Job.objects.filter(cluster=gov.cluster).exists()
    refusal = SlurmAdoption.objects.get(slurm_job_id=slurm_id)
    assert why in refusal.refused and refusal.job is None
    # the cycle's record (every participant reads it) names the job, not its user or reason
    assert any(slurm_id in note and why not in note for note in record.errors)
    state, comment = gov.squeue()[slurm_id].split("|", 1)
    assert state == "CANCELLED" and comment.startswith("allot-refused:") and why in comment
    gov.cycle()
    assert SlurmAdoption.objects.filter(slurm_job_id=slurm_id).count() == 1
    # and its reader reads it (budgets.permissions.readable_sbatch_refusals): the member
    # their own refusals, the project's manager those on its account; the cluster in the
    # API, the Now page (tests/scheduler/test_sbatch_refusals.py: who reads what)
    reader = gov.member if user == MEMBER else gov.tree.user("pi-a1")
    api = APIClient()
    api.force_authenticate(reader)
    shown = api.get(f"/api/v1/clusters/{gov.cluster.pk}/").json()["sbatch_refusals"]
    assert [(r["slurm_job_id"], r["slurm_user"]) for r in shown] == [(slurm_id, user)]
    assert why in shown[0]["reason"] and shown[0]["account"] == args[1]
    page = Client()
    page.force_login(reader)
    html = page.get("/now/").content.decode()
    section = html.split("Refused sbatch jobs", 1)[1].split("</table>", 1)[0]
    assert f">{slurm_id}<" in section and escape(why) in section


def test_a_job_on_a_partition_that_is_not_governed_is_slurm_s_own(gov):
    slurm_id = gov.sbatch("-p", "gpu", "-A", "a1", "--gres=gpu:8")
    gov.cycle()
    assert gov.raw(slurm_id)["admin_comment"] == ""
    assert not SlurmAdoption.objects.exists() and not Job.objects.exists()
    deadline = time.monotonic() + 30
    while not gov.squeue()[slurm_id].startswith("RUNNING") and time.monotonic() < deadline:
        time.sleep(0.2)
    assert gov.squeue()[slurm_id].startswith("RUNNING")  # Slurm scheduled it itself
    assert not Job.objects.exists()  # and Allot only counts it as foreign


def test_a_plain_sbatch_to_a_governed_default_partition_is_held(gov):
    """`sbatch job.sh` without -p lands in Slurm's default partition (`gpu` here): when
    that partition is governed, the plugin holds and tags the job like one sbatch'd with
    -p (job_desc.partition is unset then: the plugin reads the default from part_list)."""
    plugin = gov.slurm.conf_path.parent / "job_submit.lua"
    as_shipped, loaded_mtime = plugin.read_text(), plugin.stat().st_mtime

    def install(text: str, later_s: float) -> None:
        # slurmctld reloads the script when its mtime (whole seconds) passes the last one
        plugin.write_text(text)
        os.utime(plugin, (loaded_mtime + later_s, loaded_mtime + later_s))

    install(as_shipped.replace('"governed"', '"governed,gpu"', 1), 2)
    try:
        slurm_id = gov.sbatch("-A", "a1", "--gres=gpu:8")
        job = gov.raw(slurm_id)
        assert job["partition"] == "gpu"
        assert (job["admin_comment"], job["state_reason"]) == ("allot-governed", "JobHeldUser")
    finally:
        install(as_shipped, 4)
    slurm_id = gov.sbatch("-A", "a1", "--gres=gpu:8")  # the default not governed: untouched
    assert gov.raw(slurm_id)["admin_comment"] == ""


def test_scancel_by_the_owner_cancels_the_waiting_allot_job(gov):
    gov.sbatch("-p", "governed", "-A", "a1", "--gres=gpu:8", "--array=0-15")
    waiting_id = gov.sbatch("-p", "governed", "-A", "a1", "--gres=gpu:8")
    gov.cycle()
    job = adopted(waiting_id)
    assert job.state == JobState.PENDING
    subprocess.run(["scancel", waiting_id], env=gov.slurm.client_env, check=True)
    gov.cycle()
    job.refresh_from_db()
    assert job.state == JobState.CANCELLED and "scancel" in job.state_reason


def test_an_allot_cancel_of_a_waiting_job_cancels_it_in_slurm(gov):
    gov.sbatch("-p", "governed", "-A", "a1", "--gres=gpu:8", "--array=0-15")
    waiting_id = gov.sbatch("-p", "governed", "-A", "a1", "--gres=gpu:8")
    gov.cycle()
    job = adopted(waiting_id)
    response = gov.api(gov.member).post(f"/api/v1/jobs/{job.pk}/cancel/")
    assert response.status_code in (200, 202), response.json()
    gov.cycle()
    assert gov.squeue()[waiting_id].startswith("CANCELLED")


def test_adopted_once_however_often_the_cycle_reads_it(gov):
    ids = [gov.sbatch("-p", "governed", "-A", "a1", "--gres=gpu:1") for _ in range(3)]
    for _ in range(3):
        gov.cycle()
    assert SlurmAdoption.objects.filter(slurm_job_id__in=ids).count() == 3
    assert Job.objects.filter(cluster=gov.cluster).count() == 3
    assert get_user_model().objects.filter(username=MEMBER).count() == 1


GRACEFUL = "trap 'echo saved; exit 0' TERM; sleep 300 & wait"


def _fill_with_sweeps(gov, *requeue: str) -> tuple[str, list[Job]]:
    """16 unallocated 8-GPU sweeps of b1 sbatch'd as root, running on every node."""
    gov.cluster.adapter_options = {**gov.cluster.adapter_options, "sbatch_min_runtime_s": 0}
    gov.cluster.save(update_fields=["adapter_options"])
    array = gov.sbatch(
        "-p",
        "governed",
        "-A",
        "b1",
        "--gres=gpu:8",
        "--array=0-15",
        *requeue,
        user="root",
        command=GRACEFUL,
    )
    gov.cycles_until(
        lambda: Job.objects.filter(cluster=gov.cluster, state=JobState.RUNNING).count() == 16
    )
    return array, list(Job.objects.filter(cluster=gov.cluster))


def _urgent(gov) -> Job:
    slurm_id = gov.sbatch(
        "-p", "governed", "-A", "a1", "--gres=gpu:8", "--time-min=1", command="sleep 2"
    )
    gov.cycle()
    return adopted(slurm_id)


def test_a_preempted_resumable_sbatch_job_is_requeued_held_in_slurm_and_runs_again(gov):
    _, sweeps = _fill_with_sweeps(gov, "--requeue")
    assert all(j.resumable and j.min_runtime_s == 0 for j in sweeps)
    urgent = _urgent(gov)
    gov.cycles_until(lambda: Job.objects.get(pk=urgent.pk).state == JobState.SUCCEEDED)
    victim = next(
        j
        for j in sweeps
        if Attempt.objects.filter(job=j).count() > 1
        or Job.objects.get(pk=j.pk).state != JobState.RUNNING
    )
    first = Attempt.objects.filter(job=victim).order_by("number").first()
    assert (first.end_reason, first.preempted_by_id) == (AttemptEnd.PREEMPTED, urgent.pk)
    gov.cycles_until(
        lambda: Attempt.objects.filter(job=victim, state=AttemptState.RUNNING).exists()
    )
    again = Attempt.objects.filter(job=victim).order_by("number").last()
    assert again.number == 2
    record = gov.raw(again.external_id)
    assert record["restart_cnt"] == 1 and record["job_state"] == "RUNNING"  # the same Slurm job
    assert f"{record['array_job_id']}_{record['array_task_id']}" == victim.spec["slurm_job_id"]


def test_a_preempted_sbatch_job_without_requeue_ends_preempted(gov):
    _, sweeps = _fill_with_sweeps(gov)
    assert not any(j.resumable for j in sweeps)
    urgent = _urgent(gov)
    gov.cycles_until(lambda: Job.objects.get(pk=urgent.pk).state == JobState.SUCCEEDED)
    victim = Job.objects.get(cluster=gov.cluster, state=JobState.PREEMPTED)
    attempt = Attempt.objects.get(job=victim)
    assert attempt.preempted_by_id == urgent.pk
    state = gov.squeue()[victim.spec["slurm_job_id"]].split("|")[0]
    assert state in ("COMPLETED", "CANCELLED")  # its trap ran, or the grace was over


def test_adopted_jobs_wait_in_fair_share_order_not_slurm_s(gov):
    Membership.objects.create(user=gov.member, node=gov.tree.node("a2"), role=Role.MEMBER)
    gov.sbatch("-p", "governed", "-A", "a1", "--gres=gpu:8", "--time-min=1", "--array=0-15")
    gov.cycles_until(
        lambda: Job.objects.filter(cluster=gov.cluster, state=JobState.RUNNING).count() == 16
    )
    first = gov.sbatch("-p", "governed", "-A", "a1", "--gres=gpu:8", "--time-min=1")
    later = gov.sbatch("-p", "governed", "-A", "a2", "--gres=gpu:8", "--time-min=1")
    gov.cycle()
    queue = gov.api(gov.root).get("/api/v1/queue/", {"cluster": "gov"}).json()["results"]
    ids = [r["job"] for r in queue]
    # a1 holds the whole cluster: a2's job, sbatch'd later, starts first
    assert ids == [adopted(later).pk, adopted(first).pk]


def test_a_waiting_job_slurm_forgets_is_cancelled_in_allot_as_lost(gov, slurm):
    gov.sbatch("-p", "governed", "-A", "a1", "--gres=gpu:8", "--array=0-15")
    waiting_id = gov.sbatch("-p", "governed", "-A", "a1", "--gres=gpu:8")
    gov.cycle()
    job = adopted(waiting_id)
    assert job.state == JobState.PENDING
    slurm.stop_ctld()  # and loses its saved state: it knows no job when it is back
    shutil.rmtree(slurm.base_dir / "state" / "ctld")
    (slurm.base_dir / "state" / "ctld").mkdir()
    slurm.start_ctld(clean=True)
    assert gov.squeue() == {}
    gov.cycle()
    job.refresh_from_db()
    assert job.state == JobState.CANCELLED and job.state_reason.startswith("lost: ")


def test_a_governed_start_slurm_keeps_pending_is_held_again_not_cancelled(gov, settings):
    """Slurm drains the node after Allot's plan, so the released sbatch job stays
    PENDING. Past the start timeout the cycle takes the start back: the researcher's
    Slurm job is held again (never scancel'd), the attempt ends start_failed, never
    run, and Allot starts the same Slurm job again later, where it runs."""
    settings.ALLOT_START_TIMEOUT_S = 0  # every wait is past it (set long again below)
    slurm_id = gov.sbatch(
        "-p", "governed", "-A", "a1", "--gres=gpu:8", "--time-min=1", command="sleep 1"
    )
    adapter = adapter_for_cluster(gov.cluster)
    adapter.client = DrainsBeforeRelease(slurm_conf=gov.slurm.conf_path)

    def cycle():
        record = run_cycle.worker.run(cluster_id=gov.cluster.pk, adapter=adapter)
        assert record is not None and record.errors == [], record.errors
        return record

    cycle()  # adopted and started: released on the node Slurm then drains
    job = adopted(slurm_id)
    first = Attempt.objects.get(job=job)
    assert first.host_names == adapter.client.drained
    cycle()  # Slurm keeps it pending: the start is taken back
    first.refresh_from_db()
    assert first.end_detail.startswith("start withdrawn: the cluster kept it waiting")
    settings.ALLOT_START_TIMEOUT_S = 3600  # the next start may take its time
    raw = gov.raw(slurm_id)
    assert raw["job_state"] == "PENDING" and raw["state_reason"].startswith("JobHeld")

    for _ in range(100):
        cycle()
        first.refresh_from_db()
        if first.state == AttemptState.ENDED:
            break
    assert (first.end_reason, first.started_at) == (AttemptEnd.START_FAILED, None)
    requeue = JobEvent.objects.get(job=job, from_state="starting", to_state="pending")
    assert requeue.reason.startswith("attempt 1 could not be started: start withdrawn")

    for _ in range(200):
        cycle()
        job.refresh_from_db()
        if job.state == JobState.SUCCEEDED:
            break
    assert job.state == JobState.SUCCEEDED, job.state_reason
    second = Attempt.objects.get(job=job, number=2)
    assert second.external_id == slurm_id  # the same Slurm job, never cancelled
    assert second.host_names != first.host_names
    assert gov.squeue()[slurm_id].startswith("COMPLETED")
    assert_consistent(gov.cluster)


def test_a_governed_job_stopped_before_slurm_ran_it_is_held_not_cancelled(gov):
    """A stop (a preemption's) of an adopted sbatch job Slurm still keeps pending, sbatch'd
    without --requeue: the job never ran, so it is held in Slurm (the researcher's job,
    never scancel'd) and the Allot job goes back to the queue, not to cancelled."""
    slurm_id = gov.sbatch(
        "-p", "governed", "-A", "a1", "--gres=gpu:8", "--time-min=1", command="sleep 1"
    )
    adapter = adapter_for_cluster(gov.cluster)
    adapter.client = DrainsBeforeRelease(slurm_conf=gov.slurm.conf_path)
    record = run_cycle.worker.run(cluster_id=gov.cluster.pk, adapter=adapter)
    assert record is not None and record.errors == [], record.errors
    job = adopted(slurm_id)
    attempt = Attempt.objects.get(job=job)
    assert gov.raw(slurm_id)["job_state"] == "PENDING"  # released on the node Slurm drained

    adapter.stop(attempt.attempt_id, 60.0)
    raw = gov.raw(slurm_id)
    assert raw["job_state"] == "PENDING" and raw["state_reason"].startswith("JobHeld")
    for _ in range(20):
        run_cycle.worker.run(cluster_id=gov.cluster.pk, adapter=adapter)
        attempt.refresh_from_db()
        if attempt.state == AttemptState.ENDED:
            break
    assert attempt.state == AttemptState.ENDED and attempt.started_at is None
    job.refresh_from_db()
    assert job.state in (JobState.PENDING, JobState.STARTING, JobState.RUNNING), job.state
    assert gov.squeue()[slurm_id].split("|")[0] != "CANCELLED"
