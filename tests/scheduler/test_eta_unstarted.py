"""The ETA of jobs whose attempt the cluster never reported started: such an attempt is no
run. A run still starting has consumed no runtime and saved no work (its attempt's
creation is no start), and a victim stopped before it started goes back to the queue
whatever it is, as the live cycle requeues it (`job_target(started=False)`), as a job
that never ran (`scheduler.selectors.snapshot.after_stops`). A pending job whose earlier
attempt never started is estimated as the same job without it (the snapshot builds a
pending job from its row alone)."""

import datetime as dt

import pytest
from django.core.cache import cache
from django.utils import timezone

from scheduler.models import Attempt, AttemptEnd, AttemptState, JobState
from scheduler.selectors.snapshot import after_stops, cluster_snapshot
from scheduler.selectors.translate import job_workload
from scheduler.services.eta import cluster_etas, stop_requeues
from tests.factories import AttemptFactory, JobFactory
from tests.support.live import submit_job
from tests.support.stops import a1_job, a1_running, gpus_on, two_hosts_with_a1_runtimes

pytestmark = pytest.mark.django_db

H = 3600
AGO_S = 2000  # how long before now the never-started attempt was created


def _start(etas, job) -> float:
    return dt.datetime.fromisoformat(etas[str(job.pk)]["start"]).timestamp()


def _fresh(cluster):
    """A new answer, not kept steady by the one before (each world is estimated anew)."""
    cache.clear()
    return cluster_etas(cluster=cluster, fresh=True)


def _unstarted(cluster, tree, now, *, placements, created_s: float, **attempt):
    """A 4-GPU a1 job (not resumable) whose attempt, created `created_s` before `now`,
    the cluster never reported started."""
    return a1_job(
        cluster,
        tree,
        submitted_at=now - dt.timedelta(seconds=created_s),
        job_state=JobState.STARTING,
        resumable=False,
        started_at=None,
        placements=placements,
        **attempt,
    )


def test_a_run_still_starting_has_run_nothing_however_long_ago_its_attempt_was_made(cluster, tree):
    """h1 runs two 4-GPU a1 jobs started now (10,000 s to go); on h0 one started 2,000 s
    ago (8,000 s to go) and one whose attempt was made 2,000 s ago but never started. The
    8-GPU job waits for a whole host: h0 comes free when the starting job has run its
    10,000 s from now, as if its attempt were made now; it was shown at 8,000 s (the
    attempt's creation read as its start, 2,000 s of its run counted as done)."""
    h0, h1, now, user, a1 = two_hosts_with_a1_runtimes(cluster, tree)
    a1_running(cluster, tree, now, resumable=False, placements=gpus_on(4, 5, 6, 7, host=h0))
    starting = _unstarted(
        cluster, tree, now, placements=gpus_on(0, 1, 2, 3, host=h0), created_s=AGO_S,
        state=AttemptState.STARTING,
    )  # fmt: skip
    for gpus in ((0, 1, 2, 3), (4, 5, 6, 7)):
        job = JobFactory(cluster=cluster, project=a1, submitter=user, gpus=4, resumable=False,
                         state=JobState.RUNNING, submitted_at=now)  # fmt: skip
        AttemptFactory(job=job, started_at=now, placements=gpus_on(*gpus, host=h1))
    behind = submit_job(cluster=cluster, project=a1, user=user, at=now, gpus=8, min_runtime_s=H)
    old = _start(_fresh(cluster), behind)
    Attempt.objects.filter(job=starting).update(created_at=timezone.now())  # made just now
    made_now = _start(_fresh(cluster), behind)
    assert abs(old - made_now) < 5, (old - now.timestamp(), made_now - now.timestamp())
    assert 9500 <= made_now - now.timestamp() <= 10_500
    cs = cluster_snapshot(cluster=cluster, refusals=True)
    assert cs.unstarted == frozenset({str(starting.pk)})
    forward = after_stops(cs, requeued=stop_requeues).running
    (run,) = [r for r in forward if r.workload.id == str(starting.pk)]
    assert run.started_s == cs.now and run.last_checkpoint_s is None


