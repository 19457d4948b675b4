"""The simulated cluster adapter against a real simulated cluster process."""

from __future__ import annotations

import datetime as dt
import itertools
import socket
import time
from collections.abc import Iterator

import pytest

from scheduler.adapters import (
    AdapterError,
    AdapterUnavailable,
    ClusterAdapter,
    ClusterJobState,
    ClusterPlacement,
    HostHealthState,
    StartRequest,
)
from scheduler.adapters.simcluster.control import SimClusterControl
from scheduler.adapters.simcluster.process import SimClusterProcess
from scheduler.adapters.simulated import SimulatedClusterAdapter
from tests.support.polling import wait_for

S = ClusterJobState


def request(attempt_id, *placements, run_for_s=None, spec=None, name="job"):
    placements = placements or (("h000", (0,)),)
    return StartRequest(
        attempt_id=attempt_id,
        job_name=name,
        gpus=sum(len(g) for _, g in placements),
        placements=tuple(ClusterPlacement(host=h, gpu_indices=tuple(g)) for h, g in placements),
        spec=spec or {},
        run_for_s=run_for_s,
        project="org/prog-a/a1",
    )


_names = itertools.count(1)


@pytest.fixture
def process(request, module_simcluster) -> SimClusterProcess:
    """The test's own process when it asks for `simcluster` (to restart, kill or stop it),
    else the module's."""
    if "simcluster" in request.fixturenames:
        return request.getfixturevalue("simcluster")
    return module_simcluster


@pytest.fixture
def cluster_name(request) -> str:
    """The cluster's name: `test` in a process of the test's own, one of its own in the
    module's."""
    return "test" if "simcluster" in request.fixturenames else f"test-{next(_names)}"


@pytest.fixture
def cluster(process, cluster_name) -> Iterator[SimClusterControl]:
    """A 2 x 8 GPU simulated cluster at speed 100 (a simulated second is 10 ms)."""
    control = SimClusterControl(process.url, cluster_name)
    control.create(hosts=2, gpus_per_host=8, speed=100, start_delay_s=1, exit_delay_s=5)
    yield control
    control.close()


@pytest.fixture
def adapter(process, cluster, cluster_name):
    adapter = SimulatedClusterAdapter(base_url=process.url, cluster=cluster_name, timeout_s=5)
    yield adapter
    adapter.close()


def job_of(adapter, attempt_id):
    return next((j for j in adapter.jobs() if j.attempt_id == attempt_id), None)


def test_adapter_implements_the_protocol(adapter):
    assert isinstance(adapter, ClusterAdapter)
    hosts = adapter.hosts()
    assert [(h.name, h.gpus, h.health) for h in hosts] == [
        ("h000", 8, HostHealthState.HEALTHY),
        ("h001", 8, HostHealthState.HEALTHY),
    ]


def test_a_started_job_runs_on_the_gpus_asked_and_ends_after_its_simulated_duration(adapter):
    job = adapter.start(request("a-1", ("h000", (2, 3)), ("h001", (0, 1)), run_for_s=30))
    assert job.attempt_id == "a-1"
    assert job.state in (S.STARTING, S.RUNNING)
    assert job.placements == (
        ClusterPlacement("h000", (2, 3)),
        ClusterPlacement("h001", (0, 1)),
    )
    assert job.external_id
    ended = wait_for(lambda: (j := job_of(adapter, "a-1")) and j.ended and j, what="the end")
    assert ended.state == S.SUCCEEDED
    assert ended.detail == "exit code 0"
    # speed 100: 30 simulated seconds last 0.3 wall seconds, after a 1 s (10 ms) start delay
    assert (ended.ended_at - ended.started_at).total_seconds() == pytest.approx(0.3, abs=1e-3)
    assert ended.started_at.tzinfo is not None
    assert abs((ended.ended_at - dt.datetime.now(dt.UTC)).total_seconds()) < 60


def test_clock_speed_is_set_per_cluster(simcluster, sim_control):
    sim_control("slow").create(hosts=1, gpus_per_host=8, speed=1, start_delay_s=0)
    sim_control("fast").create(hosts=1, gpus_per_host=8, speed=3600, start_delay_s=0)
    for name, speed in (("slow", 1), ("fast", 3600)):
        with SimulatedClusterAdapter(base_url=simcluster.url, cluster=name) as adapter:
            adapter.start(request(f"{name}-1", run_for_s=3600))
            job = job_of(adapter, f"{name}-1")
            if speed == 3600:  # a simulated hour in one wall second
                job = wait_for(lambda a=adapter, n=name: (j := job_of(a, f"{n}-1")).ended and j)
                assert job.state == S.SUCCEEDED
                assert (job.ended_at - job.started_at).total_seconds() == pytest.approx(
                    1.0, abs=1e-3
                )
            else:
                assert job.state == S.RUNNING and job.ended_at is None


