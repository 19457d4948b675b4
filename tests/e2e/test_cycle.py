"""The scheduling cycle against a cluster in memory: reconcile, plan, apply, and heal."""

from __future__ import annotations

import datetime as dt

import psycopg
import pytest
from django.db import connection

from scheduler.adapters import (
    AdapterError,
    ClusterJob,
    ClusterJobState,
    ClusterPlacement,
    HostHealthState,
)
from scheduler.cycle.hosts import ALLOT_REASON_PREFIX
from scheduler.cycle.lock import CYCLE_LOCK_KEY
from scheduler.cycle.worker import CycleWorker
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
    QueueSnapshot,
)
from scheduler.selectors.queue import iter_entries, queue_entry
from scheduler.services.transitions import job_transition
from tests.support.live import assert_consistent

pytestmark = pytest.mark.django_db


def states(live) -> dict[int, str]:
    return dict(Job.objects.filter(cluster=live.cluster).values_list("pk", "state"))


def test_job_runs_and_succeeds(live):
    job = live.submit(gpus=4, duration_s=100)
    record = live.cycle()
    assert (record.starts, record.stops, record.errors) == (1, 0, [])
    assert Host.objects.filter(cluster=live.cluster).count() == 4  # mirrored from the cluster
    attempt = Attempt.objects.get(job=job)
    assert attempt.state == AttemptState.RUNNING and attempt.started_at == live.now
    assert sum(len(p["gpu_indices"]) for p in attempt.placements) == 4
    assert live.job(job).state == JobState.RUNNING
    assert live.memory.start_calls == [attempt.attempt_id]

    live.cycle(advance_s=101)
    attempt.refresh_from_db()
    assert (attempt.state, attempt.end_reason) == (AttemptState.ENDED, AttemptEnd.SUCCEEDED)
    assert attempt.ended_at == attempt.started_at + dt.timedelta(seconds=100)
    assert live.job(job).state == JobState.SUCCEEDED
    path = list(JobEvent.objects.filter(job=job).values_list("from_state", "to_state"))
    assert path == [
        ("", "pending"),
        ("pending", "starting"),
        ("starting", "running"),
        ("running", "succeeded"),
    ]
    assert CycleRecord.objects.filter(cluster=live.cluster).count() == 2
    assert_consistent(live.cluster, live.memory)


def test_queue_snapshot_explains_waiting_jobs_with_job_and_node_ids(live):
    for _ in range(4):
        live.submit("b1", gpus=8, min_runtime_s=3600)
    live.cycle()  # the cluster is full of protected work
    waiting = [live.submit("a1", gpus=8, min_runtime_s=600, priority=p) for p in (0, 5)]
    live.cycle(advance_s=1)
    queue = QueueSnapshot.objects.get(cluster=live.cluster)
    entries = list(iter_entries(queue.entries))
    assert [e["job"] for e in entries] == [waiting[1].pk, waiting[0].pk]  # priority inside a1
    assert [e["position"] for e in entries] == [1, 2]
    assert [e["project_position"] for e in entries] == [1, 2]
    assert entries[0]["project"] == live.tree.node("a1").pk
    assert entries[0]["reason"].startswith("waiting")
    node_ids = {node for node, _ in queue.project_order}
    assert live.tree.node("a1").pk in node_ids


