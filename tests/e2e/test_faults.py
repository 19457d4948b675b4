"""Faults with real processes: Celery workers killed with SIGKILL at random points of
100 cycles, two workers at once, Redis stopped until the worker has failed to reconnect
several times. The simulated cluster process is the cluster; the checks read its own
record of what ran."""

from __future__ import annotations

import datetime as dt
import os
import random
import time
from collections import defaultdict

import pytest
from django.conf import settings
from django.utils import timezone
from kombu import pools as kombu_pools

from config.celery import app
from ledger.selectors import window_usage
from scheduler import tasks
from scheduler.models import Attempt, AttemptState, CycleRecord, Job, JobState
from tests.factories import UserFactory
from tests.support.live import submit_job
from tests.support.ports import free_port
from tests.support.workers import RedisServer, WorkerProcess

pytestmark = pytest.mark.django_db(transaction=True)
SIM = {"start_delay_s": 1, "exit_delay_s": 2}  # simulated seconds, at speed 20
# Redis of the outage test: a server of its own, on a free port unless this names one.
OUTAGE_REDIS_PORT = os.environ.get("ALLOT_TEST_REDIS_PORT", "")
# The outage lasts until the worker has failed this many reconnections (Celery waits 2, 4,
# 6 s between them): it was cut off, kept trying, and must come back by itself.
OUTAGE_RECONNECTS = 3
# Cycles between two kills of the worker (a random number in this range): 100 cycles
# see 8 to 30 kills however fast the machine is.
KILL_EVERY = (3, 12)


@pytest.fixture
def workers(tmp_path):
    started: list[WorkerProcess] = []

    def start(**kwargs) -> WorkerProcess:
        kwargs.setdefault("redis_url", settings.REDIS_URL)
        worker = WorkerProcess(tmp_path, **kwargs).start()
        started.append(worker)
        return worker

    yield start
    for worker in started:
        worker.stop()


def cluster_jobs(sim_control, name: str) -> list[dict]:
    with sim_control(name) as control:
        return control.jobs()


def wait_until(predicate, *, timeout_s: float, tick=None, what: str = "it"):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return
        if tick:
            tick()
        time.sleep(0.25)
    raise AssertionError(f"timed out waiting for {what}")


def when(value: str | None) -> dt.datetime | None:
    return dt.datetime.fromisoformat(value) if value else None


def assert_ran_as_recorded(cluster, ran: list[dict]) -> None:
    """No job ran twice at once, every run is an Allot attempt, Allot's attempts carry
    the cluster's own start and end times, and the ledger charges exactly those runs."""
    attempts = {a.attempt_id: a for a in Attempt.objects.filter(cluster=cluster)}
    assert {r["attempt_id"] for r in ran} <= set(attempts)  # nothing Allot does not know
    runs = defaultdict(list)
    charged = 0.0
    for r in ran:
        attempt = attempts[r["attempt_id"]]
        assert attempt.started_at == when(r["started_at"]), attempt
        assert attempt.ended_at == when(r["ended_at"]), attempt
        if r["started_at"]:
            runs[attempt.job_id].append((when(r["started_at"]), when(r["ended_at"])))
            if attempt.allocated:
                charged += r["gpus"] * (when(r["ended_at"]) - when(r["started_at"])).total_seconds()
    for job_id, intervals in runs.items():
        intervals.sort()
        for (_, end), (start, _) in zip(intervals, intervals[1:], strict=False):
            assert end <= start, f"job {job_id} ran twice at once: {intervals}"
    usage = window_usage(cluster_id=cluster.pk, now=timezone.now(), lookback_s=7 * 86400)
    assert sum(usage.values()) == pytest.approx(charged, rel=1e-9, abs=1e-6)


def _random_job(cluster, tree, user, rng: random.Random) -> Job:
    """A resumable sweep, training or debug job of 1-8 GPUs, 1-5 s long (simulated)."""
    kind = rng.choice(["sweep", "training", "debug"])
    return submit_job(
        cluster=cluster,
        project=tree.node(rng.choice(["a1", "a2", "b1"])),
        user=user,
        at=timezone.now(),
        gpus=rng.choice([1, 2, 4, 8]),
        min_runtime_s=0 if kind == "sweep" else rng.choice([1, 3]),
        resumable=True,
        kind=kind,
        duration_s=rng.randint(20, 100),  # simulated: 1-5 s
    )