def test_a_non_zero_exit_code_in_the_spec_fails_the_job(adapter):
    adapter.start(request("a-1", run_for_s=5, spec={"simulate": {"exit_code": 3}}))
    job = wait_for(lambda: (j := job_of(adapter, "a-1")).ended and j)
    assert job.state == S.FAILED
    assert "exit code 3" in job.detail


def stop_took_s(cluster, attempt_id) -> float:
    """Wall seconds from the stop request to the end, as the cluster recorded them."""
    job = next(j for j in cluster.jobs() if j["attempt_id"] == attempt_id)
    took = dt.datetime.fromisoformat(job["ended_at"]) - dt.datetime.fromisoformat(
        job["stop_requested_at"]
    )
    return took.total_seconds()


def test_stop_ends_the_job_after_its_exit_delay_and_holds_its_gpus_until_then(adapter, cluster):
    # no duration: runs until stopped; takes 150 simulated seconds (1.5 s) to exit
    adapter.start(request("a-1", ("h000", (0, 1)), spec={"simulate": {"exit_delay_s": 150}}))
    wait_for(lambda: job_of(adapter, "a-1").state == S.RUNNING)
    adapter.stop("a-1", grace_s=300)
    assert job_of(adapter, "a-1").state == S.STOPPING
    adapter.stop("a-1", grace_s=1)  # idempotent: a second stop changes nothing
    with pytest.raises(AdapterError, match="GPUs 0, 1 of host h000 are held by job"):
        adapter.start(request("a-2", ("h000", (0, 1))))
    job = wait_for(lambda: (j := job_of(adapter, "a-1")).ended and j)
    assert job.state == S.STOPPED
    assert "exited 150 s (simulated) after the stop signal" in job.detail
    assert stop_took_s(cluster, "a-1") == pytest.approx(1.5, abs=1e-3)
    assert adapter.start(request("a-2", ("h000", (0, 1)))).attempt_id == "a-2"


def test_the_cluster_exit_delay_applies_when_the_job_names_none(adapter, cluster):
    adapter.start(request("a-1"))
    adapter.stop("a-1", grace_s=30)
    job = wait_for(lambda: (j := job_of(adapter, "a-1")).ended and j)
    assert "exited 5 s (simulated)" in job.detail
    assert stop_took_s(cluster, "a-1") == pytest.approx(0.05, abs=1e-3)  # speed 100


def test_a_job_slower_than_the_grace_period_is_killed_at_its_end(adapter, cluster):
    adapter.start(request("a-1", spec={"simulate": {"exit_delay_s": 600}}))
    adapter.stop("a-1", grace_s=20)
    job = wait_for(lambda: (j := job_of(adapter, "a-1")).ended and j)
    assert job.state == S.STOPPED
    assert "killed at the end of the 20 s grace period" in job.detail
    assert stop_took_s(cluster, "a-1") == pytest.approx(0.2, abs=1e-3)


def test_a_job_that_finishes_before_its_stop_takes_effect_succeeds(adapter):
    adapter.start(request("a-1", run_for_s=2, spec={"simulate": {"exit_delay_s": 600}}))
    adapter.stop("a-1", grace_s=300)
    job = wait_for(lambda: (j := job_of(adapter, "a-1")).ended and j)
    assert job.state == S.SUCCEEDED


def test_stopping_an_attempt_the_cluster_does_not_have_is_a_no_op(adapter):
    adapter.stop("never-started", grace_s=30)
    assert adapter.jobs() == []


def test_start_is_idempotent_on_the_attempt_id(adapter):
    first = adapter.start(request("a-1", ("h000", (0, 1, 2, 3))))
    again = adapter.start(request("a-1", ("h000", (0, 1, 2, 3))))
    # even a retry that names other GPUs gets the job that exists, never a second one
    other = adapter.start(request("a-1", ("h001", (0, 1, 2, 3))))
    assert first.external_id == again.external_id == other.external_id
    assert other.placements == (ClusterPlacement("h000", (0, 1, 2, 3)),)
    assert [j.attempt_id for j in adapter.jobs()] == ["a-1"]