def test_preempted_resumable_job_comes_back_and_events_say_why(live):
    for _ in range(4):
        live.submit("b1", gpus=8, min_runtime_s=0, resumable=True, duration_s=10_000, kind="sweep")
    assert live.cycle().starts == 4
    live.memory.advance(3600)  # two checkpoints (every 30 min) saved
    urgent = live.submit("a1", gpus=8, min_runtime_s=600, duration_s=100)

    record = live.cycle()
    assert (record.stops, record.starts) == (1, 0)  # the preemptor waits for the GPUs
    victim = Attempt.objects.get(state=AttemptState.STOPPING)
    assert victim.stop_intent == AttemptEnd.PREEMPTED and victim.preempted_by_id == urgent.pk
    assert victim.stop_deadline == live.now + dt.timedelta(seconds=30)
    event = JobEvent.objects.get(job=victim.job, to_state=JobState.STOPPING)
    assert event.preempting_job_id == urgent.pk
    assert event.preempting_project_id == live.tree.node("a1").pk
    assert event.rule == "unallocated_work" and event.cycle_id == record.pk
    queue = QueueSnapshot.objects.get(cluster=live.cluster).entries
    head = queue_entry(queue, job_id=urgent.pk)
    assert head["position"] == 1 and "to exit" in head["reason"]
    assert_consistent(live.cluster, live.memory)

    # still stopping: its GPUs stay taken and nobody else is preempted; a worker that
    # did not send the stop itself (a restart, another worker) sends it again
    record = live.cycle(advance_s=1)
    assert (record.stops, record.starts) == (0, 0)
    assert Attempt.objects.filter(state=AttemptState.STOPPING).count() == 1
    assert len(live.memory.stop_calls) == 1
    live.worker.reset()
    live.cycle(advance_s=1)
    assert live.memory.stop_calls == [(victim.attempt_id, 30.0), (victim.attempt_id, 28.0)]

    # the cluster reports the end: the victim is requeued with its saved work, and the
    # preemptor starts on the GPUs it freed, in the same cycle
    record = live.cycle(advance_s=4)
    victim.refresh_from_db()
    assert (victim.state, victim.end_reason) == (AttemptState.ENDED, AttemptEnd.PREEMPTED)
    requeued = live.job(victim.job)
    assert requeued.state == JobState.PENDING and requeued.progress_s == 3600
    assert live.job(urgent).state == JobState.RUNNING
    assert record.starts == 1
    assert_consistent(live.cluster, live.memory)

    live.cycle(advance_s=101)  # the urgent job ends; the sweep gets its GPUs back
    assert live.job(urgent).state == JobState.SUCCEEDED
    assert live.job(victim.job).state == JobState.RUNNING
    second = Attempt.objects.get(job=victim.job, number=2)
    assert live.memory.running[second.attempt_id].run_for_s == 10_000 - 3600
    path = list(JobEvent.objects.filter(job=victim.job).values_list("to_state", flat=True))
    assert path == ["pending", "starting", "running", "stopping", "pending", "starting", "running"]
    assert {s for s in states(live).values()} == {JobState.RUNNING, JobState.SUCCEEDED}
    assert_consistent(live.cluster, live.memory)


def test_unreachable_cluster_records_the_error_and_changes_nothing(live):
    jobs = [live.submit(gpus=8) for _ in range(2)]
    live.cycle()
    live.submit(gpus=1)
    before = (
        states(live),
        list(Attempt.objects.values_list("pk", "state", "placements")),
        list(Host.objects.values_list("name", "health")),
        JobEvent.objects.count(),
        QueueSnapshot.objects.get(cluster=live.cluster).cycle_id,
    )
    live.memory.unreachable = True
    record = live.cycle(advance_s=10)
    assert record.errors == ["cluster unreachable: connection refused"]
    assert (record.starts, record.stops) == (0, 0)
    after = (
        states(live),
        list(Attempt.objects.values_list("pk", "state", "placements")),
        list(Host.objects.values_list("name", "health")),
        JobEvent.objects.count(),
        QueueSnapshot.objects.get(cluster=live.cluster).cycle_id,
    )
    assert after == before
    live.memory.unreachable = False
    assert live.cycle().starts == 1
    assert all(live.job(j).state == JobState.RUNNING for j in jobs)


def test_a_start_error_is_healed_by_the_next_reconcile(live, settings):
    settings.ALLOT_START_CONFIRM_S = 15
    job = live.submit(gpus=2)
    live.memory.fail_starts = True
    record = live.cycle()
    first = Attempt.objects.get(job=job)
    assert first.state == AttemptState.STARTING and first.end_detail.startswith("start error")
    assert record.errors and "timed out" in record.errors[0]
    live.memory.fail_starts = False

    live.cycle(advance_s=5)  # the start may still show up: no second attempt yet
    assert Attempt.objects.filter(job=job).count() == 1
    assert live.job(job).state == JobState.STARTING

    live.cycle(advance_s=15)  # failed back to the queue, then started again
    first.refresh_from_db()
    assert (first.state, first.end_reason) == (AttemptState.ENDED, AttemptEnd.START_FAILED)
    assert_started_again(live, job, first)


