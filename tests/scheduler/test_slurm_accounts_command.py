"""`manage.py slurm_accounts` pointed at a cluster that is not a Slurm one says what it
is, not that it does not exist (no Slurm needed: the refusals come before any read)."""

import pytest
from django.core.management import CommandError, call_command

from scheduler.models import AdapterKind
from tests.factories import ClusterFactory

pytestmark = pytest.mark.django_db


def test_a_simulated_cluster_is_named_as_simulated_not_missing():
    ClusterFactory(name="demo", adapter=AdapterKind.SIMULATED)
    with pytest.raises(CommandError) as refused:
        call_command("slurm_accounts", "--cluster", "demo")
    assert refused.value.returncode != 0
    assert str(refused.value) == (
        "cluster 'demo' is a simulated cluster (adapter 'simulated'), not a Slurm one: "
        "Slurm accounts exist on Slurm clusters only"
    )


def test_a_missing_cluster_is_named_missing():
    with pytest.raises(CommandError, match="^there is no cluster named 'nope'$"):
        call_command("slurm_accounts", "--cluster", "nope")


def test_without_a_slurm_cluster_the_clusters_there_are_are_named():
    ClusterFactory(name="demo", adapter=AdapterKind.SIMULATED)
    with pytest.raises(CommandError, match=r"^there is no Slurm cluster; .*: demo \(simulated\)$"):
        call_command("slurm_accounts")
