"""Hourly rollups recomputed from raw attempts, jobs and host events (issue 9 ledger,
issue 10 acceptance 1: the occupancy buckets sum to the capacity every hour)."""

import pytest
from django.contrib.auth import get_user_model
from django.utils import timezone

from budgets.selectors import tree_index
from budgets.services import budget_change_create
from ledger.models import ClusterHour, ProjectHour
from ledger.services import floor_hour, rollups_refresh
from tests.support.ledger import HOURS, H, overlap_h

pytestmark = pytest.mark.django_db


def _expected(base, jobs):
    """Per (project id, hour index): allocated, unallocated, demand — from the raw rows."""
    out = {}
    for h in range(HOURS):
        lo, hi = base + h * H, base + (h + 1) * H
        for job in jobs:
            key = (job.project_id, h)
            row = out.setdefault(key, [0.0, 0.0, 0.0])
            for a in job.attempts.all():
                row[0 if a.allocated else 1] += a.gpus * overlap_h(a.started_at, a.ended_at, lo, hi)
            if job.min_runtime_s > 0:
                row[2] += job.gpus * overlap_h(job.submitted_at, job.ended_at, lo, hi)
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


def test_a_rebuilt_hour_keeps_the_shares_in_force_then(world, tree):
    """Issue 22 item 16: a rollup rebuilt after a weight change gives each hour the entitled
    shares in force at its end, from the audited history: a1 70 -> 30 half-way through hour 1
    leaves hour 0 at the old share (35%) and gives hour 1 the new one (25%)."""
    cluster, base, _ = world
    a1 = tree.node("a1")
    old = tree_index().shares[a1.pk].entitled
    ceo = get_user_model().objects.get(username="ceo")
    budget_change_create(
        actor=ceo, reason="Q4 review", changes=[{"node": a1.pk, "weight": 30}], now=base + 1.5 * H
    )
    new = tree_index().shares[a1.pk].entitled
    assert (old, new) == pytest.approx((0.35, 0.25))
    rollups_refresh(cluster_id=cluster.pk, since=base, until=base + HOURS * H)
    rows = {
        int((r.hour - base) / H): r for r in ProjectHour.objects.filter(cluster=cluster, project=a1)
    }
    # a1's demand: 8 GPUs all along plus 4 GPUs from base + 15 min to base + 1.5 h
    assert rows[0].demand_gpu_h == pytest.approx(8 + 4 * 0.75)
    assert rows[0].entitled_gpu_h == pytest.approx(old * 24)  # not new * 24 = 6
    assert rows[1].entitled_gpu_h == pytest.approx(new * 16)
