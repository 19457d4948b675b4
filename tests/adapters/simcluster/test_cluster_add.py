"""`manage.py cluster_add` and `cluster_create`: a cluster, its hosts, and the cluster in
the simulated cluster process."""

from __future__ import annotations

import httpx
import pytest
from django.core.management import CommandError, call_command

from config.errors import PermissionDenied
from scheduler.adapters import ClusterPlacement, HostHealthState, StartRequest, for_cluster
from scheduler.adapters.simulated import SimulatedClusterAdapter
from scheduler.models import Cluster, Host
from scheduler.selectors.translate import policy_for_cluster
from scheduler.services.clusters import cluster_create
from tests.commands import run_manage
from tests.factories import SuperUserFactory, UserFactory

pytestmark = pytest.mark.django_db


def add(*args: str) -> str:
    from io import StringIO

    out = StringIO()
    call_command("cluster_add", *args, stdout=out)
    return out.getvalue()


def test_cluster_add_creates_the_cluster_its_hosts_and_the_simulated_cluster(
    simcluster, sim_control
):
    out = add(
        "gpu-a", "--adapter", "simulated", "--hosts", "3", "--gpus-per-host", "4",
        "--speed", "60", "--cycle-s", "5", "--grace-s", "20", "--max-min-runtime", "2h",
        "--short-reserve-hosts", "1", "--short-job-max", "10m", "--url", simcluster.url,
        "--short-reserve-auto", "off", "--reservation-admit-min", "15",
    )  # fmt: skip
    assert "Added cluster 'gpu-a': 3 hosts x 4 GPUs (12 GPUs), simulated" in out
    cluster = Cluster.objects.get(name="gpu-a")
    assert (cluster.host_count, cluster.gpus_per_host, cluster.adapter) == (3, 4, "simulated")
    assert (cluster.cycle_s, cluster.grace_s, cluster.max_min_runtime_s) == (5, 20, 7200)
    assert (cluster.short_reserve_hosts, cluster.short_job_max_s) == (1, 600)
    assert not cluster.short_reserve_auto
    assert cluster.reservation_admit_min == 15
    assert policy_for_cluster(cluster).reservation_admit_s == 900.0  # what the cycle plans with
    assert cluster.adapter_url == simcluster.url
    assert cluster.adapter_options == {"speed": 60.0}
    assert list(Host.objects.filter(cluster=cluster).values_list("name", "gpus", "health")) == [
        ("h000", 4, "healthy"),
        ("h001", 4, "healthy"),
        ("h002", 4, "healthy"),
    ]
    info = sim_control("gpu-a").info()
    assert (info["host_count"], info["gpus_per_host"], info["speed"]) == (3, 4, 60.0)
    adapter = for_cluster(cluster)  # the row's adapter reaches the same cluster
    try:
        assert isinstance(adapter, SimulatedClusterAdapter)
        assert [h.name for h in adapter.hosts()] == ["h000", "h001", "h002"]
    finally:
        adapter.close()


def test_the_defaults_and_the_configured_url(simcluster, monkeypatch):
    monkeypatch.setenv("ALLOT_SIMCLUSTER_URL", simcluster.url)
    add("plain", "--hosts", "2")
    cluster = Cluster.objects.get(name="plain")
    assert (cluster.gpus_per_host, cluster.cycle_s, cluster.grace_s) == (8, 10, 30)
    assert cluster.max_min_runtime_s == 8 * 3600
    assert (cluster.short_reserve_hosts, cluster.short_job_max_s) == (0, 900)
    assert cluster.short_reserve_auto  # the adaptive short-job reserve: on by default
    assert cluster.reservation_admit_min == 60  # reservation admission: on by default
    assert policy_for_cluster(cluster).reservation_admit_s == 3600.0
    assert cluster.adapter_url == ""  # follows ALLOT_SIMCLUSTER_URL
    with for_cluster(cluster) as adapter:
        assert len(adapter.hosts()) == 2


def test_registering_is_idempotent_in_the_process_and_refuses_another_shape(
    simcluster, sim_control
):
    sim_control("same").create(hosts=2, gpus_per_host=8)
    sim_control("other").create(hosts=4, gpus_per_host=8)
    add("same", "--hosts", "2", "--url", simcluster.url)  # the process already has it
    assert Cluster.objects.get(name="same").hosts.count() == 2
    with pytest.raises(CommandError, match="exists with 4 hosts x 8 GPUs, not 2 x 8"):
        add("other", "--hosts", "2", "--url", simcluster.url)
    assert not Cluster.objects.filter(name="other").exists()


def test_a_name_taken_in_allot_is_refused(simcluster):
    add("taken", "--hosts", "1", "--url", simcluster.url)
    with pytest.raises(CommandError, match="a cluster named 'taken' already exists"):
        add("taken", "--hosts", "1", "--url", simcluster.url)
    assert Cluster.objects.count() == 1


