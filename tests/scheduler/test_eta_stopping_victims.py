"""The ETA while a preemption's victim is stopping: the victim holds no GPU in the forward
run (its stop ends within the grace period, seconds against the run's hours), the GPUs it
leaves in the block of the job it stops for are that job's hold, whole, and a resumable
victim is back in the queue, as the live cycle requeues it
(`scheduler.selectors.snapshot.after_stops`)."""

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
GRACE_S = 30


def _stopping(cluster, tree, resumable: bool):
    """On h0 a 4-GPU a1 job (2,000 s run) is being preempted (stop deadline in 30 s) for
    an 8-GPU a1 job given all of h0; two 4-GPU a1 jobs run on h1; an 8-GPU a1 job waits
    behind the preemptor. 8-GPU a1 jobs run 1,000 s, 4-GPU ones 10,000 s."""
    h0, h1, now, user, a1 = two_hosts_with_a1_runtimes(cluster, tree)
    preemptor = submit_job(
        cluster=cluster, project=a1, user=user, at=now, gpus=8, min_runtime_s=2 * H
    )
    victim = a1_running(
        cluster,
        tree,
        now,
        resumable=resumable,
        state=AttemptState.STOPPING,
        placements=gpus_on(0, 1, 2, 3, host=h0),
        stop_requested_at=now,
        stop_deadline=now + dt.timedelta(seconds=GRACE_S),
        stop_intent=AttemptEnd.PREEMPTED,
        preempted_by=preemptor,
        for_block=gpus_on(*range(8), host=h0),
    )
    a1_running(cluster, tree, now, placements=gpus_on(0, 1, 2, 3, host=h1))
    a1_running(cluster, tree, now, placements=gpus_on(4, 5, 6, 7, host=h1))
    behind = submit_job(cluster=cluster, project=a1, user=user, at=now, gpus=8, min_runtime_s=2 * H)
    return preemptor, victim, behind, h0


def _start(etas, job) -> float:
    return dt.datetime.fromisoformat(etas[str(job.pk)]["start"]).timestamp()


def test_a_stopping_victim_holds_no_gpu_and_its_block_is_the_preemptor_s(cluster, tree):
    preemptor, victim, _, h0 = _stopping(cluster, tree, resumable=False)
    cs = cluster_snapshot(cluster=cluster, refusals=True)
    assert cs.waiting == {str(preemptor.pk): (str(victim.pk),)}
    assert len(cs.snapshot.running) == 4  # the stop, the hold's free half, the two on h1
    snap = after_stops(cs, requeued=stop_requeues)
    held = Counter((p.host, i) for rw in snap.running for p in rw.placements for i in p.gpu_indices)
    assert len(held) == 16 and set(held.values()) == {1}
    by_id = {rw.workload.id: rw for rw in snap.running}
    assert str(victim.pk) not in by_id  # nor charged to its project
    hold = by_id[f"~hold-{preemptor.pk}"]
    assert hold.workload.gpus == 8 and [p.host for p in hold.placements] == [h0]
    assert hold.placements[0].gpu_indices == tuple(range(8))
    # not resumable: the preemption ends it, it does not come back
    assert snap.pending == cs.snapshot.pending
    # the live cycle still sees the victim on its GPUs until the cluster reports the stop
    assert str(victim.pk) in {rw.workload.id for rw in cs.snapshot.running}


def test_the_preemptor_starts_at_the_stop_and_the_job_behind_when_it_ends(cluster, tree):
    """The preemptor is shown starting by the victim's stop deadline; the 8-GPU job behind
    it starts on h0 when the preemptor ends (1,000 s): it was shown starting when the
    victim's forecast run ended (8,000 s more), the victim holding half of h0 until then
    and the preemptor's hold the other half for a 4-GPU job's runtime."""
    preemptor, _, behind, _ = _stopping(cluster, tree, resumable=False)
    now = timezone.now().timestamp()
    etas = cluster_etas(cluster=cluster, fresh=True)
    assert etas[str(preemptor.pk)]["method"] == "victims-stopping"
    assert now - 5 <= _start(etas, preemptor) <= now + GRACE_S
    assert etas[str(behind.pk)]["method"] == "forward-simulation"
    assert now + 900 <= _start(etas, behind) <= now + 1500, (_start(etas, behind) - now, etas)


def test_a_resumable_victim_is_back_in_the_queue_ahead_of_the_job_behind(cluster, tree):
    """Requeued as the live cycle requeues it (`job_target`), the resumable victim,
    submitted earlier, takes h0 when the preemptor ends; the 8-GPU job behind waits for
    h1 (8,000 s). The victim itself gets no ETA while it is stopping."""
    preemptor, victim, behind, _ = _stopping(cluster, tree, resumable=True)
    cs = cluster_snapshot(cluster=cluster, refusals=True)
    snap = after_stops(cs, requeued=stop_requeues)
    (project,) = cs.snapshot.pending  # a1: the job behind (the preemptor waits apart)
    assert [w.id for w in snap.pending[project]] == [str(victim.pk), str(behind.pk)]
    assert str(victim.pk) not in {rw.workload.id for rw in snap.running}
    now = timezone.now().timestamp()
    etas = cluster_etas(cluster=cluster, fresh=True)
    assert str(victim.pk) not in etas
    assert now + 7500 <= _start(etas, behind) <= now + 9000, (_start(etas, behind) - now, etas)
