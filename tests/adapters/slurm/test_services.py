"""Adding a Slurm cluster (cluster_add) and checking its accounts (slurm_accounts)."""

from __future__ import annotations

from io import StringIO

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from scheduler.models import AdapterKind, Cluster, Host, HostHealth
from scheduler.services.clusters import cluster_create
from scheduler.services.slurm import slurm_accounts_drift

pytestmark = pytest.mark.django_db


def add(*args: str) -> str:
    out = StringIO()
    call_command("cluster_add", *args, stdout=out)
    return out.getvalue()


def add_slurm_cluster(*, name: str, slurm_conf: str, **options) -> Cluster:
    return cluster_create(
        name=name,
        adapter="slurm",
        gpus_per_host=None,
        adapter_options={"slurm_conf": slurm_conf, **options},
    )


def test_cluster_add_imports_the_nodes_and_their_health_from_slurm(slurm, client):
    client.update_node("gpu05", "drain", "bad DIMM")
    out = add("emu", "--adapter", "slurm", "--slurm-conf", str(slurm.conf_path), "--grace-s", "10")
    assert f"Added cluster 'emu': 16 hosts x 8 GPUs (128 GPUs), slurm at {slurm.conf_path}" in out
    cluster = Cluster.objects.get(name="emu")
    assert cluster.adapter == AdapterKind.SLURM
    assert cluster.adapter_options == {"slurm_conf": str(slurm.conf_path)}
    assert (cluster.host_count, cluster.gpus_per_host, cluster.grace_s) == (16, 8, 10)
    hosts = {h.name: h for h in cluster.hosts.all()}
    assert sorted(hosts) == slurm.node_names and {h.gpus for h in hosts.values()} == {8}
    assert (
        hosts["gpu05"].health == HostHealth.DRAINING and hosts["gpu05"].health_reason == "bad DIMM"
    )
    assert hosts["gpu06"].health == HostHealth.HEALTHY


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["--slurm-conf", "/nonexistent/slurm.conf"],
            "--slurm-conf: there is no Slurm configuration",
        ),
        (
            ["--slurm-conf", "{conf}", "--hosts", "4"],
            "--hosts: a Slurm cluster's hosts are its nodes",
        ),
        (
            ["--slurm-conf", "{conf}", "--partition", "nope"],
            "--slurm-conf: Slurm reports no node with GPUs",
        ),
    ],
)
def test_bad_slurm_input_is_refused_with_the_field_named(slurm, args, message):
    args = [a.format(conf=slurm.conf_path) for a in args]
    with pytest.raises(CommandError, match=message):
        add("emu", "--adapter", "slurm", *args)
    assert not Cluster.objects.exists() and not Host.objects.exists()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--gpus-per-host", "4"], "--gpus-per-host: a Slurm cluster's nodes say how many"),
        (["--url", "http://127.0.0.1:8001"], "--reset and --url are for --adapter simulated"),
    ],
)
def test_options_of_simulated_clusters_are_refused_not_ignored_for_slurm(args, message):
    """They were dropped silently (`--gpus-per-host 4` on 8-GPU nodes, a `--url`)."""
    with pytest.raises(CommandError, match=message):
        add("emu", "--adapter", "slurm", "--slurm-conf", "/etc/hosts", *args)
    assert not Cluster.objects.exists()


def test_a_slurm_cluster_without_a_slurm_conf_says_how_to_give_one(monkeypatch):
    monkeypatch.delenv("SLURM_CONF", raising=False)
    with pytest.raises(CommandError, match=r"^--slurm-conf: none given \(cluster_add --slurm-conf"):
        add("emu", "--adapter", "slurm")
    assert not Cluster.objects.exists()


def test_slurm_flags_are_refused_for_a_simulated_cluster():
    refused = "--slurm-conf, --partition and --slurm-option are for --adapter slurm"
    with pytest.raises(CommandError, match=refused):
        add("sim", "--hosts", "2", "--slurm-conf", "/etc/slurm/slurm.conf")
    with pytest.raises(CommandError, match=refused):
        add("sim", "--hosts", "2", "--slurm-option", "workdir=/tmp")


def test_an_unknown_option_or_a_used_name_is_refused(slurm):
    from config.errors import Conflict, ValidationFailed

    add_slurm_cluster(name="emu", slurm_conf=str(slurm.conf_path))
    with pytest.raises(Conflict) as used:
        add_slurm_cluster(name="emu", slurm_conf=str(slurm.conf_path))
    assert used.value.field == "name"
    with pytest.raises(ValidationFailed) as unknown:
        add_slurm_cluster(name="other", slurm_conf=str(slurm.conf_path), colour=1)
    assert unknown.value.field == "adapter_options"
    assert Cluster.objects.count() == 1


