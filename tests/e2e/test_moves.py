"""Consolidation in the live cycle (`scheduler.cycle.moves`): a planned migration stops
the moved job through the adapter, starts it again on its planned hosts once the
cluster reports the stop (before the plan, in the same reconcile), and the block it
left goes to the waiting job it was moved for. A protected job never moves; a stop the
cluster refuses leaves everything as it was."""

from __future__ import annotations

import pytest
from django.test import Client
from rest_framework.test import APIClient

from scheduler.adapters import AdapterError
from scheduler.models import Attempt, AttemptEnd, AttemptState, JobEvent, JobState
from scheduler.selectors.translate import policy_for_cluster
from tests.support.live import assert_consistent

pytestmark = pytest.mark.django_db

HOUR = 3600


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
    live.memory.advance(1900)  # the brief job ended; the mover checkpointed at 1,800 s
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

    def refuse(attempt_id: str, grace_s: float) -> None:
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
