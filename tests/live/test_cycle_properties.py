"""Random histories of a cluster (submissions, cancels, host failures and drains, jobs
cancelled on the cluster, an unreachable cluster, workers dying around starts) and
after every cycle the invariants: no GPU given twice, at most one open attempt per job,
a job holds GPUs exactly when it has an open attempt, no job runs twice at once on the
cluster, and every job ends up finished once the history is over."""

from __future__ import annotations

import datetime as dt

import pytest
from django.utils import timezone
from hypothesis import HealthCheck, given
from hypothesis import settings as run_settings
from hypothesis import strategies as st

from scheduler.cycle.worker import CycleWorker
from scheduler.models import Attempt, AttemptEnd, AttemptState, Host, HostHealth, Job, JobState
from scheduler.services.transitions import attempt_transition, job_transition
from tests.factories import ClusterFactory, UserFactory
from tests.live.conftest import assert_consistent, submit_job
from tests.live.memcluster import MemoryCluster

pytestmark = pytest.mark.django_db

submit = st.tuples(
    st.sampled_from(["a1", "a2", "b1"]),
    st.sampled_from([1, 2, 4, 8, 8, 16]),
    st.sampled_from([0, 0, 0, 60, 600]),
    st.booleans(),
    st.integers(10, 400),
)
event = st.one_of(
    st.tuples(st.just("advance"), st.integers(1, 120)),
    st.tuples(st.just("cancel"), st.integers(0, 50)),
    st.tuples(st.just("fail_host"), st.integers(0, 3)),
    st.tuples(st.just("recover_host"), st.integers(0, 3)),
    st.tuples(st.just("drain"), st.integers(0, 3)),
    st.tuples(st.just("undrain"), st.integers(0, 3)),
    st.tuples(st.just("cancel_outside"), st.integers(0, 50)),
    st.tuples(st.just("unreachable")),
    st.tuples(st.just("crash_start"), st.booleans()),
)
# each step: a few submissions, then one thing happening
step = st.tuples(st.lists(submit, max_size=3), event)


class Crash(BaseException):
    pass


class CrashAroundStart:
    def __init__(self, memory, after_start):
        self.memory, self.after_start = memory, after_start

    def __getattr__(self, name):
        return getattr(self.memory, name)

    def start(self, request):
        if self.after_start:
            self.memory.start(request)
        raise Crash


def cancel(job: Job, at: dt.datetime) -> None:
    """What the cancel service does (docs/architecture.md)."""
    job.refresh_from_db()
    if job.state == JobState.PENDING:
        job_transition(job=job, to_state=JobState.CANCELLED, reason="cancelled", at=at)
        return
    attempt = Attempt.objects.filter(job=job).exclude(state=AttemptState.ENDED).first()
    if attempt is None or attempt.state == AttemptState.STOPPING:
        return
    attempt.job = job
    attempt_transition(
        attempt=attempt,
        to_state=AttemptState.STOPPING,
        changes={
            "stop_intent": AttemptEnd.CANCELLED,
            "stop_requested_at": at,
            "stop_deadline": at + dt.timedelta(seconds=30),
        },
        job_steps=[JobState.STOPPING],
        reason="cancelled",
        at=at,
    )


def set_health(cluster, index: int, health: str) -> None:
    Host.objects.filter(cluster=cluster, name=f"node{index:02d}").update(health=health)


@run_settings(
    max_examples=20,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(history=st.lists(step, min_size=4, max_size=15))
def test_random_histories_keep_the_invariants(tree, settings, history):
    settings.ALLOT_START_CONFIRM_S = 15
    cluster = ClusterFactory(host_count=4, gpus_per_host=8, grace_s=30)
    memory = MemoryCluster.of(4, 8, timezone.now().replace(microsecond=0))
    user = UserFactory(username="ann")
    jobs: list[Job] = []
    worker = CycleWorker()

    def cycle(adapter=None):
        worker.run(cluster_id=cluster.pk, now=memory.now, adapter=adapter or memory)
        assert_consistent(cluster, memory)

    cycle()
    for submissions, op in history:
        for project, gpus, min_runtime, resumable, duration in submissions:
            jobs.append(
                submit_job(
                    cluster=cluster,
                    project=tree.node(project),
                    user=user,
                    at=memory.now,
                    gpus=gpus,
                    min_runtime_s=min_runtime,
                    resumable=resumable,
                    duration_s=duration,
                )
            )
        kind = op[0]
        if kind == "advance":
            memory.advance(op[1])
        elif kind == "cancel" and jobs:
            cancel(jobs[op[1] % len(jobs)], memory.now)
        elif kind == "fail_host":
            memory.fail_host(f"node{op[1]:02d}")
        elif kind == "recover_host":
            memory.recover_host(f"node{op[1]:02d}")
        elif kind == "drain":
            set_health(cluster, op[1], HostHealth.DRAINING)
        elif kind == "undrain":
            set_health(cluster, op[1], HostHealth.HEALTHY)
        elif kind == "cancel_outside" and memory.running:
            ids = sorted(memory.running)
            memory.cancel_outside(ids[op[1] % len(ids)])
        elif kind == "unreachable":
            memory.unreachable = True
            cycle()
            memory.unreachable = False
        elif kind == "crash_start":
            try:
                cycle(CrashAroundStart(memory, after_start=op[1]))
            except Crash:
                assert_consistent(cluster, memory)
        cycle()

    # the world heals and time passes: every job finishes
    for i in range(4):
        memory.recover_host(f"node{i:02d}")
        set_health(cluster, i, HostHealth.HEALTHY)
    for _ in range(60):
        memory.advance(60)
        cycle()
        if all(Job.objects.get(pk=j.pk).state in TERMINAL for j in jobs):
            break
    states = {j.pk: Job.objects.get(pk=j.pk).state for j in jobs}
    assert all(s in TERMINAL for s in states.values()), states


TERMINAL = {JobState.SUCCEEDED, JobState.FAILED, JobState.CANCELLED, JobState.PREEMPTED}