@pytest.mark.parametrize(
    "args, message",
    [
        (["bad name", "--hosts", "2"], "NAME: letters, digits"),
        (["x" * 101, "--hosts", "2"], "NAME: letters, digits"),
        (["c", "--hosts", "0"], "--hosts: must be between 1 and 4096, got 0"),
        (["c", "--hosts", "5000"], "--hosts: must be between 1 and 4096"),
        (["c"], "--hosts: required for a simulated cluster"),
        (["c", "--hosts", "2", "--gpus-per-host", "0"], "--gpus-per-host: must be between 1"),
        (["c", "--hosts", "2", "--speed", "0"], "--speed: must be a number > 0"),
        (["c", "--hosts", "2", "--speed", "-60"], "--speed: must be a number > 0"),
        (["c", "--hosts", "2", "--cycle-s", "0"], "--cycle-s: must be between 1 and 86400"),
        (["c", "--hosts", "2", "--grace-s", "-1"], "--grace-s: must be between 0 and 86400"),
        (["c", "--hosts", "2", "--max-min-runtime", "soon"], "--max-min-runtime: not a duration"),
        (["c", "--hosts", "2", "--max-min-runtime", "0"], "--max-min-runtime: must be between 1"),
        (["c", "--hosts", "2", "--short-reserve-hosts", "-1"], "--short-reserve-hosts: must be"),
        (["c", "--hosts", "2", "--short-job-max", "soon"], "--short-job-max: not a duration"),
        (
            ["c", "--hosts", "2", "--reservation-admit-min", "1441"],
            "--reservation-admit-min: must be between 0 and 1440, got 1441",
        ),
        (
            ["c", "--hosts", "2", "--max-min-runtime", "1h", "--short-job-max", "2h"],
            "--short-job-max: must be between 1 and 3600, got 7200",
        ),
        (["c", "--hosts", "2", "--adapter", "kueue"], "--adapter: must be one of simulated, slurm"),
        (["c", "--hosts", "2", "--url", "ftp://somewhere"], "--url: must be an http"),
    ],
)
def test_bad_input_is_refused_with_the_field_named_and_nothing_created(
    module_simcluster, args, message
):
    if "--url" not in args:
        args = [*args, "--url", module_simcluster.url]
    with pytest.raises(CommandError, match=message):
        add(*args)
    assert Cluster.objects.count() == 0
    assert Host.objects.count() == 0
    assert httpx.get(f"{module_simcluster.url}/v1/clusters").json()["clusters"] == []


def test_nothing_is_created_when_the_simulated_cluster_is_unreachable(simcluster):
    url = simcluster.url
    simcluster.stop()
    with pytest.raises(CommandError, match=f"simulated cluster process at {url} is not reachable"):
        add("lonely", "--hosts", "2", "--url", url)
    assert not Cluster.objects.exists()


def test_the_command_exits_non_zero_on_bad_input():
    done = run_manage("cluster_add", "c", "--hosts", "0")
    assert done.returncode != 0
    assert "--hosts: must be between 1 and 4096, got 0" in done.stderr


def test_only_staff_may_add_clusters_through_the_service(simcluster):
    with pytest.raises(PermissionDenied):
        cluster_create(
            name="c", hosts=1, adapter_url=simcluster.url, actor=UserFactory(username="ann")
        )
    staff = UserFactory(username="ops", is_staff=True)
    assert cluster_create(name="c", hosts=1, adapter_url=simcluster.url, actor=staff).pk
    assert cluster_create(
        name="d", hosts=1, adapter_url=simcluster.url, actor=SuperUserFactory(username="root")
    ).pk


def test_hosts_mirror_the_health_the_cluster_reports(simcluster, sim_control):
    control = sim_control("c")
    control.create(hosts=2, gpus_per_host=8)
    control.fail_host("h001", reason="psu")
    cluster = cluster_create(name="c", hosts=2, adapter_url=simcluster.url)
    h001 = cluster.hosts.get(name="h001")
    assert (h001.health, h001.health_reason) == (HostHealthState.DOWN, "psu")


def test_a_simulated_cluster_still_running_jobs_of_another_database_needs_a_reset(
    simcluster, sim_control
):
    control = sim_control("old")
    control.create(hosts=2, gpus_per_host=8)
    with SimulatedClusterAdapter(base_url=simcluster.url, cluster="old") as adapter:
        adapter.start(
            StartRequest(
                attempt_id="stale-1",
                job_name="left over",
                gpus=8,
                placements=(ClusterPlacement("h000", tuple(range(8))),),
            )
        )
    with pytest.raises(CommandError, match="still runs 1 jobs started by another Allot database"):
        add("old", "--hosts", "2", "--url", simcluster.url)
    assert not Cluster.objects.filter(name="old").exists()
    add("old", "--hosts", "2", "--url", simcluster.url, "--reset")
    assert Cluster.objects.get(name="old").hosts.count() == 2
    assert control.jobs() == []  # emptied