def test_a_start_the_cluster_keeps_waiting_past_the_timeout_goes_back_to_the_queue(live, settings):
    settings.ALLOT_START_TIMEOUT_S = 120
    job, first = start_kept_waiting(live, gpus=32, min_runtime_s=3600)  # the whole cluster

    live.cycle(advance_s=60)  # waiting, within the timeout: left alone
    first.refresh_from_db()
    assert first.state == AttemptState.STARTING and live.memory.withdraw_calls == []

    live.cycle(advance_s=61)  # past it: the start is taken back, the GPUs still held
    first.refresh_from_db()
    assert first.state == AttemptState.STARTING
    until = (live.now + dt.timedelta(seconds=900)).strftime("%H:%M")
    detail = (
        "start withdrawn: the cluster kept it waiting 121 s; kept off node00, node01, "
        f"node02, node03 until {until} UTC (refused there 1 time)"
    )
    assert first.end_detail == detail
    assert live.memory.withdraw_calls == [first.attempt_id]
    assert live.job(job).state == JobState.STARTING

    record = live.cycle(advance_s=1)  # stopped on the cluster: ended, requeued
    assert record.errors == []
    first.refresh_from_db()
    assert (first.state, first.end_reason) == (AttemptState.ENDED, AttemptEnd.START_FAILED)
    assert first.started_at is None  # it never ran: nothing charged, no min runtime owed
    assert first.end_detail == detail
    requeued = JobEvent.objects.filter(job=job, to_state=JobState.PENDING).last()
    assert requeued.reason == f"attempt 1 could not be started: {detail}"
    # kept off the hosts that refused it (all of them) for the shortest window, 15 min
    assert live.job(job).state == JobState.PENDING
    (entry,) = iter_entries(QueueSnapshot.objects.get(cluster=live.cluster).entries)
    assert "not placed on node00, node01, node02, node03 before" in entry["reason"]
    live.cycle(advance_s=900 - 2)
    assert live.job(job).state == JobState.PENDING
    live.cycle(advance_s=1)  # the window is over: started again
    second = assert_started_again(live, job, first)
    assert second.gpus == 32  # the first one's GPUs are free again


def test_a_start_that_runs_before_it_is_taken_back_keeps_running(live, settings):
    """The cluster starts the job between the cycle's decision and its withdraw: the
    withdraw leaves it running, and the attempt runs (never stopped, never doubled)."""
    settings.ALLOT_START_TIMEOUT_S = 60
    job, attempt = start_kept_waiting(live, gpus=8, min_runtime_s=3600)
    withdraw = live.memory.withdraw

    def runs_first(attempt_id: str) -> bool:
        live.memory.run_queued(attempt_id)
        return withdraw(attempt_id)

    live.memory.withdraw = runs_first
    live.cycle(advance_s=61)
    assert live.memory.running[attempt.attempt_id].state == ClusterJobState.RUNNING
    live.cycle(advance_s=1)
    attempt.refresh_from_db()
    assert attempt.state == AttemptState.RUNNING and attempt.end_detail == ""
    assert attempt.started_at == live.now - dt.timedelta(seconds=1)
    assert live.job(job).state == JobState.RUNNING
    assert live.memory.stop_calls == [] and live.memory.start_calls == [attempt.attempt_id]
    assert_consistent(live.cluster, live.memory)


def test_a_withdraw_that_failed_is_sent_again_by_the_next_cycle(live, settings):
    settings.ALLOT_START_TIMEOUT_S = 60
    job, attempt = start_kept_waiting(live, gpus=8)
    withdraw = live.memory.withdraw
    calls: list[str] = []

    def fails_once(attempt_id: str) -> bool:
        calls.append(attempt_id)
        if len(calls) == 1:
            raise AdapterError("slurmctld busy")
        return withdraw(attempt_id)

    live.memory.withdraw = fails_once
    record = live.cycle(advance_s=61)
    assert any("slurmctld busy" in e for e in record.errors)
    live.cycle(advance_s=1)  # still waiting on the cluster: taken back this time
    live.cycle(advance_s=1)
    attempt.refresh_from_db()
    assert calls == [attempt.attempt_id, attempt.attempt_id]
    assert (attempt.end_reason, attempt.started_at) == (AttemptEnd.START_FAILED, None)
    assert_consistent(live.cluster, live.memory)


