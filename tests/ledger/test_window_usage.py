"""Window usage from attempts: what the engine is handed as fair-share usage."""

import datetime as dt
import math

import pytest
from django.utils import timezone

from ledger.selectors import window_usage
from scheduler.models import AttemptState
from tests.factories import AttemptFactory, ClusterFactory, JobFactory, UserFactory

pytestmark = pytest.mark.django_db
H = dt.timedelta(hours=1)


@pytest.fixture
def run(tree):
    cluster = ClusterFactory()
    user = UserFactory(username="ann")
    now = timezone.now()

    def make(project, gpus, start, end, allocated=True):
        job = JobFactory(
            cluster=cluster,
            project=tree.node(project),
            submitter=user,
            gpus=gpus,
            min_runtime_s=600 if allocated else 0,
            submitted_at=start,
        )
        AttemptFactory(
            job=job,
            allocated=allocated,
            started_at=start,
            ended_at=end,
            state=AttemptState.ENDED if end else AttemptState.RUNNING,
        )

    make.cluster, make.now = cluster, now
    return make


def test_sliding_window_clips_runs_and_counts_open_ones_to_now(run, tree):
    now = run.now
    run("a1", 8, now - 10 * H, now - 8 * H)  # wholly before a 9 h window: 1 h inside
    run("a1", 2, now - 3 * H, None)  # still running: 3 h
    run("a2", 4, now - 30 * H, now - 20 * H)  # outside
    run("b1", 8, now - 2 * H, now - H, allocated=False)  # unallocated: never charged
    usage = window_usage(cluster_id=run.cluster.pk, now=now, lookback_s=9 * 3600)
    assert usage == {tree.node("a1").pk: pytest.approx(8 * 3600 + 2 * 3 * 3600)}


def test_half_life_weights_each_gpu_second_by_its_age(run, tree):
    now = run.now
    run("a1", 1, now - 2 * H, now - H)
    usage = window_usage(cluster_id=run.cluster.pk, now=now, lookback_s=1, half_life_s=3600)
    # integral of 2^(-age/1h) over ages 1 h .. 2 h, in seconds
    expected = 3600 / math.log(2) * (0.5 - 0.25)
    assert usage[tree.node("a1").pk] == pytest.approx(expected)
