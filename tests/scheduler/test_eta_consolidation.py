"""The ETA while a consolidation move is under way: the moved job is held, and charged to
its project, once in the forward run (on the GPUs it starts again on), and the block it
left is the waiting job's, whole (`scheduler.selectors.snapshot.after_stops`)."""

import datetime as dt
from collections import Counter

import pytest
from django.utils import timezone

from scheduler.models import AttemptEnd, AttemptState, JobState
from scheduler.selectors.snapshot import after_stops, cluster_snapshot
from scheduler.services.eta import cluster_etas
from tests.factories import AttemptFactory, JobFactory
from tests.support.live import submit_job

pytestmark = pytest.mark.django_db

H = 3600


def _gpus(*indices: int, host: str) -> list[dict]:
    return [{"host": host, "gpu_indices": list(indices)}]


def _history(cluster, tree, gpus: int, runtime_s: float, n: int = 20) -> None:
    """`n` finished a1 jobs of `gpus` GPUs that ran `runtime_s` each, ten days ago: the
    forecast's runtimes for that key, outside the usage and arrival windows."""
    ago = timezone.now() - dt.timedelta(days=10)
    for _ in range(n):
        job = JobFactory(
            cluster=cluster,
            project=tree.node("a1"),
            submitter=tree.user("ann"),
            gpus=gpus,
            min_runtime_s=600,
            state=JobState.SUCCEEDED,
            submitted_at=ago,
        )
        AttemptFactory(
            job=job,
            state=AttemptState.ENDED,
            end_reason=AttemptEnd.SUCCEEDED,
            started_at=ago,
            ended_at=ago + dt.timedelta(seconds=runtime_s),
        )


def _running(cluster, tree, now, **attempt) -> None:
    job = JobFactory(
        cluster=cluster,
        project=tree.node("a1"),
        submitter=tree.user("ann"),
        gpus=4,
        min_runtime_s=600,
        resumable=True,
        state=JobState.STOPPING if attempt.get("state") == AttemptState.STOPPING else "running",
        submitted_at=now - dt.timedelta(seconds=2000),
    )
    AttemptFactory(job=job, started_at=now - dt.timedelta(seconds=2000), **attempt)


@pytest.fixture
def moving(cluster, tree):
    """On h0 a 4-GPU a1 job stops to move to h1[0-3] (2,000 s run) so that an 8-GPU a1
    job gets all of h0; another 4-GPU a1 job runs on h1[4-7]; an 8-GPU a1 job waits
    behind the one the move is for. 8-GPU a1 jobs run 1,000 s, 4-GPU ones 10,000 s."""
    cluster.short_reserve_hosts, cluster.short_reserve_auto = 0, False
    cluster.save(update_fields=["short_reserve_hosts", "short_reserve_auto"])
    h0, h1 = cluster.hosts.order_by("name").values_list("name", flat=True)
    _history(cluster, tree, gpus=8, runtime_s=1000)
    _history(cluster, tree, gpus=4, runtime_s=10_000)
    now = timezone.now()
    user, a1 = tree.user("ann"), tree.node("a1")
    moved_for = submit_job(
        cluster=cluster, project=a1, user=user, at=now, gpus=8, min_runtime_s=2 * H
    )
    _running(
        cluster,
        tree,
        now,
        state=AttemptState.STOPPING,
        placements=_gpus(0, 1, 2, 3, host=h0),
        stop_requested_at=now,
        stop_deadline=now + dt.timedelta(seconds=30),
        stop_intent=AttemptEnd.MIGRATED,
        preempted_by=moved_for,
        moved_to=_gpus(0, 1, 2, 3, host=h1),
        for_block=_gpus(*range(8), host=h0),
    )
    _running(cluster, tree, now, placements=_gpus(4, 5, 6, 7, host=h1))
    behind = submit_job(cluster=cluster, project=a1, user=user, at=now, gpus=8, min_runtime_s=2 * H)
    return moved_for, behind, h0


def test_a_moving_job_holds_each_gpu_once_in_the_forward_run(cluster, moving):
    moved_for, _, h0 = moving
    cs = cluster_snapshot(cluster=cluster, refusals=True)
    assert len(cs.snapshot.running) == 4  # the stop, the move's target, the hold, the other
    forward = after_stops(cs).running
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
