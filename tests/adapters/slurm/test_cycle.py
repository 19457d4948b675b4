"""Allot's scheduling cycle (`CycleWorker.run`) driving a real Slurm cluster, with jobs
submitted and hosts drained through Allot's REST API.

The Allot cluster is the local cluster's `pair` partition (gpu01, gpu02: 16 GPUs), so
that a few jobs fill it (`trio`, gpu03-05, for a move); cycles run on the wall clock, as
the worker runs them."""

from __future__ import annotations

import datetime as dt
import subprocess
import time
from collections.abc import Callable

import pytest
from django.utils import timezone
from rest_framework.test import APIClient

from ledger.selectors import window_usage
from scheduler.adapters.slurm import SlurmAdapter, SlurmClient, adapter_for_cluster
from scheduler.models import (
    Attempt,
    AttemptEnd,
    AttemptState,
    CycleRecord,
    Host,
    HostEvent,
    HostHealth,
    Job,
    JobEvent,
    JobState,
)
from scheduler.services.clusters import cluster_create
from scheduler.tasks import run_cycle
from tests.adapters.slurm.conftest import (
    DrainsBeforeRelease,
    ReservesBeforeRelease,
    TimingOutClient,
    wait_until,
)
from tests.factories import SuperUserFactory, UserFactory
from tests.support.live import assert_consistent

pytestmark = pytest.mark.django_db

GRACEFUL = "trap 'echo saved; exit 0' TERM; sleep 300 & wait"


