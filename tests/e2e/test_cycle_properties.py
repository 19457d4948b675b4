"""Random histories of a cluster (submissions and cancels through the job services,
host failures and drains, jobs cancelled on the cluster, an unreachable cluster,
workers dying around starts) and after every cycle the invariants: no GPU given twice,
at most one open attempt per job, a job holds GPUs exactly when it has an open
attempt, no job runs twice at once on the cluster, and every job ends up finished once
the history is over.

Each example runs in a savepoint rolled back at its end, so every example starts from
the same database (the example tree; its cluster, jobs and cycles are its own). The
test counts the cases its examples reached and fails if one it is built to reach (a
priority preemption, the short-job reserve holding hosts, a cancel of running work...)
was not reached often enough."""

from __future__ import annotations

from collections import Counter

import pytest
from django.db import transaction
from django.utils import timezone
from hypothesis import HealthCheck, example, given
from hypothesis import settings as run_settings
from hypothesis import strategies as st

from scheduler.cycle.worker import CycleWorker
from scheduler.models import Host, HostHealth, Job, JobEvent, JobState
from scheduler.services.jobs import job_cancel
from tests.factories import ClusterFactory, UserFactory
from tests.support.live import assert_consistent, submit_job
from tests.support.memcluster import MemoryCluster

pytestmark = pytest.mark.django_db

submit = st.tuples(
    st.sampled_from(["a1", "a2", "b1"]),
    st.sampled_from([1, 2, 4, 8, 8, 16]),
    st.sampled_from([0, 0, 0, 60, 600]),
    st.booleans(),
    st.integers(10, 400),
    st.sampled_from([0, 0, 1, 2]),
)
event = st.one_of(
    st.tuples(st.just("advance"), st.integers(1, 120)),
    st.tuples(st.just("cancel"), st.integers(0, 50)),
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
# 20 generated histories (and the explicit one) reach every counted case at least twice
# its floor, the priority preemption aside (the explicit history's; 30 reached it no more
# often): drain 4, cancel of a pending job 9, of running work 10, the reserve holding
# hosts 18, fair-share or unallocated preemption 16 (30 reached 5 / 23 / 14 / 27 / 23,
# for half again the time). The examples are derandomized (tests/conftest.py): the same
# 20 on every run.
EXAMPLES = 20
# A history that reaches every case counted below (the random ones reach them too, less
# surely): a1 fills the cluster with low-priority work, its urgent job preempts some
# of it, a host drains, a pending and a running job are cancelled.
REACHES_EVERY_CASE = [
    (
        [("a1", 16, 60, True, 400, 0), ("a1", 8, 60, True, 400, 0), ("a1", 8, 60, True, 400, 0)],
        ("advance", 90),
    ),
    ([("a1", 8, 60, True, 300, 2), ("b1", 4, 0, True, 300, 0)], ("advance", 90)),
    ([("a2", 8, 600, False, 300, 0)], ("drain", 3)),
    ([("b1", 2, 60, False, 100, 0)], ("cancel", 5)),
    ([], ("cancel", 2)),
    ([], ("advance", 60)),
]


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


def set_health(cluster, index: int, health: str) -> None:
    Host.objects.filter(cluster=cluster, name=f"node{index:02d}").update(health=health)


def test_random_histories_keep_the_invariants(tree, settings):
    settings.ALLOT_START_CONFIRM_S = 15
    seen: Counter[str] = Counter()

    @run_settings(
        max_examples=EXAMPLES,
        deadline=None,
        suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
    )
    @given(history=st.lists(step, min_size=4, max_size=15), reserve=st.sampled_from([0, 1, 1]))
    @example(history=REACHES_EVERY_CASE, reserve=1)
    def check(history, reserve: int) -> None:
        with transaction.atomic():  # a savepoint: the example's rows go at its end
            run_history(tree, history, reserve, seen)
            transaction.set_rollback(True)

    check()
    # Floors well below what EXAMPLES reach (the histories are random; the explicit
    # example reaches each case once): each fails if a change to the generator or to
    # the product stops reaching the case.
    for case, floor in (
        ("priority preemption", 1),
        ("fair-share or unallocated preemption", 5),
        ("short-job reserve holding hosts", 3),
        ("cancel of a pending job", 3),
        ("cancel of running work", 3),
        ("drain", 1),
    ):
        assert seen[case] >= floor, (case, dict(seen))


def run_history(tree, history, reserve: int, seen: Counter[str]) -> None:
    cluster = ClusterFactory(host_count=4, gpus_per_host=8, grace_s=30)
    cluster.short_reserve_hosts = reserve
    cluster.save(update_fields=["short_reserve_hosts"])
    memory = MemoryCluster.of(4, 8, timezone.now().replace(microsecond=0))
    user = UserFactory(username="ann")
    jobs: list[Job] = []
    worker = CycleWorker()
    reached: set[str] = set()
    cancelled: set[int] = set()  # jobs cancelled while pending or running

    def cycle(adapter=None):
        record = worker.run(cluster_id=cluster.pk, now=memory.now, adapter=adapter or memory)
        states = assert_consistent(cluster, memory)
        # the hosts the cycle's plan held (what short_reserve_now reads back from the
        # last planned cycle's record; read here from the record itself, no query)
        if record is not None and record.short_reserve_hosts:
            reached.add("short-job reserve holding hosts")
        return states  # every job of the example's cluster, as the check read them

    cycle()
    for submissions, op in history:
        for project, gpus, min_runtime, resumable, duration, priority in submissions:
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
                    priority=priority,
                )
            )
        kind = op[0]
        if kind == "advance":
            memory.advance(op[1])
        elif kind == "cancel" and jobs:
            _cancel(jobs[op[1] % len(jobs)], user, memory, reached, cancelled)
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

    _heal_until_all_end(cluster, memory, jobs, cycle, cancelled)
    _stops_reached(cluster, reached)
    seen.update(reached)


