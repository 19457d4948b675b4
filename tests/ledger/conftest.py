"""The world of hosts, health events, jobs and attempts that the rollup and API tests of
this folder share."""

import pytest
from django.utils import timezone

from ledger.services import floor_hour
from scheduler.models import AttemptState, Host, HostEvent, HostHealth
from tests.factories import AttemptFactory, ClusterFactory, JobFactory, UserFactory
from tests.support.ledger import H


@pytest.fixture
def world(tree):
    """3 hosts x 8 GPUs over 4 past hours: h2 drains at +1 h, h3 is down in hour 2;
    a1 runs allocated (one run on h2 across the drain), b1 runs unallocated, a2 waits
    with an allocated job that never starts."""
    cluster = ClusterFactory(host_count=3)
    Host.objects.filter(cluster=cluster).delete()
    hosts = {n: Host.objects.create(cluster=cluster, name=n, gpus=8) for n in ("h1", "h2", "h3")}
    base = floor_hour(timezone.now()) - 6 * H
    user = UserFactory(username="ann")

    def event(host, at, from_h, to_h):
        HostEvent.objects.create(
            host=hosts[host], at=at, from_health=from_h, to_health=to_h, reason="test"
        )

    event("h2", base + H, HostHealth.HEALTHY, HostHealth.DRAINING)
    event("h3", base + 2 * H, HostHealth.HEALTHY, HostHealth.DOWN)
    event("h3", base + 3 * H, HostHealth.DOWN, HostHealth.HEALTHY)
    Host.objects.filter(pk=hosts["h2"].pk).update(health=HostHealth.DRAINING)
    jobs = []

    def job(project, gpus, submitted, ended, allocated=True, runs=()):
        j = JobFactory(
            cluster=cluster,
            project=tree.node(project),
            submitter=user,
            gpus=gpus,
            min_runtime_s=600 if allocated else 0,
            submitted_at=submitted,
            ended_at=ended,
        )
        for i, (host, start, end) in enumerate(runs, 1):
            AttemptFactory(
                job=j,
                number=i,
                attempt_id=f"{j.pk}-{i}",
                allocated=allocated,
                created_at=start,
                started_at=start,
                ended_at=end,
                state=AttemptState.ENDED,
                placements=[{"host": host, "gpu_indices": list(range(gpus))}],
            )
        jobs.append(j)

    job("a1", 8, base, base + 2 * H, runs=[("h1", base, base + 2 * H)])
    job("a1", 4, base + H / 4, base + 1.5 * H, runs=[("h2", base + H / 2, base + 1.5 * H)])
    job(
        "b1",
        4,
        base + 2 * H,
        base + 3.5 * H,
        allocated=False,
        runs=[("h1", base + 2 * H, base + 3.5 * H)],
    )
    job("a2", 8, base + H, base + 2.5 * H)  # allocated, waited, cancelled
    return cluster, base, jobs