@pytest.fixture
def allowed_accounts(client):
    """The partition names its accounts (AllowAccounts), as a site without slurmdbd would."""
    client.run("scontrol", "update", "partitionname=gpu", "allowaccounts=a1,a2,ops")
    yield
    client.run("scontrol", "update", "partitionname=gpu", "allowaccounts=ALL")


def test_account_drift_is_reported_both_ways(tree, slurm, client, allowed_accounts, capsys):
    cluster = add_slurm_cluster(name="emu", slurm_conf=str(slurm.conf_path))
    drift = slurm_accounts_drift(cluster=cluster)
    assert drift.accounts == {"a1", "a2", "ops"} and "AllowAccounts" in drift.source
    assert drift.projects_without_account == ["org/prog-b/b1"]
    assert drift.accounts_without_project == ["ops"]
    assert drift.drift

    with pytest.raises(CommandError) as check:
        call_command("slurm_accounts", "--check")
    assert check.value.returncode == 1
    out = capsys.readouterr().out
    assert "org/prog-b/b1" in out and "ops" in out and "from partitions' AllowAccounts" in out


def test_no_drift_when_every_project_has_its_account(tree, slurm, client, capsys):
    client.run("scontrol", "update", "partitionname=gpu", "allowaccounts=a1,a2,b1")
    try:
        add_slurm_cluster(name="emu", slurm_conf=str(slurm.conf_path))
        call_command("slurm_accounts", "--check", "--cluster", "emu")
    finally:
        client.run("scontrol", "update", "partitionname=gpu", "allowaccounts=ALL")
    assert "no drift" in capsys.readouterr().out


def test_a_cluster_without_accounts_reports_every_project(tree, slurm, capsys):
    add_slurm_cluster(name="emu", slurm_conf=str(slurm.conf_path))
    with pytest.raises(CommandError):
        call_command("slurm_accounts", "--check")
    out = capsys.readouterr().out
    assert "Slurm defines no accounts here" in out and "org/prog-a/a1" in out
    with pytest.raises(CommandError, match="there is no cluster named .nope."):
        call_command("slurm_accounts", "--cluster", "nope")


def test_the_cluster_row_picks_the_slurm_adapter_with_its_options(slurm):
    from scheduler.adapters import for_cluster
    from scheduler.adapters.slurm import SlurmAdapter

    cluster = add_slurm_cluster(
        name="emu", slurm_conf=str(slurm.conf_path), partition="gpu", timeout_s=5
    )
    adapter = for_cluster(cluster)
    assert isinstance(adapter, SlurmAdapter)
    assert adapter.partition == "gpu" and adapter.client.timeout_s == 5
    assert len(adapter.hosts()) == 16


def test_cluster_add_sets_the_other_slurm_options_typed(slurm):
    """docs/slurm.md's optional adapter options (sbatch_min_runtime_s for governed sbatch
    without --time-min, workdir, ...) had no command to set them."""
    add(
        "emu",
        "--adapter",
        "slurm",
        "--slurm-conf",
        str(slurm.conf_path),
        "--partition",
        "governed",
        "--slurm-option",
        "sbatch_min_runtime_s=30m",
        "--slurm-option",
        "use_accounts=off",
        "--slurm-option",
        "workdir=/tmp",
    )
    options = Cluster.objects.get(name="emu").adapter_options
    assert options["partition"] == "governed"
    assert (options["sbatch_min_runtime_s"], options["use_accounts"]) == (1800, False)
    assert options["workdir"] == "/tmp"


@pytest.mark.parametrize(
    ("option", "message"),
    [
        ("sbatch_min_runtime_s=soon", "sbatch_min_runtime_s: not a duration"),
        ("sbatch_min_runtime_s=-5", "sbatch_min_runtime_s: a duration must be >= 0"),
        ("timeout_s=0", "timeout_s: must be seconds > 0 and <= 600"),
        ("timeout_s=abc", "timeout_s: must be a number of seconds"),
        ("use_accounts=maybe", "use_accounts: must be on or off"),
        ("workdir=scratch", "workdir: must be an absolute path"),
        ("output=", "output: must not be empty"),
        ("partition=gpu", "partition: give it with --partition"),
        ("nodelist=gpu01", "nodelist: no such Slurm option"),
        ("sbatch_min_runtime_s", "KEY=VALUE expected"),
    ],
)
def test_a_bad_slurm_option_is_refused_naming_it_and_nothing_is_added(option, message):
    with pytest.raises(CommandError, match=f"--slurm-option.*{message}"):
        add("emu", "--adapter", "slurm", "--slurm-conf", "/etc/hosts", "--slurm-option", option)
    assert not Cluster.objects.exists() and not Host.objects.exists()
