"""The ETA while a consolidation move is under way: the moved job is held, and charged to
its project, once in the forward run (on the GPUs it starts again on), and the block it
left is the waiting job's, whole (`scheduler.selectors.snapshot.after_stops`)."""

import datetime as dt
from collections import Counter

import pytest
from django.utils import timezone

from scheduler.models import AttemptEnd, AttemptState
from scheduler.selectors.snapshot import after_stops, cluster_snapshot
from scheduler.services.eta import cluster_etas, stop_requeues
from tests.support.live import submit_job
from tests.support.stops import a1_running, gpus_on, two_hosts_with_a1_runtimes

pytestmark = pytest.mark.django_db

H = 3600


@pytest.fixture
def moving(cluster, tree):
    """On h0 a 4-GPU a1 job stops to move to h1[0-3] (2,000 s run) so that an 8-GPU a1
    job gets all of h0; another 4-GPU a1 job runs on h1[4-7]; an 8-GPU a1 job waits
    behind the one the move is for. 8-GPU a1 jobs run 1,000 s, 4-GPU ones 10,000 s."""
    h0, h1, now, user, a1 = two_hosts_with_a1_runtimes(cluster, tree)
    moved_for = submit_job(
        cluster=cluster, project=a1, user=user, at=now, gpus=8, min_runtime_s=2 * H
    )
    a1_running(
        cluster,
        tree,
        now,
        state=AttemptState.STOPPING,
        placements=gpus_on(0, 1, 2, 3, host=h0),
        stop_requested_at=now,
        stop_deadline=now + dt.timedelta(seconds=30),
        stop_intent=AttemptEnd.MIGRATED,
        preempted_by=moved_for,
        moved_to=gpus_on(0, 1, 2, 3, host=h1),
        for_block=gpus_on(*range(8), host=h0),
    )
    a1_running(cluster, tree, now, placements=gpus_on(4, 5, 6, 7, host=h1))
    behind = submit_job(cluster=cluster, project=a1, user=user, at=now, gpus=8, min_runtime_s=2 * H)
    return moved_for, behind, h0


def test_a_moving_job_holds_each_gpu_once_in_the_forward_run(cluster, moving):
    moved_for, _, h0 = moving
    cs = cluster_snapshot(cluster=cluster, refusals=True)
    assert len(cs.snapshot.running) == 4  # the stop, the move's target, the hold, the other
    forward = after_stops(cs, requeued=stop_requeues).running
    held = Counter((p.host, i) for rw in forward for p in rw.placements for i in p.gpu_indices)
    assert len(held) == 16 and set(held.values()) == {1}
    by_id = {rw.workload.id: rw for rw in forward}
    hold = by_id[f"~hold-{moved_for.pk}"]
    assert hold.workload.gpus == 8 and [p.host for p in hold.placements] == [h0]
    # a1 is charged 16 GPUs (the moved job's 4 once), not 20
    assert sum(rw.workload.gpus for rw in forward if rw.allocated) == 16


def test_the_job_behind_starts_when_the_block_s_job_ends_not_the_moved_one(cluster, moving):
    """The 8-GPU job behind starts on h0 when the job the move was for ends (1,000 s):
    it was shown starting when the moved job ended (8,000 s more), the GPUs it left on
    h0 held by it for its whole run, and its project charged for them twice."""
    _, behind, _ = moving
    now = timezone.now().timestamp()
    eta = cluster_etas(cluster=cluster, fresh=True)[str(behind.pk)]
    assert eta["method"] == "forward-simulation"
    start = dt.datetime.fromisoformat(eta["start"]).timestamp()
    assert now + 900 <= start <= now + 1500, (start - now, eta)
