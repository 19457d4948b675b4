"""Hourly rollups recomputed from raw attempts, jobs and host events (issue 9 ledger,
issue 10 acceptance 1: the occupancy buckets sum to the capacity every hour)."""

import datetime as dt

import pytest
from django.utils import timezone

from budgets.selectors import tree_index
from ledger.models import ClusterHour, ProjectHour
from ledger.services import floor_hour, rollups_refresh
from scheduler.models import Attempt, AttemptState, Host, HostEvent, HostHealth, Job
from tests.factories import ClusterFactory, UserFactory

pytestmark = pytest.mark.django_db
H = dt.timedelta(hours=1)
HOURS = 4


def _overlap_h(start, end, lo, hi):
    return max(0.0, (min(end, hi) - max(start, lo)).total_seconds()) / 3600


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
        j = Job.objects.create(
            cluster=cluster,
            project=tree.node(project),
            submitter=user,
            name="j",
            gpus=gpus,
            min_runtime_s=600 if allocated else 0,
            submitted_at=submitted,
            queued_at=submitted,
            ended_at=ended,
        )
        for i, (host, start, end) in enumerate(runs, 1):
            Attempt.objects.create(
                job=j,
                number=i,
                attempt_id=f"{j.pk}-{i}",
                cluster=cluster,
                project=j.project,
                gpus=gpus,
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


def _expected(base, jobs):
    """Per (project id, hour index): allocated, unallocated, demand — from the raw rows."""
    out = {}
    for h in range(HOURS):
        lo, hi = base + h * H, base + (h + 1) * H
        for job in jobs:
            key = (job.project_id, h)
            row = out.setdefault(key, [0.0, 0.0, 0.0])
            for a in job.attempts.all():
                row[0 if a.allocated else 1] += a.gpus * _overlap_h(
                    a.started_at, a.ended_at, lo, hi
                )
            if job.min_runtime_s > 0:
                row[2] += job.gpus * _overlap_h(job.submitted_at, job.ended_at, lo, hi)
    return {k: v for k, v in out.items() if any(v)}


def test_rollups_equal_an_independent_recomputation(world):
    cluster, base, jobs = world
    assert rollups_refresh(cluster_id=cluster.pk, since=base, until=base + HOURS * H) == HOURS
    rows = {
        (r.project_id, int((r.hour - base) / H)): r
        for r in ProjectHour.objects.filter(cluster=cluster)
    }
    expected = _expected(base, jobs)
    assert set(rows) == set(expected)
    shares = tree_index().shares
    healthy = [24, 16, 8, 16]  # h2 drains from hour 1, h3 is down in hour 2
    for key, (alloc, unalloc, demand) in expected.items():
        row = rows[key]
        assert row.allocated_gpu_h == pytest.approx(alloc)
        assert row.unallocated_gpu_h == pytest.approx(unalloc)
        assert row.demand_gpu_h == pytest.approx(demand)
        share = shares[key[0]].entitled
        assert row.entitled_gpu_h == pytest.approx(min(share * healthy[key[1]], demand))
        assert row.delivered_gpu_h == row.allocated_gpu_h


def test_buckets_sum_to_capacity_every_hour_and_name_drain_and_down(world):
    cluster, base, _ = world
    rollups_refresh(cluster_id=cluster.pk, since=base, until=base + HOURS * H)
    hours = list(ClusterHour.objects.filter(cluster=cluster).order_by("hour"))
    assert [h.hour for h in hours] == [base + i * H for i in range(HOURS)]
    for h in hours:
        assert h.capacity_gpu_h == pytest.approx(24)
        assert sum(getattr(h, b) for b in ClusterHour.BUCKETS) == pytest.approx(h.capacity_gpu_h)
    assert [h.healthy_gpu_h for h in hours] == pytest.approx([24, 16, 8, 16])
    # hour 1: h2 draining, 4 of its GPUs busy for half the hour
    assert hours[1].draining_gpu_h == pytest.approx(8 - 2)
    assert hours[2].down_gpu_h == pytest.approx(8) and hours[1].down_gpu_h == 0
    # a2's allocated job waited in hour 1 while healthy GPUs were free
    assert hours[1].idle_demand_gpu_h > 0
    assert hours[2].unallocated_gpu_h == pytest.approx(4)
    assert hours[0].idle_demand_gpu_h == pytest.approx(4 * 0.25)  # a1 waited 15 min


def test_refresh_is_idempotent(world):
    cluster, base, _ = world
    rollups_refresh(cluster_id=cluster.pk, since=base, until=base + HOURS * H)
    first = list(ProjectHour.objects.filter(cluster=cluster).values())
    rollups_refresh(cluster_id=cluster.pk, since=base, until=base + HOURS * H)
    second = list(ProjectHour.objects.filter(cluster=cluster).values())
    strip = lambda rows: sorted((r["project_id"], r["hour"], r["allocated_gpu_h"]) for r in rows)  # noqa: E731
    assert strip(first) == strip(second)
    assert ClusterHour.objects.filter(cluster=cluster).count() == HOURS


def test_beat_task_refreshes_the_current_and_previous_hour(world):
    from ledger.tasks import refresh_recent_rollups

    cluster, _, _ = world
    assert refresh_recent_rollups() >= 1
    now_hour = floor_hour(timezone.now())
    hours = set(ClusterHour.objects.filter(cluster=cluster).values_list("hour", flat=True))
    assert {now_hour - H, now_hour} <= hours
