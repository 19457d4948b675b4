"""Consolidation in the live cycle (`scheduler.cycle.moves`): a planned migration stops
the moved job through the adapter, starts it again on its planned hosts once the
cluster reports the stop (before the plan, in the same reconcile), and the block it
left goes to the waiting job it was moved for. A protected job never moves; a stop the
cluster refuses leaves everything as it was."""

from __future__ import annotations

import dataclasses
import datetime as dt
import time
from dataclasses import dataclass

import pytest
from django.test import Client
from django.utils import timezone
from rest_framework.test import APIClient

from scheduler import adapters
from scheduler.adapters import AdapterError
from scheduler.models import Attempt, AttemptEnd, AttemptState, Cluster, Job, JobEvent, JobState
from scheduler.selectors.snapshot import cluster_snapshot
from scheduler.selectors.translate import policy_for_cluster
from scheduler.tasks import run_cycle
from tests.factories import UserFactory
from tests.support.live import assert_consistent, submit_job

pytestmark = pytest.mark.django_db

HOUR = 3600


@dataclass
class OnSimulated:
    """The `live` helpers for a cluster in the simulated cluster process (over HTTP):
    Allot's clock moves with `advance`, the cluster's (at `SPEED`) with real time."""

    cluster: Cluster
    tree: object
    user: object
    now: dt.datetime

    def submit(self, project: str = "a1", **kwargs) -> Job:
        node = self.tree.node(project)
        return submit_job(cluster=self.cluster, project=node, user=self.user, at=self.now, **kwargs)

    def cycle(self, advance_s: float = 0.0):
        if advance_s:
            self.advance(advance_s)
        return run_cycle.worker.run(cluster_id=self.cluster.pk, now=self.now)

    def advance(self, seconds: float) -> None:
        self.now += dt.timedelta(seconds=seconds)
        time.sleep(min(seconds, 400) / SPEED)

    def job(self, job: Job) -> Job:
        return Job.objects.get(pk=job.pk)


SPEED = 100.0  # simulated seconds per second: the 300 s job ends in 3 s


def fragment(live, *, mover_min_runtime_s: int = 600):
    """node-A: the 4-GPU resumable `mover` (and a 4-GPU job that ends after 5 min),
    node-B: a 4-GPU interactive session (protected, not resumable), node-C: an 8-GPU
    protected job, and the fourth host held by the short-job reserve (one fixed host).
    At 1,900 s (the mover past its protection and checkpointed at 1,800 s) an 8-GPU job
    of the same project and priority arrives: it may preempt nobody, no host is free
    for it, and 8 GPUs are free in total on two hosts."""
    live.cluster.short_reserve_hosts = 1
    live.cluster.short_reserve_auto = False
    live.cluster.save()
    mover = live.submit(
        gpus=4, resumable=True, min_runtime_s=mover_min_runtime_s, duration_s=20 * HOUR
    )
    brief = live.submit(gpus=4, min_runtime_s=60, duration_s=300)
    assert live.cycle().starts == 2
    session = live.submit(gpus=4, min_runtime_s=8 * HOUR, duration_s=20 * HOUR, kind="interactive")
    big = live.submit(gpus=8, min_runtime_s=8 * HOUR, duration_s=20 * HOUR)
    assert live.cycle().starts == 2
    hosts = {j.pk: Attempt.objects.get(job=j).host_names[0] for j in (mover, brief, session, big)}
    assert hosts[mover.pk] == hosts[brief.pk]
    assert len({hosts[mover.pk], hosts[session.pk], hosts[big.pk]}) == 3
    if isinstance(live, OnSimulated):  # the brief job ends; the mover saves at 1,800 s
        live.advance(1900)
    else:
        live.memory.advance(1900)
    waiting = live.submit(gpus=8, min_runtime_s=2 * HOUR, duration_s=4 * HOUR)
    return mover, session, waiting, hosts


def test_consolidation_is_on_in_the_live_policy(live):
    assert policy_for_cluster(live.cluster).consolidate