def test_a_start_taken_back_from_a_cluster_without_withdraw_is_stopped_without_grace(
    live, settings
):
    settings.ALLOT_START_TIMEOUT_S = 60
    job, attempt = start_kept_waiting(live, gpus=8)
    live.memory.withdraw = None  # as the simulated cluster's adapter: no such verb
    live.cycle(advance_s=61)
    assert live.memory.stop_calls == [(attempt.attempt_id, 0.0)]
    live.cycle(advance_s=1)
    attempt.refresh_from_db()
    assert (attempt.end_reason, attempt.started_at) == (AttemptEnd.START_FAILED, None)
    assert Attempt.objects.get(job=job, number=2).state == AttemptState.RUNNING
    assert_consistent(live.cluster, live.memory)


class Crash(BaseException):
    """A worker dying mid-cycle (nothing after it runs, no handler catches it)."""


class CrashingCluster:
    """The in-memory cluster, but the worker dies around its first start call."""

    def __init__(self, memory, *, after_start: bool):
        self.memory, self.after_start = memory, after_start

    def __getattr__(self, name):
        return getattr(self.memory, name)

    def start(self, request):
        if self.after_start:
            self.memory.start(request)
        raise Crash


@pytest.mark.parametrize("after_start", [False, True], ids=["before-start", "after-start"])
def test_a_worker_dying_around_a_start_never_loses_or_doubles_the_job(live, after_start):
    job = live.submit(gpus=4)
    with pytest.raises(Crash):
        live.worker.run(
            cluster_id=live.cluster.pk,
            now=live.now,
            adapter=CrashingCluster(live.memory, after_start=after_start),
        )
    first = Attempt.objects.get(job=job)
    assert first.state == AttemptState.STARTING  # committed before the call
    live.cycle(advance_s=20)
    first.refresh_from_db()
    if after_start:  # the cluster has it: adopted, not started again
        assert first.state == AttemptState.RUNNING
        assert Attempt.objects.filter(job=job).count() == 1
    else:  # it never got there: failed, requeued and started as attempt 2
        assert first.end_reason == AttemptEnd.START_FAILED
        assert Attempt.objects.get(job=job, number=2).state == AttemptState.RUNNING
    assert live.job(job).state == JobState.RUNNING
    assert len(live.memory.running) == 1
    assert_consistent(live.cluster, live.memory)


def test_lost_jobs_requeue_when_resumable_and_fail_otherwise(live):
    keep = live.submit(gpus=8, resumable=True, duration_s=5000)
    lose = live.submit(gpus=8, resumable=False, duration_s=5000)
    live.cycle()
    hosts = {a.job_id: a.placements[0]["host"] for a in Attempt.objects.all()}
    live.memory.advance(1800)  # one checkpoint saved
    live.memory.fail_host(hosts[keep.pk])
    live.memory.fail_host(hosts[lose.pk])
    live.cycle()
    assert live.job(keep).state == JobState.RUNNING  # requeued and restarted elsewhere
    assert live.job(keep).progress_s == 1800
    assert live.job(lose).state == JobState.FAILED
    assert set(Attempt.objects.filter(number=1).values_list("end_reason", flat=True)) == {
        AttemptEnd.LOST
    }
    down = Host.objects.filter(health=HostHealth.DOWN)
    assert set(down.values_list("name", flat=True)) == {hosts[keep.pk], hosts[lose.pk]}
    assert HostEvent.objects.filter(to_health=HostHealth.DOWN).count() == 2
    assert_consistent(live.cluster, live.memory)


def test_running_attempt_the_cluster_forgot_is_lost(live):
    job = live.submit(gpus=1, resumable=False)
    live.cycle()
    live.memory.running.clear()
    live.cycle(advance_s=1)
    attempt = Attempt.objects.get(job=job)
    assert attempt.end_reason == AttemptEnd.LOST
    assert live.job(job).state == JobState.FAILED


