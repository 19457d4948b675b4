"""A real Slurm cluster for the Slurm adapter's tests (scheduler.adapters.slurm_local).

One cluster per xdist worker that runs Slurm tests (16 nodes x 8 GPUs, ~0.5 s to start;
the Slurm modules are two xdist groups, so two workers, tests/conftest.py), started and
stopped here; each has its own directory and ports. Where Slurm is missing it is installed from Debian's packages when we are root;
every test that needs it is skipped, with the reason, where that cannot be done."""

from __future__ import annotations

import os
import time
from collections.abc import Callable

import hostlist
import pytest

from scheduler.adapters.base import ClusterJob, ClusterPlacement, StartRequest
from scheduler.adapters.slurm import SlurmAdapter, SlurmClient, SlurmTimeout, SubmitOptions
from scheduler.adapters.slurm_local import LocalSlurm, install_slurm, usable_reason
from tests.adapters.slurm.governed import Governed


@pytest.fixture(scope="session")
def slurm_cluster():
    """The session's local Slurm cluster (installed first when missing and root)."""
    reason = install_slurm() if os.geteuid() == 0 else usable_reason()
    reason = reason or usable_reason()
    if reason:
        pytest.skip(f"no local Slurm cluster: {reason}")
    cluster = _started_cluster()
    yield cluster
    cluster.stop(remove=True)


def _started_cluster(tries: int = 3) -> LocalSlurm:
    """A started cluster; started again on other free ports when the start fails (two
    workers may pick the same free ports at the same moment)."""
    for attempt in range(tries):
        cluster = LocalSlurm.create()
        try:
            cluster.start()
            return cluster
        except Exception:
            cluster.stop(remove=True)
            if attempt == tries - 1:
                raise
    raise AssertionError("unreachable")


@pytest.fixture
def slurm(slurm_cluster):
    """The session's cluster, made clean again after the test (daemons up, no job
    running, every node resumed)."""
    yield slurm_cluster
    slurm_cluster.reset()


@pytest.fixture
def client(slurm) -> SlurmClient:
    return SlurmClient(slurm_conf=slurm.conf_path, timeout_s=30)


@pytest.fixture
def adapter(client) -> SlurmAdapter:
    return SlurmAdapter(client)


def start_request(
    attempt_id: str, hosts: dict[str, int], *, command: str = "sleep 300", **kw
) -> StartRequest:
    """A start of `attempt_id` on {host: GPU count} (indices are Slurm's to choose)."""
    return StartRequest(
        attempt_id=attempt_id,
        job_name=kw.pop("job_name", f"job-{attempt_id}"),
        gpus=sum(hosts.values()),
        placements=tuple(ClusterPlacement(h, tuple(range(n))) for h, n in hosts.items()),
        spec={"command": command, **kw.pop("spec", {})},
        project=kw.pop("project", "org/prog-a/a1"),
        **kw,
    )


def wait_for(
    adapter: SlurmAdapter,
    attempt_id: str,
    done: Callable[[ClusterJob], bool],
    *,
    timeout_s: float = 60,
) -> ClusterJob:
    """Poll `adapter.jobs()` until the attempt's job satisfies `done`."""
    deadline = time.monotonic() + timeout_s
    last = None
    while time.monotonic() < deadline:
        last = next((j for j in adapter.jobs() if j.attempt_id == attempt_id), None)
        if last is not None and done(last):
            return last
        time.sleep(0.2)
    raise AssertionError(
        f"attempt {attempt_id} did not get there in {timeout_s} s; last seen: {last}"
    )


def wait_until(predicate: Callable[[], object], *, what: str, timeout_s: float = 60) -> object:
    """Poll `predicate` until it returns something true (returned); fail naming `what`.
    The tests wait for a positive event this way, never for a fixed time."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        result = predicate()
        if result:
            return result
        time.sleep(0.2)
    raise AssertionError(f"{what}: not seen in {timeout_s} s")


class TimingOutClient(SlurmClient):
    """sbatch reaches slurmctld, which queues the job, but the answer never arrives."""

    def submit(self, script: str, options: SubmitOptions) -> str:
        super().submit(script, options)
        raise SlurmTimeout("sbatch did not answer within 30 s")


class ActsBeforeFirstRelease(SlurmClient):
    """A Slurm client that, just before Allot's first release, changes the nodes Allot
    planned that job on (in Slurm only, after Allot's plan) through `act_on`."""

    def __init__(self, **kw) -> None:
        super().__init__(**kw)
        self.acted_on: list[str] = []

    def release(self, job_id: str) -> None:
        if not self.acted_on:
            shown = self.job(job_id)
            assert shown is not None and shown["required_nodes"], shown
            self.acted_on = hostlist.expand_hostlist(shown["required_nodes"])
            self.act_on(self.acted_on)
        super().release(job_id)

    def act_on(self, nodes: list[str]) -> None:
        raise NotImplementedError


class DrainsBeforeRelease(ActsBeforeFirstRelease):
    """Slurm drains the nodes of the first job Allot releases just before the release:
    Slurm keeps that job PENDING."""

    @property
    def drained(self) -> list[str]:
        return self.acted_on

    def act_on(self, nodes: list[str]) -> None:
        for node in nodes:
            self.update_node(node, "drain", "drained in Slurm after Allot's plan")


class ReservesBeforeRelease(ActsBeforeFirstRelease):
    """Slurm's administrator puts the nodes of the first job Allot releases under a
    maintenance reservation just before the release: Slurm keeps that job PENDING
    (ReqNodeNotAvail) while its nodes look idle in sinfo, so nothing in Allot's reading
    of hosts changes. `end()` deletes the reservation."""

    NAME = "allot-test-maint"

    def act_on(self, nodes: list[str]) -> None:
        self.run(
            "scontrol",
            "create",
            "reservation",
            f"reservationname={self.NAME}",
            "starttime=now",
            "duration=120",
            f"nodes={','.join(nodes)}",
            "flags=maint,ignore_jobs",  # a job of the test before may be completing
            "users=root",
        )

    def end(self) -> None:
        if self.acted_on:
            self.run("scontrol", "delete", f"reservationname={self.NAME}")


@pytest.fixture
def gov(tree, slurm, tmp_path) -> Governed:
    return Governed(tree, slurm, tmp_path)
