"""Fixtures of the simulated cluster process's tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from scheduler.adapters.simcluster.process import SimClusterProcess


@pytest.fixture(scope="module")
def module_simcluster(tmp_path_factory) -> Iterator[SimClusterProcess]:
    """One simulated cluster process for a module's tests that neither restart, kill nor
    stop it (a process start per test was most of such a test's time): each uses a
    cluster of its own name in it, or checks that it created nothing there."""
    directory = tmp_path_factory.mktemp("simcluster")
    with (directory / "simcluster.log").open("wb") as log:
        process = SimClusterProcess(state_dir=directory / "state", log=log).start()
        try:
            yield process
        finally:
            process.stop()