class SlurmLive:
    """An Allot cluster on a Slurm partition (`pair` unless told), and helpers to drive it."""

    def __init__(self, tree, slurm, workdir, partition: str = "pair") -> None:
        run_cycle.worker.reset()
        self.tree, self.slurm = tree, slurm
        self.cluster = cluster_create(
            name="emu",
            adapter="slurm",
            gpus_per_host=None,
            grace_s=5,
            adapter_options={
                "slurm_conf": str(slurm.conf_path),
                "partition": partition,
                "workdir": str(workdir),
            },
        )
        self.client = SlurmClient(slurm_conf=slurm.conf_path)
        self.root = SuperUserFactory(username="root")
        self.ops = UserFactory(username="ops", is_staff=True)

    def api(self, user) -> APIClient:
        client = APIClient()
        client.force_authenticate(user)
        return client

    def submit(
        self,
        project: str = "a1",
        *,
        command: str = "sleep 1",
        user: str | None = None,
        min_runtime_s: int = 600,
        name: str = "job",
        **fields,
    ) -> Job:
        """POST /api/v1/jobs/ as `user` (default: a superuser); the stored job."""
        body = {
            "project": self.tree.node(project).pk,
            "cluster": self.cluster.name,
            "name": name,
            "min_runtime_s": min_runtime_s,
            "spec": {"command": command, "image": "ignored-on-slurm:1"},
            **fields,
        }
        who = self.tree.user(user) if user else self.root
        response = self.api(who).post("/api/v1/jobs/", body, format="json")
        assert response.status_code == 201, response.json()
        return Job.objects.get(pk=response.json()["jobs"][0]["id"])

    def drain(self, host: Host, reason: str) -> None:
        """PATCH /api/v1/hosts/{id}/ as a staff operator."""
        response = self.api(self.ops).patch(
            f"/api/v1/hosts/{host.pk}/", {"health": "draining", "reason": reason}, format="json"
        )
        assert response.status_code == 200, response.json()

    def cycle(self, adapter=None) -> CycleRecord:
        record = run_cycle.worker.run(cluster_id=self.cluster.pk, adapter=adapter)
        assert record is not None
        return record

    def cycles_until(
        self, done: Callable[[], bool], *, timeout_s: float = 60, pause_s: float = 0.3
    ):
        """Run cycles until `done()`, each without errors."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            record = self.cycle()
            assert record.errors == [], record.errors
            if done():
                return
            time.sleep(pause_s)
        states = list(
            Job.objects.filter(cluster=self.cluster).values_list("pk", "state", "state_reason")
        )
        raise AssertionError(f"not done after {timeout_s} s: {states}")

    def state(self, job: Job) -> str:
        return Job.objects.get(pk=job.pk).state

    def slurm_job(self, attempt: Attempt) -> dict:
        return next(j for j in self.client.jobs() if str(j["job_id"]) == attempt.external_id)


@pytest.fixture
def live(tree, slurm, tmp_path) -> SlurmLive:
    return SlurmLive(tree, slurm, tmp_path)


def test_jobs_run_on_the_nodes_allot_chose_finish_and_the_ledger_counts_them(live):
    big = live.submit("a1", gpus=8, min_runtime_s=60, command="sleep 2", user="ann")
    half = live.submit("a2", gpus=4, min_runtime_s=60, command="sleep 1", user="bob")
    small = live.submit("b1", gpus=2, min_runtime_s=60, command="sleep 1")
    record = live.cycle()
    assert (record.starts, record.errors) == (3, [])
    chosen = {a.job_id: a.host_names for a in Attempt.objects.filter(cluster=live.cluster)}

    live.cycles_until(lambda: all(live.state(j) == JobState.SUCCEEDED for j in (big, half, small)))
    for attempt in Attempt.objects.filter(cluster=live.cluster):
        assert attempt.end_reason == AttemptEnd.SUCCEEDED
        assert attempt.host_names == chosen[attempt.job_id]  # Slurm ran it where Allot said
        slurm_job = live.slurm_job(attempt)
        assert slurm_job["nodes"] == chosen[attempt.job_id][0]
        assert len(attempt.placements[0]["gpu_indices"]) == attempt.gpus
    a1_attempt = Attempt.objects.get(job=big)
    assert (a1_attempt.ended_at - a1_attempt.started_at).total_seconds() >= 1

    usage = window_usage(
        cluster_id=live.cluster.pk, now=timezone.now(), lookback_s=3600, half_life_s=None
    )
    runtime = (a1_attempt.ended_at - a1_attempt.started_at).total_seconds()
    assert usage[live.tree.node("a1").pk] == pytest.approx(8 * runtime, rel=0.01)
    assert {k for k, v in usage.items() if v > 0} == {
        live.tree.node(n).pk for n in ("a1", "a2", "b1")
    }
    assert_consistent(live.cluster)


def test_a_preempted_resumable_job_is_requeued_by_allot_and_runs_again(live):
    sweeps = [
        live.submit(
            "b1", gpus=8, min_runtime_s=0, resumable=True, command=GRACEFUL, name=f"sweep{i}"
        )
        for i in range(2)
    ]
    live.cycles_until(lambda: all(live.state(j) == JobState.RUNNING for j in sweeps))
    urgent = live.submit("a1", gpus=8, min_runtime_s=60, command="sleep 2", name="urgent")

    live.cycles_until(lambda: live.state(urgent) in (JobState.RUNNING, JobState.SUCCEEDED))
    victim = next(
        j
        for j in sweeps
        if Attempt.objects.filter(job=j).count() > 1 or live.state(j) != JobState.RUNNING
    )
    first = Attempt.objects.filter(job=victim).order_by("number").first()
    assert (first.end_reason, first.preempted_by_id) == (AttemptEnd.PREEMPTED, urgent.pk)
    stop_event = JobEvent.objects.get(job=victim, to_state=JobState.STOPPING)
    assert stop_event.preempting_job_id == urgent.pk and stop_event.rule
    assert "stopped by Allot" in first.end_detail  # the script's trap ran, exit 0

    # the urgent job finishes; Allot (not Slurm) starts the sweep again: a new attempt
    live.cycles_until(
        lambda: live.state(urgent) == JobState.SUCCEEDED and live.state(victim) == JobState.RUNNING
    )
    again = Attempt.objects.filter(job=victim).order_by("number").last()
    assert again.number == 2 and again.state == AttemptState.RUNNING
    assert again.external_id != first.external_id
    assert live.slurm_job(first)["requeue"] is False  # Slurm never requeued it itself
    assert_consistent(live.cluster)


def test_a_drain_empties_the_node_after_the_protected_min_runtime(live, slurm):
    protected = live.submit("a1", gpus=8, min_runtime_s=4, resumable=True, command=GRACEFUL)
    live.cycles_until(lambda: live.state(protected) == JobState.RUNNING)
    first = Attempt.objects.get(job=protected)
    node = first.host_names[0]
    other = "gpu02" if node == "gpu01" else "gpu01"

    host = Host.objects.get(cluster=live.cluster, name=node)
    live.drain(host, "fan failure")
    live.cycle()
    slurm_node = next(n for n in live.client.nodes() if n["name"] == node)
    assert "DRAIN" in slurm_node["state_flags"] and slurm_node["reason"].startswith("allot: ")

    live.cycles_until(
        lambda: (
            Attempt.objects.filter(job=protected).count() == 2
            and live.state(protected) == JobState.RUNNING
        )
    )
    first.refresh_from_db()
    assert first.end_reason == AttemptEnd.DRAINED
    assert (first.stop_requested_at - first.started_at).total_seconds() >= 4  # protected until then
    second = Attempt.objects.filter(job=protected).order_by("number").last()
    assert second.host_names == [other]
    live.cycle()
    host.refresh_from_db()
    assert host.health == HostHealth.DRAINING and host.ready_for_repair_at is not None
    assert_consistent(live.cluster)


def test_a_node_drained_or_downed_in_slurm_shows_in_allot(live):
    live.client.update_node("gpu02", "drain", "bad DIMM")
    live.cycle()
    host = Host.objects.get(cluster=live.cluster, name="gpu02")
    assert host.health == HostHealth.DRAINING and "bad DIMM" in host.health_reason
    event = HostEvent.objects.filter(host=host).latest("at")
    assert "drained on the cluster: bad DIMM" in event.reason
    job = live.submit("a1", gpus=8, command="sleep 1")
    live.cycle()
    assert Attempt.objects.get(job=job).host_names == ["gpu01"]  # not on the drained node
    live.client.update_node("gpu02", "down", "power supply")
    live.cycle()
    host.refresh_from_db()
    assert host.health == HostHealth.DOWN and "power supply" in host.health_reason


def test_a_killed_slurmd_loses_its_jobs_and_resumable_ones_requeue(live, slurm):
    keeper = live.submit("a1", gpus=8, min_runtime_s=60, resumable=True, command=GRACEFUL)
    # protected past the node's timeout: the requeued keeper may not preempt it (on a slow
    # machine the loss is seen after more than a minute, and then it could)
    doomed = live.submit("a2", gpus=8, min_runtime_s=3600, resumable=False, command=GRACEFUL)
    live.cycles_until(lambda: all(live.state(j) == JobState.RUNNING for j in (keeper, doomed)))
    victim_node = Attempt.objects.get(job=keeper).host_names[0]
    job_on_it = keeper
    other = doomed
    slurm.kill_slurmd(victim_node)
    # slurmctld marks the node DOWN after SlurmdTimeout (~25 s here) and fails its jobs
    live.cycles_until(
        lambda: Attempt.objects.filter(job=job_on_it, state=AttemptState.ENDED).exists(),
        timeout_s=90,
        pause_s=1,
    )
    lost = Attempt.objects.get(job=job_on_it, number=1)
    assert lost.end_reason == AttemptEnd.LOST and victim_node in lost.end_detail
    assert live.state(job_on_it) == JobState.PENDING  # resumable: requeued by Allot
    assert Attempt.objects.filter(job=job_on_it).count() == 1  # not restarted on the dead node
    assert Host.objects.get(cluster=live.cluster, name=victim_node).health == HostHealth.DOWN
    assert live.state(other) == JobState.RUNNING
    assert_consistent(live.cluster)


def test_a_slurmctld_restart_during_a_cycle_changes_nothing_and_an_outage_is_recorded(live, slurm):
    job = live.submit("a1", gpus=4, min_runtime_s=60, command="sleep 300")

    class RestartingAdapter(SlurmAdapter):
        def hosts(self):
            hosts = super().hosts()
            slurm.restart_ctld()  # after the cycle's reads, before its starts
            return hosts

    adapter = adapter_for_cluster(live.cluster)
    restarting = RestartingAdapter(adapter.client, partition="pair", workdir=adapter.workdir)
    record = live.cycle(adapter=restarting)
    assert (record.starts, record.errors) == (1, [])
    live.cycles_until(lambda: live.state(job) == JobState.RUNNING)

    slurm.stop_ctld()
    try:
        record = live.cycle()
        assert len(record.errors) == 1 and "cluster unreachable" in record.errors[0]
        assert "slurmctld cannot be reached" in record.errors[0]
        assert live.state(job) == JobState.RUNNING
    finally:
        slurm.start_ctld()
    live.cycle()
    assert live.state(job) == JobState.RUNNING
    assert Attempt.objects.filter(job=job).count() == 1


def test_a_submit_that_timed_out_is_adopted_by_the_cycle_not_repeated(live, slurm):
    job = live.submit("a1", gpus=2, min_runtime_s=60, command="sleep 300")
    adapter = SlurmAdapter(
        TimingOutClient(slurm_conf=slurm.conf_path), partition="pair", workdir="/tmp"
    )
    record = live.cycle(adapter=adapter)
    assert (record.starts, record.errors) == (1, [])
    live.cycles_until(lambda: live.state(job) == JobState.RUNNING)
    attempt = Attempt.objects.get(job=job)
    assert [j["job_id"] for j in live.client.jobs() if attempt.attempt_id in j["comment"]] == [
        int(attempt.external_id)
    ]


def test_a_job_cancelled_with_scancel_outside_allot_is_cancelled_with_that_reason(live, slurm):
    job = live.submit("a1", gpus=2, min_runtime_s=60, resumable=True, command="sleep 300")
    live.cycles_until(lambda: live.state(job) == JobState.RUNNING)
    attempt = Attempt.objects.get(job=job)
    subprocess.run(["scancel", attempt.external_id], env=slurm.client_env, check=True)
    live.cycles_until(lambda: live.state(job) == JobState.CANCELLED)
    attempt.refresh_from_db()
    assert attempt.end_reason == AttemptEnd.CANCELLED
    assert "outside Allot" in attempt.end_detail
    assert "outside Allot" in Job.objects.get(pk=job.pk).state_reason


def test_gpus_of_jobs_outside_allot_are_left_to_them(live, slurm):
    subprocess.run(
        [
            "sbatch",
            "--parsable",
            "-p",
            "pair",
            "--gres=gpu:8",
            "-w",
            "gpu01",
            "-o",
            "/dev/null",
            "--wrap",
            "sleep 300",
        ],
        env=slurm.client_env,
        check=True,
        capture_output=True,
    )
    # Slurm's own scheduler starts it; with four test workers on two cores it has taken
    # over 30 s
    deadline = time.monotonic() + 120
    while not any(j["job_state"] == "RUNNING" for j in live.client.jobs() if not j["comment"]):
        assert time.monotonic() < deadline
        time.sleep(0.2)
    first = live.submit("a1", gpus=8, command="sleep 300")
    second = live.submit("a1", gpus=8, command="sleep 300")
    live.cycle()
    assert Attempt.objects.get(job=first).host_names == ["gpu02"]
    assert live.state(second) == JobState.PENDING  # gpu01 is busy outside Allot


def test_a_job_cancelled_in_allot_is_stopped_gracefully_in_slurm(live, tmp_path):
    marker = tmp_path / "checkpoint"
    command = f"trap 'echo saved > {marker}; exit 0' TERM; sleep 300 & wait"
    job = live.submit("a1", gpus=4, command=command, user="ann")
    live.cycles_until(lambda: live.state(job) == JobState.RUNNING)
    response = live.api(live.tree.user("ann")).post(f"/api/v1/jobs/{job.pk}/cancel/")
    assert response.status_code == 200 and response.json()["state"] == "stopping"
    live.cycles_until(lambda: live.state(job) == JobState.CANCELLED)
    attempt = Attempt.objects.get(job=job)
    assert attempt.end_reason == AttemptEnd.CANCELLED and "stopped by Allot" in attempt.end_detail
    assert marker.read_text().strip() == "saved"  # SIGTERM reached the command's trap
    assert live.slurm_job(attempt)["job_state"] == "COMPLETED", attempt.end_detail


def test_a_start_slurm_keeps_pending_is_cancelled_and_the_job_requeued_in_allot(live, settings):
    """Slurm drains the node after Allot's plan: the released job stays PENDING in
    Slurm. Past the start timeout the cycle takes the start back (scancel of Allot's
    own Slurm job), the attempt ends start_failed, never run, and the job goes back to
    Allot's queue and runs on the other node."""
    settings.ALLOT_START_TIMEOUT_S = 0  # every wait is past it (set long again below)
    # Runs until the test ends: a slow cycle could otherwise see it start and end at once
    job = live.submit("a1", gpus=8, command="sleep 300")
    adapter = adapter_for_cluster(live.cluster)
    adapter.client = DrainsBeforeRelease(slurm_conf=live.slurm.conf_path)
    record = live.cycle(adapter)
    assert (record.starts, record.errors) == (1, [])
    first = Attempt.objects.get(job=job)
    assert first.host_names == adapter.client.drained

    record = live.cycle(adapter)  # Slurm keeps it pending: the start is taken back
    assert record.errors == []
    first.refresh_from_db()
    assert first.state == AttemptState.STARTING
    assert first.end_detail.startswith("start withdrawn: the cluster kept it waiting")
    assert f"Slurm job {first.external_id} PENDING" in first.end_detail
    settings.ALLOT_START_TIMEOUT_S = 3600  # the next start may take its time

    live.cycles_until(lambda: Attempt.objects.get(pk=first.pk).state == AttemptState.ENDED)
    first.refresh_from_db()
    assert (first.end_reason, first.started_at) == (AttemptEnd.START_FAILED, None)
    assert live.slurm_job(first)["job_state"] == "CANCELLED"
    requeue = JobEvent.objects.get(job=job, from_state="starting", to_state="pending")
    assert requeue.reason.startswith("attempt 1 could not be started: start withdrawn")

    live.cycles_until(lambda: live.state(job) == JobState.RUNNING)
    second = Attempt.objects.get(job=job, number=2)
    assert second.host_names != first.host_names and second.started_at is not None
    path = list(JobEvent.objects.filter(job=job).values_list("to_state", flat=True))
    assert path == ["pending", "starting", "pending", "starting", "running"]
    assert_consistent(live.cluster)