def test_a_moved_job_starts_again_on_its_planned_hosts_and_its_block_goes_to_the_waiting_job(
    live,
):
    mover, session, waiting, hosts = fragment(live)
    old = Attempt.objects.get(job=mover)
    record = live.cycle()
    assert (record.stops, record.starts) == (1, 0)  # the waiting job waits for the stop
    old.refresh_from_db()
    assert old.state == AttemptState.STOPPING and old.stop_intent == AttemptEnd.MIGRATED
    assert old.preempted_by_id == waiting.pk
    # its contract was kept: stopped only after its minimum runtime
    assert old.started_at + dt.timedelta(seconds=mover.min_runtime_s) <= old.stop_requested_at
    target = old.moved_to
    assert [p["host"] for p in target] == [hosts[session.pk]]
    assert live.memory.stop_calls == [(old.attempt_id, 30.0)]
    event = JobEvent.objects.get(job=mover, to_state=JobState.STOPPING)
    assert event.rule == "consolidation" and event.reason_code == "migrate"
    assert live.job(waiting).state == JobState.PENDING
    assert_consistent(live.cluster, live.memory)

    # nothing else may take the planned GPUs while the stop lasts
    record = live.cycle(advance_s=2)
    assert (record.stops, record.starts) == (0, 0)

    record = live.cycle(advance_s=5)  # the cluster reports the end
    old.refresh_from_db()
    assert old.state == AttemptState.ENDED and old.end_reason == AttemptEnd.MIGRATED
    new = Attempt.objects.get(job=mover, state__in=(AttemptState.STARTING, AttemptState.RUNNING))
    assert new.number == 2 and new.placements == target
    assert new.state == AttemptState.RUNNING and new.protected_until is not None
    assert live.job(mover).state == JobState.RUNNING
    assert live.job(mover).progress_s == 1800  # the work since the checkpoint is lost
    assert live.job(waiting).state == JobState.RUNNING
    assert Attempt.objects.get(job=waiting).host_names == [hosts[mover.pk]]
    assert record.starts == 2
    assert_consistent(live.cluster, live.memory)

    reasons = list(
        JobEvent.objects.filter(job=mover).order_by("pk").values_list("reason", flat=True)
    )
    assert "moved to other hosts (consolidation)" in reasons[-3]
    assert f"moved from {hosts[mover.pk]}" in reasons[-2] and "consolidation" in reasons[-2]
    client = APIClient()
    client.force_authenticate(live.user)
    body = client.get(f"/api/v1/jobs/{mover.pk}/").json()
    stop = [e for e in body["events"] if e["to_state"] == "stopping"]
    assert stop[0]["rule_label"].startswith("Moved to another host")
    ends = [a["end_reason"] for a in body["attempts"]]
    assert "migrated" in ends
    page = Client()
    page.force_login(live.user)
    html = page.get(f"/jobs/{mover.pk}/").content.decode()
    assert "Moved to other hosts" in html  # the attempts table
    assert "Moved to another host, restarted at once" in html  # the stop's rule

    # it moved: its protection stays over, and it does not move again before it saves
    assert (live.cycle(advance_s=60).stops, live.cycle(advance_s=60).starts) == (0, 0)
    assert_consistent(live.cluster, live.memory)


def test_the_gpus_a_moving_job_starts_again_on_are_held_as_the_job_itself(live):
    """While the stop lasts, the planned GPUs are held by the moved job (id "~move-<id>"):
    its project, kind and start (an ETA expects them back when the job ends, a queue
    reason names its project), protected as long as the stop itself (not a year, as a job
    outside Allot); nobody else takes them meanwhile."""
    mover, session, waiting, hosts = fragment(live)
    live.cycle()
    cs = cluster_snapshot(cluster=live.cluster, now=live.now)
    held = {rw.workload.id: rw for rw in cs.snapshot.running}
    stopping, target = held[str(mover.pk)], held[f"~move-{mover.pk}"]
    assert dataclasses.replace(target.workload, id=stopping.workload.id) == stopping.workload
    assert target.started_s == stopping.started_s
    assert target.protected_until_s == stopping.protected_until_s
    assert cs.now < target.protected_until_s <= cs.now + live.cluster.grace_s + 1
    assert [p.host for p in target.placements] == [hosts[session.pk]]
    other = live.submit("b1", gpus=4, min_runtime_s=2 * HOUR, duration_s=HOUR, name="other")
    live.cycle(advance_s=2)
    assert not Attempt.objects.filter(job=other, placements=Attempt.objects.get(
        job=mover).moved_to).exists()  # fmt: skip


def test_the_block_a_move_frees_is_not_taken_by_a_later_job_of_the_same_rank(live):
    """A 4-GPU job of the waiting job's project submitted during the stop queues behind
    it: the block goes to the job it was freed for. (A job of a project fair share
    ranks higher goes first, as it would without the move.)"""
    mover, session, waiting, hosts = fragment(live)
    assert live.cycle().stops == 1
    other = live.submit(gpus=4, min_runtime_s=2 * HOUR, duration_s=HOUR, name="other")
    live.cycle(advance_s=2)
    live.cycle(advance_s=5)  # the cluster reports the end
    assert live.job(waiting).state == JobState.RUNNING
    assert Attempt.objects.get(job=waiting).host_names == [hosts[mover.pk]]
    assert hosts[mover.pk] not in {
        h for a in Attempt.objects.filter(job=other) for h in a.host_names
    }


def test_a_protected_job_is_not_moved(live):
    mover, _, waiting, _ = fragment(live, mover_min_runtime_s=2 * HOUR)
    record = live.cycle()
    assert (record.stops, record.starts) == (0, 0)
    assert live.memory.stop_calls == []
    assert live.job(mover).state == JobState.RUNNING
    assert live.job(waiting).state == JobState.PENDING


