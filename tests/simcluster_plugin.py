"""Fixtures that run a real simulated cluster process (loaded by tests/conftest.py).

- `simcluster`: a fresh process on a free port with a temporary state directory,
  stopped after the test (`.url`, `.restart()`, `.restart(crash=True)`, `.stop()`).
- `simcluster_shared`: one process for the whole session; give each test its own
  cluster name (`unique_cluster_name`).
- `make_simulated_cluster(**kwargs)`: a `Cluster` row and its hosts through
  `cluster_create`, registered in the `simcluster` process (needs the database).
- `sim_control(name)`: a `SimClusterControl` of a cluster in the `simcluster` process.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator

import pytest

from scheduler.adapters.simcluster.control import SimClusterControl
from scheduler.adapters.simcluster.process import SimClusterProcess

_names = itertools.count(1)


def _start(directory) -> tuple[SimClusterProcess, object]:
    log = open(directory / "simcluster.log", "wb")  # noqa: SIM115 - closed by the fixture
    return SimClusterProcess(state_dir=directory / "state", log=log).start(), log


@pytest.fixture
def simcluster(tmp_path) -> Iterator[SimClusterProcess]:
    """A simulated cluster process of this test alone."""
    process, log = _start(tmp_path)
    try:
        yield process
    finally:
        process.stop()
        log.close()


@pytest.fixture(scope="session")
def simcluster_shared(tmp_path_factory) -> Iterator[SimClusterProcess]:
    """One simulated cluster process for the session (tests use their own cluster names)."""
    process, log = _start(tmp_path_factory.mktemp("simcluster"))
    try:
        yield process
    finally:
        process.stop()
        log.close()


@pytest.fixture
def unique_cluster_name() -> str:
    return f"c{next(_names)}"


@pytest.fixture
def sim_control(simcluster):
    """`sim_control(name)`: control of cluster `name` in the test's process."""
    opened: list[SimClusterControl] = []

    def control(name: str) -> SimClusterControl:
        opened.append(SimClusterControl(simcluster.url, name))
        return opened[-1]

    yield control
    for c in opened:
        c.close()


@pytest.fixture
def make_simulated_cluster(db, simcluster):
    """`make_simulated_cluster(name="sim", hosts=2, gpus_per_host=8, speed=..., ...)`:
    a Cluster row with its hosts, created in the test's simulated cluster process."""
    from scheduler.services.clusters import cluster_create

    def make(name: str = "sim", *, hosts: int = 2, gpus_per_host: int = 8, **kwargs):
        kwargs.setdefault("adapter_url", simcluster.url)
        return cluster_create(name=name, hosts=hosts, gpus_per_host=gpus_per_host, **kwargs)

    return make