def test_a_start_that_times_out_after_the_cluster_accepted_it_is_adopted(
    simcluster, cluster, adapter
):
    cluster.start_timeouts(1, delay_s=1.5)
    impatient = SimulatedClusterAdapter(base_url=simcluster.url, cluster="test", timeout_s=0.5)
    try:
        job = impatient.start(request("a-1", ("h000", (0, 1))))
        assert job.attempt_id == "a-1"
        assert job.placements == (ClusterPlacement("h000", (0, 1)),)
        assert [j.attempt_id for j in adapter.jobs()] == ["a-1"]  # one job, not two
        # the hook is used up: the next start answers at once
        assert impatient.start(request("a-2", ("h000", (2,)))).attempt_id == "a-2"
    finally:
        impatient.close()
    assert cluster.info()["pending_start_timeouts"] == 0


@pytest.mark.parametrize(
    "placements, message",
    [
        ((("h000", (8,)),), "must be distinct indices 0..7 of host h000"),
        ((("h000", (1, 1)),), "must be distinct indices"),
        ((("h009", (0,)),), "has no host named 'h009'"),
        ((("h000", (0,)), ("h000", (1,))), "appears twice"),
        ((), "placements: must be a non-empty list"),
    ],
)
def test_malformed_starts_are_refused_with_the_reason(adapter, placements, message):
    start = StartRequest(
        attempt_id="bad",
        job_name="bad",
        gpus=max(1, sum(len(g) for _, g in placements)),
        placements=tuple(ClusterPlacement(h, tuple(g)) for h, g in placements),
    )
    with pytest.raises(AdapterError, match=message) as refused:
        adapter.start(start)
    assert refused.value.retryable is False
    assert adapter.jobs() == []


def test_a_gpu_count_that_disagrees_with_the_placements_is_refused(adapter):
    start = StartRequest(
        attempt_id="bad", job_name="x", gpus=4, placements=(ClusterPlacement("h000", (0, 1)),)
    )
    with pytest.raises(AdapterError, match="gpus: is 4 but the placements name 2 GPUs"):
        adapter.start(start)


def test_a_start_on_busy_gpus_is_refused_not_silently_accepted(adapter):
    adapter.start(request("a-1", ("h000", (0, 1, 2, 3))))
    with pytest.raises(
        AdapterError, match=r"GPUs 2, 3 of host h000 are held by job \d+ \(attempt a-1"
    ) as e:
        adapter.start(request("a-2", ("h000", (2, 3, 4, 5))))
    assert e.value.retryable is False
    assert adapter.start(request("a-3", ("h000", (4, 5, 6, 7)))).attempt_id == "a-3"
    assert sorted(j.attempt_id for j in adapter.jobs()) == ["a-1", "a-3"]


def test_a_failed_host_loses_its_jobs_and_takes_no_new_ones_until_it_recovers(adapter, cluster):
    adapter.start(request("on-h0", ("h000", (0,))))
    adapter.start(request("gang", ("h000", (4, 5, 6, 7)), ("h001", (4, 5, 6, 7))))
    adapter.start(request("on-h1", ("h001", (0,))))
    cluster.fail_host("h000", reason="GPU 3 fell off the bus")
    jobs = {j.attempt_id: j for j in adapter.jobs()}
    assert jobs["on-h0"].state == S.LOST
    assert jobs["gang"].state == S.LOST  # one of its hosts failed
    assert jobs["on-h0"].detail == "host h000 failed: GPU 3 fell off the bus"
    assert jobs["on-h0"].ended_at is not None
    assert jobs["on-h1"].state in (S.STARTING, S.RUNNING)
    hosts = {h.name: h for h in adapter.hosts()}
    assert hosts["h000"].health == HostHealthState.DOWN
    assert hosts["h000"].reason == "GPU 3 fell off the bus"
    with pytest.raises(AdapterError, match="host h000 is down"):
        adapter.start(request("new", ("h000", (1,))))
    cluster.recover_host("h000")
    assert {h.name: h.health for h in adapter.hosts()}["h000"] == HostHealthState.HEALTHY
    assert adapter.start(request("new", ("h000", (0,)))).attempt_id == "new"


def test_a_drained_host_keeps_its_jobs_but_takes_no_new_ones(adapter):
    adapter.start(request("a-1", ("h001", (0, 1))))
    adapter.set_host_health("h001", HostHealthState.DRAINING, "bad fan")
    host = {h.name: h for h in adapter.hosts()}["h001"]
    assert (host.health, host.reason) == (HostHealthState.DRAINING, "bad fan")
    assert job_of(adapter, "a-1").state in (S.STARTING, S.RUNNING)
    with pytest.raises(AdapterError, match=r"host h001 is draining \(bad fan\)"):
        adapter.start(request("a-2", ("h001", (4,))))
    adapter.set_host_health("h001", HostHealthState.HEALTHY, "fan replaced")
    assert adapter.start(request("a-2", ("h001", (4,)))).attempt_id == "a-2"