def _median_cycle_s(cluster) -> float:
    """How long the last finished cycles took (their median), in seconds."""
    done = CycleRecord.objects.filter(cluster=cluster, duration_ms__isnull=False)
    recent = sorted(done.order_by("-id").values_list("duration_ms", flat=True)[:5])
    return recent[len(recent) // 2] / 1000 if recent else 0.3


def test_workers_killed_at_random_points_of_100_cycles_lose_nothing(
    tree, make_simulated_cluster, sim_control, broker, workers
):
    cluster = make_simulated_cluster(
        name="kills", hosts=4, gpus_per_host=8, speed=20, grace_s=2, adapter_options=SIM
    )
    rng = random.Random(9)
    user = UserFactory(username="ann")
    jobs: list[Job] = []

    def submit() -> None:
        jobs.append(_random_job(cluster, tree, user, rng))

    def cycle() -> None:
        tasks.run_cycle.apply_async((cluster.pk,))

    def cycles() -> int:
        return CycleRecord.objects.filter(cluster=cluster).count()

    def crashed() -> int:
        return CycleRecord.objects.filter(cluster=cluster, duration_ms__isnull=True).count()

    def cycle_s() -> float:
        return _median_cycle_s(cluster)

    control = sim_control("kills")
    worker = workers()
    kills = 0
    # Every KILL_EVERY cycles (at random) a kill, aimed in turn at a random point of the
    # next cycle to begin (a random fraction of how long cycles take) and at the moment
    # the cluster has accepted a start (the start told, the cycle not over). Where they
    # land does not depend on how long a worker takes to start (a restart, 2-10 s, is
    # most of the test's time). A cycle may end before its kill, so the kills go on
    # until one has cut a cycle short.
    next_kill, armed, kill_at, told = rng.randint(*KILL_EVERY), None, None, None
    # the cycles counted once a turn of this 20-ms loop (it counted up to four times)
    while (counted := cycles()) < 100 or kills < 5 or (crashed() == 0 and kills < 40):
        if len(jobs) < 60 and rng.random() < 0.3:
            submit()
        if broker.llen("celery") < 2:  # keep the worker busy: kills land inside cycles
            cycle()
        if armed is None and kill_at is None and told is None and counted >= next_kill:
            armed = counted
            if kills % 2:
                told = len(control.jobs())
        if told is not None:  # the first start the cluster accepts from now (or give up)
            if len(control.jobs()) > told or counted > armed + 2 * KILL_EVERY[1]:
                armed, told, kill_at = None, None, time.monotonic()
        elif armed is not None and counted > armed:  # the next cycle, somewhere in it
            armed, kill_at = None, time.monotonic() + rng.uniform(0.0, cycle_s())
        if kill_at is not None and time.monotonic() >= kill_at:
            worker.kill()
            kills += 1
            worker.start()
            next_kill, kill_at = cycles() + rng.randint(*KILL_EVERY), None
        time.sleep(0.02)
    assert kills >= 5
    cut_short = crashed()

    # no more kills: every job finishes
    wait_until(
        lambda: not Job.objects.filter(cluster=cluster).exclude(state=JobState.SUCCEEDED).exists(),
        timeout_s=120,
        tick=lambda: broker.llen("celery") < 2 and cycle(),
        what="every job to succeed",
    )
    assert len(jobs) >= 20 and cut_short >= 1
    assert not Attempt.objects.filter(cluster=cluster).exclude(state=AttemptState.ENDED).exists()
    errors = [e for r in CycleRecord.objects.filter(cluster=cluster) for e in r.errors]
    assert not [e for e in errors if "busy" in e or "already ran" in e], errors
    assert_ran_as_recorded(cluster, cluster_jobs(sim_control, "kills"))


def test_two_workers_run_one_cycle_at_a_time_per_cluster(
    tree, make_simulated_cluster, sim_control, broker, workers
):
    clusters = [
        make_simulated_cluster(
            name=name, hosts=2, gpus_per_host=8, speed=20, grace_s=2, adapter_options=SIM
        )
        for name in ("left", "right")
    ]
    user = UserFactory(username="ann")
    for cluster in clusters:
        for gpus in (1, 2, 4, 8, 8, 8):
            submit_job(
                cluster=cluster,
                project=tree.node("a1"),
                user=user,
                at=timezone.now(),
                gpus=gpus,
                duration_s=40,
            )
    first, second = workers(), workers()
    for _ in range(40):
        for cluster in clusters:
            tasks.run_cycle.apply_async((cluster.pk,))
    wait_until(lambda: broker.llen("celery") == 0, timeout_s=120, what="the queue to drain")
    wait_until(  # then every job finishes (the cycles that see it are asked for here)
        lambda: not Job.objects.exclude(state=JobState.SUCCEEDED).exists(),
        timeout_s=60,
        tick=lambda: [tasks.run_cycle.apply_async((c.pk,)) for c in clusters],
        what="every job to succeed",
    )
    # Stopped (SIGTERM: each finishes the cycle it runs), the workers start no cycle
    # after the checks read the records: with the queue empty, a worker could still
    # begin a task it had fetched ahead, and its open record failed the check.
    first.stop()
    second.stop()
    wait_until(
        lambda: not CycleRecord.objects.filter(duration_ms__isnull=True).exists(),
        timeout_s=60,
        what="the last cycles to finish",
    )
    for cluster in clusters:
        spans = sorted(
            (r.started_at, r.started_at + dt.timedelta(milliseconds=r.duration_ms))
            for r in CycleRecord.objects.filter(cluster=cluster)
        )
        assert spans and all(
            end <= start for (_, end), (start, _) in zip(spans, spans[1:], strict=False)
        )
        assert not any(e for r in CycleRecord.objects.filter(cluster=cluster) for e in r.errors)
    # both workers ran cycles
    assert "scheduler.run_cycle" in first.log() and "scheduler.run_cycle" in second.log()
    for cluster in clusters:
        assert_ran_as_recorded(cluster, cluster_jobs(sim_control, cluster.name))


def _reset_broker_pools() -> None:
    """Celery keeps its broker connections in pools, its result backend (with its Redis
    URL) per app or thread, and in the app's AMQP object the queue entities, the router
    and a task sender that captured them; drop them all so the next task and the next
    result go to the broker and backend now configured. A queue left bound to a channel
    of this test's stopped Redis failed a later test of the same xdist worker that
    published a task (a URL change happens only in tests)."""
    kombu_pools.reset()  # the process-wide connection and producer pools, by broker
    app._pool = None
    app.__dict__.pop("amqp", None)  # a fresh AMQP object: queues, router, task sender
    app._backend_cache = None
    app._local.__dict__.pop("backend", None)


@pytest.fixture
def own_redis(tmp_path, settings):
    """A redis-server of this test alone, used as Redis and broker by this process."""
    server = RedisServer(int(OUTAGE_REDIS_PORT or free_port()), tmp_path).start()
    saved = (settings.REDIS_URL, app.conf.broker_url, app.conf.result_backend)
    settings.REDIS_URL = server.url
    app.conf.broker_url = app.conf.result_backend = server.url
    _reset_broker_pools()
    app.conf.task_always_eager = False
    try:
        yield server
    finally:
        server.stop()
        settings.REDIS_URL = saved[0]
        app.conf.broker_url, app.conf.result_backend = saved[1], saved[2]
        _reset_broker_pools()
        app.conf.task_always_eager = True


def test_redis_down_submissions_succeed_and_cycles_resume(
    tree, make_simulated_cluster, own_redis, workers, api_client
):
    cluster = make_simulated_cluster(
        name="outage", hosts=2, gpus_per_host=8, speed=20, adapter_options=SIM, cycle_s=1
    )
    api_client.force_authenticate(tree.user("ann"))  # a member of a1

    def submit() -> Job:
        response = api_client.post(
            "/api/v1/jobs/",
            {
                "project": "org/prog-a/a1",
                "cluster": cluster.name,
                "name": "outage",
                "gpus": 2,
                "min_runtime_s": 600,
            },
            format="json",
        )
        assert response.status_code == 201, response.json()
        return Job.objects.get(pk=response.json()["jobs"][0]["id"])

    def running(*jobs: Job) -> bool:
        return all(Job.objects.get(pk=j.pk).state == JobState.RUNNING for j in jobs)

    worker = workers(redis_url=own_redis.url)
    before = submit()
    wait_until(lambda: running(before), timeout_s=60, tick=tasks.enqueue_due_cycles, what="before")

    own_redis.stop()
    retries_before = worker.log().count("Trying again in")
    # a cycle the worker had already taken from Redis still runs: let it finish
    wait_until(
        lambda: not CycleRecord.objects.filter(cluster=cluster, duration_ms__isnull=True).exists(),
        timeout_s=30,
        what="the cycle in flight",
    )
    # the worker has lost its broker (it is retrying) before anything is submitted
    wait_until(
        lambda: worker.log().count("Trying again in") > retries_before,
        timeout_s=60,
        what="the worker to notice that Redis is gone",
    )
    during = [submit() for _ in range(3)]  # no error reaches the submitter
    ticks = 0

    def tick() -> None:  # beat keeps ticking; its requests are logged, not raised
        nonlocal ticks
        tasks.enqueue_due_cycles()
        ticks += 1

    wait_until(
        lambda: (
            ticks >= 5
            and worker.log().count("Trying again in") - retries_before >= OUTAGE_RECONNECTS
        ),
        timeout_s=120,
        tick=tick,
        what=f"the worker to fail {OUTAGE_RECONNECTS} reconnections",
    )
    assert worker.alive
    assert all(Job.objects.get(pk=j.pk).state == JobState.PENDING for j in during)

    own_redis.start()
    wait_until(
        lambda: running(*during),
        timeout_s=120,
        tick=tasks.enqueue_due_cycles,
        what="cycles to resume after Redis came back",
    )