def test_a_victim_stopped_before_it_started_goes_back_to_the_queue_as_a_job_that_never_ran(
    cluster, tree
):
    """On h0 a 4-GPU a1 job that is not resumable, whose attempt never started, is being
    preempted for an 8-GPU job given all of h0; h1 runs two 4-GPU a1 jobs (8,000 s to go).
    The live cycle requeues the victim (it lost no work): the forward run has it pending
    again, as its row alone makes it, ahead of the 8-GPU job behind, which waits for h1;
    it was dropped as a preempted run that ended for good (shown ~1,000 s)."""
    h0, h1, now, user, a1 = two_hosts_with_a1_runtimes(cluster, tree)
    preemptor = submit_job(
        cluster=cluster, project=a1, user=user, at=now, gpus=8, min_runtime_s=2 * H
    )
    victim = _unstarted(
        cluster, tree, now, placements=gpus_on(0, 1, 2, 3, host=h0), created_s=60,
        state=AttemptState.STOPPING, stop_requested_at=now,
        stop_deadline=now + dt.timedelta(seconds=30), stop_intent=AttemptEnd.PREEMPTED,
        preempted_by=preemptor, for_block=gpus_on(*range(8), host=h0),
    )  # fmt: skip
    victim.state = JobState.STOPPING
    victim.save(update_fields=["state"])
    a1_running(cluster, tree, now, resumable=False, placements=gpus_on(0, 1, 2, 3, host=h1))
    a1_running(cluster, tree, now, resumable=False, placements=gpus_on(4, 5, 6, 7, host=h1))
    behind = submit_job(cluster=cluster, project=a1, user=user, at=now, gpus=8, min_runtime_s=2 * H)
    cs = cluster_snapshot(cluster=cluster, refusals=True)
    assert cs.waiting == {str(preemptor.pk): (str(victim.pk),)}
    snap = after_stops(cs, requeued=stop_requeues)
    (project,) = cs.snapshot.pending
    # pending as the same job without any attempt: its row as a workload, in its order
    fresh = job_workload(victim, project=project)
    assert snap.pending[project] == [fresh, *cs.snapshot.pending[project]]
    assert str(victim.pk) not in {rw.workload.id for rw in snap.running}
    etas = _fresh(cluster)
    assert str(victim.pk) not in etas  # stopping: no ETA of its own yet
    assert 7500 <= _start(etas, behind) - now.timestamp() <= 9000, etas


@pytest.mark.parametrize("end", [AttemptEnd.PREEMPTED, AttemptEnd.START_FAILED])
def test_a_pending_job_whose_earlier_attempt_never_started_is_estimated_as_one_without(
    cluster, tree, end
):
    """A pending 8-GPU job requeued after an attempt that never started (preempted while
    starting, or its start failed) has the ETA of the same job without that attempt: the
    snapshot builds a pending job from its row (no saved work, runs or protection)."""
    h0, h1, now, user, a1 = two_hosts_with_a1_runtimes(cluster, tree)
    for host in (h0, h1):
        a1_running(cluster, tree, now, resumable=False, placements=gpus_on(0, 1, 2, 3, host=host))
    job = submit_job(cluster=cluster, project=a1, user=user, at=now, gpus=8, min_runtime_s=H)
    ago = now - dt.timedelta(seconds=AGO_S)
    AttemptFactory(job=job, state=AttemptState.ENDED, created_at=ago, started_at=None,
                   ended_at=ago + dt.timedelta(seconds=60), end_reason=end,
                   placements=gpus_on(*range(8), host=h0))  # fmt: skip
    with_attempt = _fresh(cluster)[str(job.pk)]
    Attempt.objects.filter(job=job).delete()
    without = _fresh(cluster)[str(job.pk)]
    for key in ("start", "earliest", "latest", "baseline_start"):
        a = dt.datetime.fromisoformat(with_attempt[key]).timestamp()
        b = dt.datetime.fromisoformat(without[key]).timestamp()
        assert abs(a - b) < 5, (key, with_attempt, without)