def test_drain_is_pushed_work_stopped_and_host_reported_ready_for_repair(live):
    sweep = live.submit("b1", gpus=8, min_runtime_s=0, duration_s=10_000)
    live.cycle()
    host = Host.objects.get(name=Attempt.objects.get(job=sweep).placements[0]["host"])
    host.health, host.health_reason = HostHealth.DRAINING, "fan noise"
    host.save()  # what the hosts service does (with its audited event)

    record = live.cycle(advance_s=1)
    assert (host.name, "draining", ALLOT_REASON_PREFIX + "fan noise") in live.memory.health_calls
    assert record.stops == 1
    stop = JobEvent.objects.get(job=sweep, to_state=JobState.STOPPING)
    assert stop.rule == "host_drain"
    assert Attempt.objects.get(job=sweep).stop_intent == AttemptEnd.DRAINED
    host.refresh_from_db()
    assert host.health == HostHealth.DRAINING and host.ready_for_repair_at is None

    live.cycle(advance_s=10)  # the job exited: the host is empty
    host.refresh_from_db()
    assert host.ready_for_repair_at == live.now
    assert live.job(sweep).state == JobState.PREEMPTED  # not resumable: ends here

    host.health = HostHealth.HEALTHY
    host.save()
    live.cycle(advance_s=1)
    assert live.memory.health[host.name][0] == HostHealthState.HEALTHY
    host.refresh_from_db()
    assert host.health == HostHealth.HEALTHY and host.ready_for_repair_at is None


def test_drain_made_on_the_cluster_is_mirrored(live):
    live.cycle()
    live.memory.health["node01"] = (HostHealthState.DRAINING, "scontrol: bad DIMM")
    live.cycle(advance_s=1)
    host = Host.objects.get(name="node01")
    assert host.health == HostHealth.DRAINING
    event = HostEvent.objects.get(host=host)
    assert (event.from_health, event.to_health) == (HostHealth.HEALTHY, HostHealth.DRAINING)
    assert "bad DIMM" in event.reason
    assert not live.memory.health_calls  # not pushed back


def test_jobs_outside_allot_keep_their_gpus_and_are_noted(live):
    outside = ClusterJob(
        attempt_id="",
        state=ClusterJobState.RUNNING,
        placements=(ClusterPlacement("node00", tuple(range(8))),),
        external_id="4242",
    )
    live.memory.foreign.append(outside)
    jobs = [live.submit(gpus=8) for _ in range(4)]
    record = live.cycle()
    assert record.starts == 3
    assert any("4242" in e and "outside Allot" in e for e in record.errors)
    assert not live.memory.stop_calls
    used = {a.placements[0]["host"] for a in Attempt.objects.all()}
    assert "node00" not in used
    assert sum(live.job(j).state == JobState.PENDING for j in jobs) == 1


def test_an_attempt_allot_ended_that_still_runs_is_stopped_and_its_gpus_kept(live):
    job = live.submit(gpus=8, resumable=True)
    live.cycle()
    attempt = Attempt.objects.get(job=job)
    # The attempt ended in Allot (say a reconcile saw it missing) yet the cluster runs it.
    Attempt.objects.filter(pk=attempt.pk).update(
        state=AttemptState.ENDED, end_reason=AttemptEnd.LOST, ended_at=live.now
    )
    Job.objects.filter(pk=job.pk).update(state=JobState.PENDING)
    others = [live.submit(gpus=8) for _ in range(3)]
    record = live.cycle(advance_s=1)
    assert (attempt.attempt_id, 0.0) in live.memory.stop_calls
    assert any("still runs on the cluster" in e for e in record.errors)
    # its host is not handed out: 4 jobs wanted 8 GPUs, 3 hosts were free
    assert record.starts == 3
    assert sum(live.job(j).state == JobState.RUNNING for j in [job, *others]) == 3