def test_setting_a_host_down_loses_its_jobs(adapter):
    adapter.start(request("a-1", ("h001", (0,))))
    adapter.set_host_health("h001", HostHealthState.DOWN, "maintenance")
    job = job_of(adapter, "a-1")
    assert job.state == S.LOST and "host h001 was set down: maintenance" in job.detail


def test_a_job_cancelled_outside_allot_is_reported_cancelled(adapter, cluster):
    adapter.start(request("a-1", ("h000", (0,))))
    cluster.cancel(attempt_id="a-1", reason="scancel by root")
    job = job_of(adapter, "a-1")
    assert job.state == S.CANCELLED
    assert job.detail == "cancelled outside Allot: scancel by root"
    # by the cluster's own job id as well
    second = adapter.start(request("a-2", ("h000", (1,))))
    cluster.cancel(job_id=int(second.external_id))
    assert job_of(adapter, "a-2").state == S.CANCELLED


def test_foreign_jobs_are_reported_without_an_attempt_id_and_hold_their_gpus(adapter, cluster):
    foreign = cluster.foreign_job([("h001", (0, 1))], run_for_s=None)
    jobs = adapter.jobs()
    assert [(j.attempt_id, j.external_id) for j in jobs] == [("", str(foreign["job_id"]))]
    assert jobs[0].placements == (ClusterPlacement("h001", (0, 1)),)
    with pytest.raises(AdapterError, match=r"held by job \d+ \(foreign"):
        adapter.start(request("a-1", ("h001", (1,))))


def test_ended_jobs_are_reported_for_the_retention_period_then_forgotten(simcluster, sim_control):
    sim_control("short").create(hosts=1, gpus_per_host=8, speed=100, retention_s=1)
    with SimulatedClusterAdapter(base_url=simcluster.url, cluster="short") as adapter:
        adapter.start(request("a-1", run_for_s=1))
        wait_for(lambda: job_of(adapter, "a-1").ended)
        wait_for(lambda: job_of(adapter, "a-1") is None, what="the job to be forgotten")
        # a forgotten attempt is never run a second time
        with pytest.raises(AdapterError, match="already ran on this cluster and ended"):
            adapter.start(request("a-1", run_for_s=1))


def test_clusters_in_one_process_are_independent(simcluster, sim_control):
    for name in ("east", "west"):
        sim_control(name).create(hosts=1, gpus_per_host=4)
    with (
        SimulatedClusterAdapter(base_url=simcluster.url, cluster="east") as east,
        SimulatedClusterAdapter(base_url=simcluster.url, cluster="west") as west,
    ):
        east.start(request("e-1", ("h000", (0, 1, 2, 3))))
        west.start(request("w-1", ("h000", (0, 1, 2, 3))))  # same host name, other cluster
        assert [j.attempt_id for j in east.jobs()] == ["e-1"]
        assert [j.attempt_id for j in west.jobs()] == ["w-1"]


def test_the_adapter_registers_a_cluster_the_process_does_not_know(simcluster):
    shape = {"hosts": 3, "gpus_per_host": 4, "speed": 60}
    with SimulatedClusterAdapter(
        base_url=simcluster.url, cluster="fresh", registration=shape
    ) as adapter:
        assert [h.name for h in adapter.hosts()] == ["h000", "h001", "h002"]
    with (
        SimulatedClusterAdapter(base_url=simcluster.url, cluster="nameless") as adapter,
        pytest.raises(AdapterError, match="has no cluster 'nameless'"),
    ):
        adapter.jobs()


def test_a_restarted_process_keeps_its_jobs_and_ends_those_whose_time_came(
    simcluster, cluster, adapter
):
    adapter.start(request("long", ("h000", (0,)), spec={"simulate": {"exit_delay_s": 100}}))
    short = adapter.start(request("short", ("h000", (1,)), run_for_s=50))
    adapter.stop("long", grace_s=300)  # stopping across the crash: exits 1 s after the stop
    adapter.start(request("longer", ("h001", (0,)), run_for_s=None))
    simcluster.kill()  # SIGKILL: only what was committed survives
    time.sleep(0.6)  # the short job's planned end (0.5 s after its start) passes meanwhile
    simcluster.start()
    jobs = {j.attempt_id: j for j in adapter.jobs()}  # the same adapter reconnects
    assert jobs["short"].state == S.SUCCEEDED
    assert jobs["short"].external_id == short.external_id
    assert (jobs["short"].ended_at - jobs["short"].started_at).total_seconds() == pytest.approx(
        0.5, abs=1e-3
    )
    # the stop asked before the crash still takes effect at its planned time (1 s later)
    assert wait_for(lambda: (j := job_of(adapter, "long")).ended and j).state == S.STOPPED
    assert stop_took_s(cluster, "long") == pytest.approx(1.0, abs=1e-3)
    assert jobs["longer"].state == S.RUNNING
    # adopt-before-retry holds across the restart
    assert (
        adapter.start(request("longer", ("h001", (0,)))).external_id == jobs["longer"].external_id
    )


