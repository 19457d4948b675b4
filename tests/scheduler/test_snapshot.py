"""The engine's view of a cluster, read from the database."""

from __future__ import annotations

import datetime as dt

import pytest
from django.utils import timezone

from scheduler.core.engine import Placement, plan
from scheduler.core.engine.runs import last_checkpoint_s, protected_until
from scheduler.models import Attempt, AttemptEnd, AttemptState, Host, HostHealth, JobState
from scheduler.selectors.snapshot import cluster_snapshot
from tests.factories import AttemptFactory, ClusterFactory, UserFactory
from tests.support.live import submit_job

pytestmark = pytest.mark.django_db
A1, A2, B1 = "org/prog-a/a1", "org/prog-a/a2", "org/prog-b/b1"


@pytest.fixture
def setup(tree):
    cluster = ClusterFactory(max_min_runtime_s=7200, lookback_s=86400, half_life_s=None)
    for name, health in [("h2", HostHealth.HEALTHY), ("h1", HostHealth.DRAINING)]:
        Host.objects.create(cluster=cluster, name=name, gpus=8, health=health)
    now = timezone.now().replace(microsecond=0)
    user = UserFactory(username="ann")

    def job(project="a1", **kw):
        kw.setdefault("at", now - dt.timedelta(hours=1))
        return submit_job(cluster=cluster, project=tree.node(project), user=user, **kw)

    def attempt(job, state, gpus, host="h2", first=0, **kw):
        job.state = {
            AttemptState.STARTING: JobState.STARTING,
            AttemptState.RUNNING: JobState.RUNNING,
            AttemptState.STOPPING: JobState.STOPPING,
        }[state]
        job.save()
        return AttemptFactory(
            job=job,
            number=1,
            attempt_id=f"t-{job.pk}",
            cluster=cluster,
            project=job.project,
            gpus=gpus,
            placements=[{"host": host, "gpu_indices": list(range(first, first + gpus))}],
            allocated=job.min_runtime_s > 0,
            state=state,
            **kw,
        )

    return cluster, now, job, attempt


def test_hosts_running_and_pending_as_the_engine_reads_them(setup):
    cluster, now, job, attempt = setup
    started = now - dt.timedelta(minutes=70)
    run = job(gpus=2, resumable=True, min_runtime_s=600)
    attempt(run, AttemptState.RUNNING, 2, created_at=started, started_at=started)
    starting = job("b1", gpus=1, min_runtime_s=0)
    attempt(starting, AttemptState.STARTING, 1, first=2, created_at=now - dt.timedelta(seconds=3))
    low = job(priority=0, at=now - dt.timedelta(minutes=5))
    high = job(priority=9, at=now - dt.timedelta(minutes=1))
    old = job(priority=0, at=now - dt.timedelta(minutes=9))
    other = job("a2")

    cs = cluster_snapshot(cluster=cluster, now=now)
    snap = cs.snapshot
    assert [(h.name, h.healthy) for h in snap.hosts] == [("h1", False), ("h2", True)]
    assert [[w.id for w in snap.pending[p]] for p in (A1, A2)] == [
        [str(high.pk), str(old.pk), str(low.pk)],
        [str(other.pk)],
    ]
    assert snap.pending[A1][0].submit_s == high.submitted_at.timestamp()
    by_id = {rw.workload.id: rw for rw in snap.running}
    held = by_id[str(run.pk)]
    assert held.placements == (Placement("h2", (0, 1)),)
    assert held.started_s == started.timestamp() and held.allocated
    # resumable, checkpoint every 30 min: saved at +60 min
    assert held.last_checkpoint_s == started.timestamp() + 3600
    fresh = by_id[str(starting.pk)]
    assert fresh.started_s == (now - dt.timedelta(seconds=3)).timestamp()  # not started yet
    assert not fresh.allocated and fresh.workload.project == B1
    assert cs.policy.max_min_runtime_s == 7200 and cs.policy.lookback_s == 86400
    assert cs.node_id(A1) == run.project_id and cs.job_id(str(run.pk)) == run.pk
    assert cs.attempt_ids[str(run.pk)] == Attempt.objects.get(job=run).pk
    assert cs.now == now.timestamp()
    assert snap.usage[A1] == pytest.approx(2 * 70 * 60)  # its allocated run so far
    assert B1 not in snap.usage  # unallocated work is free