def test_a_node_slurm_refuses_is_not_planned_again_and_the_job_is_told_why(live, settings):
    """Slurm's administrator reserves the planned node for maintenance after Allot's
    plan: Slurm keeps the released job PENDING (ReqNodeNotAvail) while the node looks
    idle, so Allot's hosts do not change. Past the start timeout the start is taken
    back with Slurm's reason, and the job is kept off that node: it runs on the other
    one (before, it was planned on the refused node again, and taken back again every
    start timeout, for as long as the reservation lasted)."""
    settings.ALLOT_START_TIMEOUT_S = 0
    job = live.submit("a1", gpus=8, command="sleep 1")
    adapter = adapter_for_cluster(live.cluster)
    adapter.client = ReservesBeforeRelease(slurm_conf=live.slurm.conf_path)
    try:
        record = live.cycle(adapter)
        assert (record.starts, record.errors) == (1, [])
        first = Attempt.objects.get(job=job)
        (refused,) = adapter.client.acted_on
        assert first.host_names == [refused]
        wait_until(  # Slurm's scheduler has looked at it (300 s would be past that)
            lambda: any(
                (j.get("comment") or "").endswith(first.attempt_id)
                and j.get("state_reason") not in (None, "", "None")
                for j in live.client.jobs()
            ),
            what="Slurm's reason for keeping the job pending",
        )

        record = live.cycle(adapter)  # Slurm keeps it pending: taken back
        assert record.errors == []
        first.refresh_from_db()
        assert "ReqNodeNotAvail" in first.end_detail, first.end_detail
        assert f"kept off {refused} until" in first.end_detail
        settings.ALLOT_START_TIMEOUT_S = 20  # a second refusal would show in the test's time

        live.cycles_until(lambda: Attempt.objects.get(pk=first.pk).state == AttemptState.ENDED)
        requeue = JobEvent.objects.get(job=job, from_state="starting", to_state="pending")
        assert "ReqNodeNotAvail" in requeue.reason and f"kept off {refused}" in requeue.reason
        live.cycles_until(lambda: live.state(job) == JobState.SUCCEEDED)
    finally:
        adapter.client.end()
    hosts = [a.host_names for a in Attempt.objects.filter(job=job).order_by("number")]
    assert hosts[0] == [refused] and all(h != [refused] for h in hosts[1:]), hosts
    assert len(hosts) == 2, hosts
    assert_consistent(live.cluster)