def test_cancel_while_running_stops_through_the_cluster(live):
    job = live.submit(gpus=2)
    live.cycle()
    attempt = Attempt.objects.get(job=job)
    # what the cancel service does (docs/architecture.md)
    attempt.state, attempt.stop_intent = AttemptState.STOPPING, AttemptEnd.CANCELLED
    attempt.stop_requested_at = live.now
    attempt.stop_deadline = live.now + dt.timedelta(seconds=30)
    attempt.save()
    Job.objects.filter(pk=job.pk).update(state=JobState.STOPPING)
    live.cycle(advance_s=1)
    assert live.memory.stop_calls[-1] == (attempt.attempt_id, 29.0)
    live.cycle(advance_s=10)
    attempt.refresh_from_db()
    assert attempt.end_reason == AttemptEnd.CANCELLED
    assert live.job(job).state == JobState.CANCELLED


def test_a_stop_past_its_grace_deadline_is_forced(live):
    job = live.submit("b1", gpus=8, min_runtime_s=0, duration_s=10_000)
    live.memory.exit_after_s = 1000  # the job ignores the signal
    live.memory.kills_after_grace = False  # and the cluster waits to be told
    live.cycle()
    for _ in range(4):
        live.submit("a1", gpus=8)
    live.cycle(advance_s=1)
    attempt = Attempt.objects.get(job=job)
    assert attempt.state == AttemptState.STOPPING
    live.cycle(advance_s=31)
    assert live.memory.stop_calls[-1] == (attempt.attempt_id, 0.0)
    live.cycle(advance_s=1)
    attempt.refresh_from_db()
    assert attempt.end_reason == AttemptEnd.PREEMPTED


def test_a_second_cycle_of_the_same_cluster_skips_at_once(live):
    settings_dict = connection.settings_dict
    other = psycopg.connect(
        dbname=settings_dict["NAME"],
        user=settings_dict["USER"],
        host=settings_dict["HOST"] or None,
        port=settings_dict["PORT"] or None,
        password=settings_dict["PASSWORD"] or None,
        autocommit=True,
    )
    try:
        other.execute("SELECT pg_advisory_lock(%s, %s)", [CYCLE_LOCK_KEY, live.cluster.pk])
        assert live.cycle() is None
        assert not CycleRecord.objects.exists()
        other.execute("SELECT pg_advisory_unlock(%s, %s)", [CYCLE_LOCK_KEY, live.cluster.pk])
        assert live.cycle() is not None
    finally:
        other.close()


def _preempt_a_starting_sweep(live, start_mode: str) -> tuple[Job, Attempt]:
    """An unallocated job whose start is caught by the memory cluster's `start_mode`
    (`fail_starts` or `queue_starts`), then preempted by allocated jobs while starting."""
    sweep = live.submit("b1", gpus=8, min_runtime_s=0, resumable=False, duration_s=10_000)
    setattr(live.memory, start_mode, True)
    live.cycle()
    setattr(live.memory, start_mode, False)
    for _ in range(4):
        live.submit("a1", gpus=8)
    live.cycle(advance_s=1)  # the engine preempts the (starting) unallocated job
    return sweep, Attempt.objects.get(job=sweep)


def test_a_job_stopped_before_the_cluster_started_it_goes_back_to_the_queue(live, settings):
    settings.ALLOT_START_CONFIRM_S = 15
    # the start never reaches the cluster
    sweep, attempt = _preempt_a_starting_sweep(live, "fail_starts")
    assert attempt.state == AttemptState.STOPPING and attempt.started_at is None
    live.cycle(advance_s=20)
    attempt.refresh_from_db()
    assert attempt.state == AttemptState.ENDED and attempt.end_reason == AttemptEnd.PREEMPTED
    assert attempt.end_detail == "stopped before the cluster started it"
    assert live.job(sweep).state == JobState.PENDING  # it lost nothing: not "preempted"
    assert_consistent(live.cluster, live.memory)


def test_a_job_stopped_while_the_cluster_still_starts_it_never_counts_as_run(live):
    # the cluster accepted the start but had not run it when the stop came: it reports
    # the job stopping, then stopped, with no start time; Allot must not invent one
    sweep, attempt = _preempt_a_starting_sweep(live, "queue_starts")
    assert attempt.state == AttemptState.STOPPING
    live.cycle(advance_s=1)  # the cluster reports it stopping, still without a start
    attempt.refresh_from_db()
    assert attempt.started_at is None
    live.cycle(advance_s=20)
    attempt.refresh_from_db()
    assert attempt.state == AttemptState.ENDED and attempt.started_at is None
    assert live.job(sweep).state == JobState.PENDING  # it lost nothing
    assert_consistent(live.cluster, live.memory)