def _cancel(job: Job, user, memory, reached: set[str], cancelled: set[int]) -> None:
    """Cancel `job` as its owner: a pending job ends cancelled, running work stops."""
    job = Job.objects.get(pk=job.pk)
    after = job_cancel(actor=user, job_id=job.pk, now=memory.now).state
    if job.state == JobState.PENDING:
        reached.add("cancel of a pending job")
        assert after == JobState.CANCELLED
        cancelled.add(job.pk)
    elif job.state in (JobState.STARTING, JobState.RUNNING):
        reached.add("cancel of running work")
        assert after == JobState.STOPPING
        cancelled.add(job.pk)


def _heal_until_all_end(cluster, memory, jobs: list[Job], cycle, cancelled: set[int]) -> None:
    """The world heals and time passes: every job ends, the cancelled ones cancelled."""
    for i in range(4):
        memory.recover_host(f"node{i:02d}")
        set_health(cluster, i, HostHealth.HEALTHY)
    for _ in range(180):  # the adaptive short-job reserve may hold a host up to 30 min
        memory.advance(60)
        states = cycle()  # the cluster is the example's own: its jobs are `jobs`
        if set(states.values()) <= TERMINAL:
            break
    assert set(states) == {j.pk for j in jobs}
    assert all(s in TERMINAL for s in states.values()), states
    assert {pk: states[pk] for pk in cancelled} == dict.fromkeys(cancelled, JobState.CANCELLED)


def _stops_reached(cluster, reached: set[str]) -> None:
    """The kinds of stop the history reached, from the cluster's job events."""
    stops = set(JobEvent.objects.filter(job__cluster=cluster).values_list("reason_code", flat=True))
    if "priority" in stops:
        reached.add("priority preemption")
    if stops & {"fair_share", "unallocated"}:
        reached.add("fair-share or unallocated preemption")
    if stops & {"drain", "host_down"}:
        reached.add("drain")


TERMINAL = {JobState.SUCCEEDED, JobState.FAILED, JobState.CANCELLED, JobState.PREEMPTED}
