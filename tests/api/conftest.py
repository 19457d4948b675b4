"""Fixtures of the jobs/queue/clusters/hosts API tests: the example tree, a 4 x 8-GPU
cluster with its hosts, and users in every role."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from tests.factories import ClusterFactory, HostFactory, SuperUserFactory, UserFactory


@dataclass
class World:
    tree: object
    cluster: object
    hosts: list

    def user(self, name: str):
        return self.tree.user(name)


@pytest.fixture
def world(tree) -> World:
    """The example tree (ann member of a1, bob member of a2, pi-a1 manages a1, lead-a
    manages prog-a, lead-b manages prog-b), a superuser `root`, a staff user `ops`
    (not superuser), a user `nobody` without roles, and cluster `gpu` of 4 x 8 GPUs."""
    SuperUserFactory(username="root")
    UserFactory(username="ops", is_staff=True)
    UserFactory(username="nobody")
    cluster = ClusterFactory(name="gpu", host_count=4, gpus_per_host=8, grace_s=30)
    hosts = [HostFactory(cluster=cluster, name=f"node{i}", gpus=8) for i in range(4)]
    return World(tree=tree, cluster=cluster, hosts=hosts)


def job_body(**overrides) -> dict:
    body = {
        "project": "org/prog-a/a1",
        "cluster": "gpu",
        "name": "train",
        "gpus": 8,
        "min_runtime_s": 3600,
        "resumable": True,
        "priority": 1,
        "kind": "training",
        "spec": {"image": "pytorch:2.5", "command": "python train.py", "env": {"SEED": "1"}},
        "duration_s": 7200,
    }
    body.update(overrides)
    return body