def _stopping_for(attempt, victim, gpus, preemptor, now, **fields) -> dt.datetime:
    """`victim`'s two-hour run on `gpus` GPUs stopping for `preemptor` (preempted, its
    stop deadline 20 s from `now`, which it returns)."""
    deadline = now + dt.timedelta(seconds=20)
    attempt(
        victim,
        AttemptState.STOPPING,
        gpus,
        created_at=now - dt.timedelta(hours=2),
        started_at=now - dt.timedelta(hours=2),
        stop_intent=AttemptEnd.PREEMPTED,
        stop_deadline=deadline,
        preempted_by=preemptor,
        **fields,
    )
    return deadline


def test_stopping_jobs_hold_their_gpus_protected_and_their_preemptor_waits(setup):
    cluster, now, job, attempt = setup
    preemptor = job("a1", gpus=8, min_runtime_s=600)
    victim = job("b1", gpus=8, min_runtime_s=0, resumable=True)
    deadline = _stopping_for(attempt, victim, 8, preemptor, now)
    cs = cluster_snapshot(cluster=cluster, now=now)
    assert cs.stopping == {str(victim.pk)}
    assert cs.waiting == {str(preemptor.pk): (str(victim.pk),)}
    assert A1 not in cs.snapshot.pending  # not planned again while its victim exits
    holder = cs.snapshot.running[0]
    until = protected_until(holder, cs.policy.max_min_runtime_s)
    assert holder.allocated and until == deadline.timestamp() == holder.protected_until_s
    # the engine neither preempts it again nor gives its GPUs away
    result = plan(cs.snapshot, cs.policy, cs.now)
    assert not result.stops and not result.starts

    # a victim that outlives its deadline by far no longer holds its preemptor back
    later = cluster_snapshot(cluster=cluster, now=deadline + dt.timedelta(minutes=5))
    assert later.waiting == {} and str(preemptor.pk) in {w.id for w in later.snapshot.pending[A1]}


def test_a_waiting_preemptor_keeps_the_free_gpus_of_its_block_until_the_stop_ends(setup):
    """An 8-GPU preemptor planned on h2 stops a 4-GPU victim there; h2's other four GPUs
    are free. While the victim stops, those four are held for the preemptor (as
    itself), so a 4-GPU job submitted meanwhile gets nothing of h2."""
    cluster, now, job, attempt = setup
    preemptor = job("a1", gpus=8, min_runtime_s=600)
    victim = job("b1", gpus=4, min_runtime_s=0, resumable=True)
    block = [{"host": "h2", "gpu_indices": list(range(8))}]
    deadline = _stopping_for(attempt, victim, 4, preemptor, now, for_block=block)
    newcomer = job("a2", gpus=4, min_runtime_s=600, at=now)
    cs = cluster_snapshot(cluster=cluster, now=now)
    assert cs.waiting == {str(preemptor.pk): (str(victim.pk),)}
    by_id = {rw.workload.id: rw for rw in cs.snapshot.running}
    hold = by_id[f"~hold-{preemptor.pk}"]
    assert hold.placements == (Placement("h2", (4, 5, 6, 7)),)
    assert hold.workload.project == A1 and hold.workload.gpus == 4
    assert hold.protected_until_s == deadline.timestamp()
    result = plan(cs.snapshot, cs.policy, cs.now)
    assert str(newcomer.pk) not in {s.workload_id for s in result.starts}
    assert not result.stops

    # once the victim's stop is long over, nothing is held any more
    later = cluster_snapshot(cluster=cluster, now=deadline + dt.timedelta(minutes=5))
    assert not [rw for rw in later.snapshot.running if rw.workload.id.startswith("~hold-")]