def test_workers_taking_turns_on_a_cluster_store_the_queue_of_the_last_cycle(live):
    """A worker skips rewriting the stored queue when it equals what it stored last;
    another worker's cycle in between makes it write again."""
    one, other = CycleWorker(), CycleWorker()

    def stored() -> list[int]:
        entries = QueueSnapshot.objects.get(cluster=live.cluster).entries
        return [int(e["job"]) for e in iter_entries(entries)]

    def cycle(worker: CycleWorker) -> None:
        live.memory.advance(1)
        worker.run(cluster_id=live.cluster.pk, now=live.now, adapter=live.memory)

    live.submit(gpus=32)  # takes the whole cluster
    cycle(one)
    first = live.submit(gpus=8)
    cycle(one)
    assert stored() == [first.pk]
    second = live.submit(gpus=8)
    cycle(other)
    assert stored() == [first.pk, second.pk]
    job_transition(job=live.job(second), to_state=JobState.CANCELLED, reason="cancelled")
    cycle(one)  # the same queue as this worker stored two cycles ago
    assert stored() == [first.pk]


def test_a_start_the_cluster_placed_on_other_gpus_leaves_no_phantom_free_gpus(live):
    """The cluster may run a start on other GPUs of its host than Allot planned (Slurm
    takes the lowest free indices, in its own order). While another start on that host
    still waits, its planned GPUs must move off those the cluster gave: otherwise the
    two share GPUs in Allot's books, the GPUs left look free and a third job is
    started on a full host (bench/slurm_cycle.py --mode sbatch saw 129-130 GPUs of 128
    in use, the extra start waiting in Slurm for Resources)."""
    for _ in range(3):  # three hosts full and running: the two starts share the fourth
        live.submit("a1", gpus=8)
    live.cycle()
    live.memory.queue_starts = True
    first, second = live.submit("a1", gpus=4), live.submit("a1", gpus=4)
    live.cycle(advance_s=1)
    planned = {j: Attempt.objects.get(job=j).placements for j in (first, second)}
    assert planned[first][0]["host"] == planned[second][0]["host"]
    # the cluster runs the second job on the GPUs planned for the first one
    job = live.memory.running[Attempt.objects.get(job=second).attempt_id]
    job.placements = (
        ClusterPlacement(planned[first][0]["host"], (*planned[first][0]["gpu_indices"],)),
    )
    job.state, job.started_at = ClusterJobState.RUNNING, live.now
    third = live.submit("a1", gpus=4)

    live.cycle(advance_s=1)

    assert Attempt.objects.get(job=second).state == AttemptState.RUNNING
    moved = Attempt.objects.get(job=first)
    assert moved.state == AttemptState.STARTING
    assert moved.placements == planned[second]  # the GPUs the cluster left on that host
    assert live.job(third).state == JobState.PENDING  # the cluster is full
    assert_consistent(live.cluster)


def assert_started_again(live, job, first) -> Attempt:
    """The job's second attempt runs after its first never started (one requeue)."""
    second = Attempt.objects.get(job=job, number=2)
    assert second.state == AttemptState.RUNNING
    assert live.memory.start_calls == [first.attempt_id, second.attempt_id]
    assert list(JobEvent.objects.filter(job=job).values_list("to_state", flat=True)) == [
        "pending",
        "starting",
        "pending",
        "starting",
        "running",
    ]
    assert_consistent(live.cluster, live.memory)
    return second


def start_kept_waiting(live, **job) -> tuple[Job, Attempt]:
    """A job submitted and started on a cluster that accepts the start but never runs it
    (it reports the job waiting, as Slurm does a PENDING job): the job and its attempt."""
    submitted = live.submit(**job)
    live.memory.queue_starts = True
    live.cycle()
    live.memory.queue_starts = False
    return submitted, Attempt.objects.get(job=submitted)
