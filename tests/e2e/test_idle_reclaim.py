"""Idle-GPU reclaim in the live cycle: a cluster with `idle_reclaim` on preempts a running
job whose GPUs were measured idle (`scheduler.selectors.utilization.idle_attempt_ids`,
read by each cycle from the collector's rows) first, once past its minimum
runtime; the job's events name the rule (API and CLI read them), and with
`idle_notify_owner` its owner gets an e-mail. Off (the default): nothing happens."""

from __future__ import annotations

import datetime as dt

import pytest
from django.core import mail
from rest_framework.test import APIClient

from scheduler.models import Attempt, AttemptState, JobEvent, JobState, UtilizationSample
from tests.support.live import assert_consistent

pytestmark = pytest.mark.django_db


def _measured(attempt, now, pct, seconds):
    """The utilization collector's row: `attempt` at `pct` for the last `seconds`."""
    return UtilizationSample.objects.create(
        attempt=attempt,
        cluster=attempt.cluster,
        start=now - dt.timedelta(seconds=seconds),
        end=now,
        samples=int(seconds // 15),
        mean_pct=pct,
        max_pct=pct,
        known_s=seconds,
    )


def fill_and_mark_idle(live, idle_known_s=690.0):
    """Four protected 8-GPU jobs of a1 fill the cluster (10-minute idle window); 700 s
    later (past the 600 s min runtime) the first one's GPUs were measured at 1% for
    `idle_known_s`, the others at 90%, and another a1 job of the same priority waits:
    without reclaim it may preempt none of them."""
    live.user.email = "ann@example.org"
    live.user.save()
    live.cluster.idle_reclaim_after_s = 600
    live.cluster.save()
    jobs = [live.submit("a1", gpus=8, min_runtime_s=600, duration_s=10_000) for _ in range(4)]
    assert live.cycle().starts == 4
    live.memory.advance(700)
    for job in jobs:
        attempt = Attempt.objects.get(job=job)
        _measured(attempt, live.now, 1.0 if job is jobs[0] else 90.0, 690.0)
    if idle_known_s < 690.0:  # a gap in the metrics: only the end of the window is known
        UtilizationSample.objects.filter(attempt__job=jobs[0]).update(
            start=live.now - dt.timedelta(seconds=idle_known_s), known_s=idle_known_s
        )
    waiting = live.submit("a1", gpus=8, min_runtime_s=600, duration_s=100)
    return jobs, waiting


def test_off_by_default_the_idle_job_keeps_its_gpus(live, django_capture_on_commit_callbacks):
    jobs, waiting = fill_and_mark_idle(live)
    with django_capture_on_commit_callbacks(execute=True):
        record = live.cycle()
    assert (record.stops, record.starts) == (0, 0)
    assert live.job(jobs[0]).state == JobState.RUNNING
    assert mail.outbox == []


def test_on_the_idle_job_is_preempted_with_the_rule_and_its_owner_told(
    live, django_capture_on_commit_callbacks
):
    live.cluster.idle_reclaim = True
    live.cluster.save()
    jobs, waiting = fill_and_mark_idle(live)
    with django_capture_on_commit_callbacks(execute=True):
        record = live.cycle()
    assert (record.stops, record.starts) == (1, 0)  # the waiting job waits for the GPUs
    victim = Attempt.objects.get(state=AttemptState.STOPPING)
    assert victim.job_id == jobs[0].pk and victim.preempted_by_id == waiting.pk
    event = JobEvent.objects.get(job=jobs[0], to_state=JobState.STOPPING)
    assert event.rule == "idle_reclaim" and event.reason_code == "idle"
    assert "GPUs were idle for at least 10 min" in event.reason
    assert event.reason.endswith("its owner was told by e-mail")
    assert [m.to for m in mail.outbox] == [["ann@example.org"]]
    assert f"job {jobs[0].pk}" in mail.outbox[0].subject
    assert "idle" in mail.outbox[0].body
    assert_consistent(live.cluster, live.memory)

    client = APIClient()
    client.force_authenticate(live.user)
    body = client.get(f"/api/v1/jobs/{jobs[0].pk}/").json()
    stop = [e for e in body["events"] if e["to_state"] == "stopping"]
    assert stop[0]["rule"] == "idle_reclaim"
    assert stop[0]["rule_label"] == "Idle GPUs reclaimed after the job's protection"


def test_without_notify_the_owner_gets_no_mail(live, django_capture_on_commit_callbacks):
    live.cluster.idle_reclaim = True
    live.cluster.idle_notify_owner = False
    live.cluster.save()
    jobs, _ = fill_and_mark_idle(live)
    with django_capture_on_commit_callbacks(execute=True):
        assert live.cycle().stops == 1
    event = JobEvent.objects.get(job=jobs[0], to_state=JobState.STOPPING)
    assert event.rule == "idle_reclaim" and "told" not in event.reason
    assert mail.outbox == []


def test_a_gap_in_the_metrics_is_not_idle(live, django_capture_on_commit_callbacks):
    live.cluster.idle_reclaim = True
    live.cluster.save()
    jobs, _ = fill_and_mark_idle(live, idle_known_s=120.0)  # 2 of the 10 minutes known
    with django_capture_on_commit_callbacks(execute=True):
        assert live.cycle().stops == 0
    assert live.job(jobs[0]).state == JobState.RUNNING