def test_the_clusters_short_job_reserve_reaches_the_engine(setup):
    cluster, now, job, _ = setup
    Host.objects.create(cluster=cluster, name="h3", gpus=8)  # h2 and h3 are healthy
    longs = [job(gpus=8, min_runtime_s=3600, priority=5) for _ in range(2)]
    debug = job(gpus=8, min_runtime_s=600, priority=0)

    def started() -> set[int]:
        cs = cluster_snapshot(cluster=cluster, now=now)
        return {int(x.workload_id) for x in plan(cs.snapshot, cs.policy, cs.now).starts}

    # the adaptive reserve (on by default): the debug job's 8 GPUs fill a host, held for it
    assert started() == {longs[0].pk, debug.pk}
    cluster.short_reserve_auto = False  # off: the cluster's fixed reserve only
    cluster.save()
    assert started() == {longs[0].pk, longs[1].pk}
    cluster.short_reserve_hosts, cluster.short_job_max_s = 1, 900
    cluster.save()
    # one host stays for jobs protected for at most 15 min: the debug job starts there
    assert started() == {longs[0].pk, debug.pk}
    cluster.short_job_max_s = 300
    cluster.save()
    assert started() == {longs[0].pk}


def test_last_checkpoint():
    assert last_checkpoint_s(100.0, 100.0 + 1799, 1800) is None
    assert last_checkpoint_s(100.0, 100.0 + 1800, 1800) == 1900.0
    assert last_checkpoint_s(100.0, 100.0 + 5000, 1800) == 100.0 + 3600
    assert last_checkpoint_s(100.0, 99.0, 1800) is None


def test_a_cache_reuses_unchanged_work_and_follows_every_change(setup, tree):
    from budgets import services as budget_services
    from scheduler.selectors.snapshot import SnapshotCache

    cluster, now, job, attempt = setup
    waiting = job(gpus=1)
    run = job(gpus=2)
    attempt(run, AttemptState.RUNNING, 2, created_at=now, started_at=now)
    cache = SnapshotCache()
    first = cluster_snapshot(cluster=cluster, now=now, cache=cache)
    again = cluster_snapshot(cluster=cluster, now=now, cache=cache)
    assert again.snapshot.tree is first.snapshot.tree
    assert again.snapshot.running[0] is first.snapshot.running[0]
    assert again.snapshot.pending[A1][0] is first.snapshot.pending[A1][0]

    budget_services.budget_change_create(
        actor=tree.user("lead-a"), reason="x", changes=[{"node": tree.node("a1").pk, "weight": 5}]
    )
    waiting.priority = 3
    waiting.save()
    later = cluster_snapshot(cluster=cluster, now=now, cache=cache)
    weights = {n.name: n.weight for n in later.snapshot.tree.children[0].children}
    assert weights[A1] == 5 and later.tree_version == first.tree_version + 1
    assert later.snapshot.pending[A1][0].priority == 3
    assert later.snapshot.running[0] is first.snapshot.running[0]


def test_reading_a_snapshot_never_applies_due_budget_changes_the_cycle_does(live):
    from budgets import services as budget_services
    from budgets.models import ScheduledChange, ScheduledStatus

    now = live.now
    event = budget_services.budget_change_create(
        actor=live.tree.user("lead-a"),
        reason="from later",
        changes=[{"node": live.tree.node("a1").pk, "weight": 5}],
        effective_at=now + dt.timedelta(minutes=5),
        now=now,
    )
    live.memory.advance(6 * 60)
    read = cluster_snapshot(cluster=live.cluster, now=live.now)
    weights = {n.name: n.weight for n in read.snapshot.tree.children[0].children}
    assert weights[A1] != 5  # a read writes nothing
    assert ScheduledChange.objects.get(event=event).status == ScheduledStatus.PENDING

    live.cycle()  # the cycle applies what is due first, then decides with it
    assert ScheduledChange.objects.get(event=event).status == ScheduledStatus.APPLIED
    after = cluster_snapshot(cluster=live.cluster, now=live.now)
    assert {n.name: n.weight for n in after.snapshot.tree.children[0].children}[A1] == 5