def test_an_unreachable_process_is_reported_as_unavailable(simcluster, cluster, adapter):
    adapter.jobs()
    simcluster.stop()
    with pytest.raises(AdapterUnavailable, match="cannot reach the simulated cluster 'test'"):
        adapter.jobs()
    with pytest.raises(AdapterUnavailable):
        adapter.hosts()
    with pytest.raises(AdapterUnavailable):
        adapter.start(request("a-1"))
    with pytest.raises(AdapterUnavailable):
        adapter.stop("a-1", grace_s=30)
    with pytest.raises(AdapterUnavailable):
        adapter.set_host_health("h000", HostHealthState.DRAINING, "x")


def test_beyond_the_count_the_oldest_ended_jobs_are_forgotten(simcluster, sim_control):
    sim_control("few").create(hosts=1, gpus_per_host=8, speed=1000, max_ended=2, start_delay_s=0)
    with SimulatedClusterAdapter(base_url=simcluster.url, cluster="few") as adapter:
        for i in range(4):
            adapter.start(request(f"a-{i}", ("h000", (i,)), run_for_s=1))
            wait_for(lambda i=i: job_of(adapter, f"a-{i}").ended)
            time.sleep(0.01)  # distinct end times
        wait_for(  # ends are forgotten at most once a second: poll for it
            lambda: len(adapter.jobs()) <= 2, what="the ended jobs beyond max_ended=2 forgotten"
        )
        assert sorted(j.attempt_id for j in adapter.jobs()) == ["a-2", "a-3"]


def test_a_job_stopped_while_starting_never_runs(simcluster, sim_control):
    sim_control("slowstart").create(hosts=1, gpus_per_host=8, speed=100, start_delay_s=30)
    with SimulatedClusterAdapter(base_url=simcluster.url, cluster="slowstart") as adapter:
        assert adapter.start(request("a-1")).state == S.STARTING
        adapter.stop("a-1", grace_s=0)
        job = wait_for(lambda: (j := job_of(adapter, "a-1")).ended and j)
        assert job.state == S.STOPPED
        assert job.started_at is None


def test_downtime_of_the_process_does_not_use_up_the_retention_of_ends(simcluster, sim_control):
    sim_control("brief").create(hosts=1, gpus_per_host=8, speed=100, retention_s=1)
    with SimulatedClusterAdapter(base_url=simcluster.url, cluster="brief") as adapter:
        adapter.start(request("a-1", run_for_s=10))  # ends 0.1 s later, while the process is down
        simcluster.kill()
        time.sleep(1.5)  # longer than the retention period
        simcluster.start()
        job = job_of(adapter, "a-1")  # reported, not forgotten: its end was never reported
        assert job is not None and job.state == S.SUCCEEDED
        wait_for(lambda: job_of(adapter, "a-1") is None, what="the end to be forgotten")


def test_a_cluster_that_accepts_but_never_answers_is_a_retryable_error():
    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen(16)  # connections queue, nobody answers
    url = f"http://127.0.0.1:{silent.getsockname()[1]}"
    try:
        with SimulatedClusterAdapter(base_url=url, cluster="c", timeout_s=0.2) as adapter:
            with pytest.raises(AdapterError, match="did not answer in time") as error:
                adapter.jobs()
            assert error.value.retryable and not isinstance(error.value, AdapterUnavailable)
            # a start is never sent twice: it is looked up, and that gets no answer either
            with pytest.raises(AdapterError) as error:
                adapter.start(request("a-1"))
            assert error.value.retryable
    finally:
        silent.close()


def test_a_port_nobody_listens_on_is_unavailable():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    with (
        SimulatedClusterAdapter(base_url=f"http://127.0.0.1:{port}", cluster="c") as adapter,
        pytest.raises(
            AdapterUnavailable,
            match=f"cannot reach the simulated cluster 'c' at http://127.0.0.1:{port}",
        ),
    ):
        adapter.hosts()
