"""Fixtures shared by the scheduler's service and selector tests."""

from __future__ import annotations

import pytest

from tests.factories import ClusterFactory, HostFactory


@pytest.fixture
def cluster():
    """Cluster `h100` of 2 x 8 GPUs (a module may define its own `cluster`)."""
    cluster = ClusterFactory(name="h100", host_count=2, gpus_per_host=8)
    HostFactory.create_batch(2, cluster=cluster, gpus=8)
    return cluster