def test_a_job_moved_to_free_a_whole_node_runs_again_as_a_new_slurm_job_on_its_target(
    tree, slurm, tmp_path
):
    """Consolidation against slurmctld, on `trio` (three nodes, one held by the
    short-job reserve): a resumable 4-GPU job past its protection and its first
    checkpoint is alone on its node, a protected 4-GPU session on the other, and an
    8-GPU job waits with no node free for it. The cycle stops the mover in Slurm (its
    trap runs, the Slurm job completes), starts it again as a new Slurm job on the
    session's node, and the waiting job on the node it left."""
    live = SlurmLive(tree, slurm, tmp_path, partition="trio")
    url = f"/api/v1/clusters/{live.cluster.pk}/"
    policy = {"consolidate": True, "short_reserve_hosts": 1, "short_reserve_auto": False}
    response = live.api(live.root).patch(url, {**policy, "reason": "moves"}, format="json")
    assert response.status_code == 200, response.json()
    mover = live.submit(gpus=4, resumable=True, min_runtime_s=60, command=GRACEFUL, name="mover")
    brief = live.submit(gpus=4, command="sleep 300", name="brief")  # fills the mover's node
    assert live.cycle().starts == 2
    session = live.submit(gpus=4, min_runtime_s=8 * 3600, kind="interactive", command="sleep 300")
    assert live.cycle().starts == 1
    assert live.api(live.root).post(f"/api/v1/jobs/{brief.pk}/cancel/").status_code == 200
    live.cycles_until(
        lambda: (
            live.state(brief) == JobState.CANCELLED
            and all(live.state(j) == JobState.RUNNING for j in (mover, session))
        )
    )
    old = Attempt.objects.get(job=mover)
    node, target = old.host_names[0], Attempt.objects.get(job=session).host_names[0]
    assert Attempt.objects.get(job=brief).host_names == [node] and target != node
    # as if it had run 31 min: past its protection and the live policy's first checkpoint
    # (every 30 min), which a job must have saved work at to be moved
    Attempt.objects.filter(pk=old.pk).update(started_at=old.started_at - dt.timedelta(minutes=31))
    waiting = live.submit(gpus=8, min_runtime_s=3600, command="sleep 300", name="waiting")

    record = live.cycle()
    assert (record.stops, record.starts, record.errors) == (1, 0, [])
    old.refresh_from_db()
    assert (old.state, old.stop_intent, old.preempted_by_id) == (
        AttemptState.STOPPING, AttemptEnd.MIGRATED, waiting.pk)  # fmt: skip
    assert [p["host"] for p in old.moved_to] == [target]
    live.cycles_until(lambda: all(live.state(j) == JobState.RUNNING for j in (mover, waiting)))

    old.refresh_from_db()
    new = Attempt.objects.get(job=mover, number=2)
    assert (old.state, old.end_reason) == (AttemptState.ENDED, AttemptEnd.MIGRATED)
    assert (new.state, new.host_names) == (AttemptState.RUNNING, [target])
    assert Attempt.objects.get(job=waiting).host_names == [node]
    # Slurm's own record: the old job ended through its trap, the move is a new Slurm job
    assert live.slurm_job(old)["job_state"] == "COMPLETED", old.end_detail
    assert live.slurm_job(old)["requeue"] is False  # Slurm never requeued it itself
    shown = live.slurm_job(new)
    assert (shown["job_state"], shown["nodes"]) == ("RUNNING", target)
    assert new.external_id != old.external_id
    assert live.slurm_job(Attempt.objects.get(job=waiting))["nodes"] == node
    # no GPU held twice, in Slurm either: Slurm's GPUs are those of Allot's open attempts
    running = [cj for cj in adapter_for_cluster(live.cluster).jobs() if not cj.ended]
    held = [(p.host, i) for cj in running for p in cj.placements for i in p.gpu_indices]
    opened = Attempt.objects.filter(cluster=live.cluster, state=AttemptState.RUNNING)
    gpus = {(p["host"], i) for a in opened for p in a.placements for i in p["gpu_indices"]}
    assert len(held) == len(set(held)) == 16 and set(held) == gpus
    # the ledger charges both of the mover's runs (and every other run) to a1
    now = timezone.now()
    runs = Attempt.objects.filter(cluster=live.cluster, started_at__isnull=False)
    assert {a.number for a in runs if a.job_id == mover.pk} == {1, 2}
    charged = sum(a.gpus * ((a.ended_at or now) - a.started_at).total_seconds() for a in runs)
    usage = window_usage(cluster_id=live.cluster.pk, now=now, lookback_s=3600, half_life_s=None)
    assert usage == {live.tree.node("a1").pk: pytest.approx(charged)}
    assert charged > 4 * 31 * 60
    assert_consistent(live.cluster)