def test_a_stop_the_cluster_refuses_leaves_the_job_running_and_nothing_written(live, monkeypatch):
    mover, _, waiting, hosts = fragment(live)
    old = Attempt.objects.get(job=mover)

    refused: list[str] = []

    def refuse(attempt_id: str, grace_s: float) -> None:
        refused.append(attempt_id)
        raise AdapterError("stop refused by policy", retryable=False)

    monkeypatch.setattr(live.memory, "stop", refuse)
    record = live.cycle()
    assert (record.stops, record.starts) == (0, 0)
    assert any("refused its stop" in e for e in record.errors)
    old.refresh_from_db()
    assert old.state == AttemptState.RUNNING and not old.stop_intent and not old.moved_to
    assert live.job(mover).state == JobState.RUNNING
    assert live.job(waiting).state == JobState.PENDING  # not started on the mover's GPUs
    assert_consistent(live.cluster, live.memory)
    # the run is protected for the refusal-avoidance time: no cycle asks again meanwhile
    assert old.protected_until == record.started_at + dt.timedelta(seconds=900)
    for _ in range(3):
        live.cycle(advance_s=60)
    assert refused == [old.attempt_id]
    assert live.job(mover).state == JobState.RUNNING


def test_a_move_whose_planned_gpus_were_taken_leaves_the_job_in_the_queue(live):
    mover, session, waiting, hosts = fragment(live)
    live.cycle()
    old = Attempt.objects.get(job=mover)
    target = old.moved_to
    live.memory.fail_host(hosts[session.pk])  # the planned host fails during the stop
    record = live.cycle(advance_s=5)
    assert any(
        f"job {mover.pk} not started again after its move: {hosts[session.pk]} takes no new work"
        in e
        for e in record.errors
    )
    assert not Attempt.objects.filter(job=mover, placements=target).exclude(pk=old.pk).exists()
    assert Attempt.objects.get(pk=old.pk).end_reason == AttemptEnd.MIGRATED
    # back in the queue: the engine places it like any waiting job (or it waits)
    assert live.job(mover).state in (JobState.PENDING, JobState.STARTING, JobState.RUNNING)
    assert_consistent(live.cluster, live.memory)


def test_a_move_on_the_simulated_cluster_process(tree, make_simulated_cluster):
    """The same move over HTTP: the simulated cluster stops the run (its exit delay),
    the next cycles start it again on its planned GPUs and the waiting job in its block,
    and the cluster reports both running where Allot says."""
    run_cycle.worker.reset()
    cluster = make_simulated_cluster(
        name="moves",
        hosts=4,
        gpus_per_host=8,
        speed=SPEED,
        grace_s=30,
        adapter_options={"start_delay_s": 0, "exit_delay_s": 2},
    )
    sim = OnSimulated(cluster, tree, UserFactory(username="ann"), timezone.now())
    mover, session, waiting, hosts = fragment(sim)
    assert sim.cycle().stops == 1
    target = Attempt.objects.get(job=mover).moved_to
    for _ in range(20):  # the cluster reports the end within a few of its seconds
        sim.cycle(advance_s=1)
        if sim.job(waiting).state == JobState.RUNNING:
            break
    assert sim.job(mover).state == JobState.RUNNING
    assert sim.job(waiting).state == JobState.RUNNING
    new = Attempt.objects.get(job=mover, state=AttemptState.RUNNING)
    assert new.number == 2 and new.placements == target
    assert Attempt.objects.get(job=waiting).host_names == [hosts[mover.pk]]
    reported = {cj.attempt_id: cj for cj in adapters.for_cluster(cluster).jobs()}
    assert [p.host for p in reported[new.attempt_id].placements] == [hosts[session.pk]]
    assert_consistent(cluster)


def test_a_move_stop_that_timed_out_is_written_and_resent_and_the_move_completes(live, monkeypatch):
    """An error that is not a refusal may have reached the cluster: the stop is written
    (STOPPING, intent `migrated`) and the reconcile sends it again; the move goes on."""
    mover, session, waiting, hosts = fragment(live)
    stop = live.memory.stop

    def timed_out(attempt_id: str, grace_s: float) -> None:
        raise AdapterError("timed out talking to the controller")

    monkeypatch.setattr(live.memory, "stop", timed_out)
    assert live.cycle().stops == 1
    old = Attempt.objects.get(job=mover)
    assert old.state == AttemptState.STOPPING and old.stop_intent == AttemptEnd.MIGRATED
    monkeypatch.setattr(live.memory, "stop", stop)
    live.cycle(advance_s=31)  # resent (its grace is over: at once)
    live.cycle(advance_s=1)
    assert Attempt.objects.get(job=mover, number=2).state == AttemptState.RUNNING
    assert live.job(waiting).state == JobState.RUNNING
    assert_consistent(live.cluster, live.memory)
