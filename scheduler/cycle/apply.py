"""Step 4 of a cycle: write the plan (one transaction), then tell the cluster.

A planned migration's stop is sent before anything is written and its job started
again once the cluster reports the end (`scheduler.cycle.moves`). Stops first (attempt
STOPPING with its intent and deadline; the job event names the preempting job, its
project and the rule; a job whose idle GPUs are reclaimed has its
owner told by e-mail where the cluster's `idle_notify_owner` says so), then starts: the Attempt is committed
STARTING *before* `adapter.start` and carries the attempt id (adopt-before-retry). A
start that needs GPUs of a job being stopped waits: they are free only when the
cluster reports the end. Unhealthy hosts the engine reports empty get
`ready_for_repair_at`."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from django.db import transaction
from django.db.models import F

from scheduler.core.engine import CyclePlan, Placement, StopReason, stop_rule
from scheduler.cycle.attempts import next_attempt, send_starts, stop_attempt
from scheduler.cycle.context import CycleContext
from scheduler.cycle.moves import ask_stops, planned_moves, send_move_stops
from scheduler.cycle.queue_store import write_queue
from scheduler.models import Attempt, AttemptEnd, AttemptState, Host, HostHealth, Job, JobState
from scheduler.selectors.snapshot import ClusterSnapshot
from scheduler.selectors.translate import placements_to_json
from scheduler.services.notices import job_idle_reclaim_notify
from scheduler.services.transitions import job_transition


def apply(ctx: CycleContext, cs: ClusterSnapshot, cycle_plan: CyclePlan) -> None:
    """Write the plan (one transaction), then tell the cluster, then store the queue."""
    stops = [
        s
        for s in cycle_plan.stops
        if s.workload_id in cs.attempt_ids and s.workload_id not in cs.stopping
    ]
    moves = planned_moves(cycle_plan)
    with ctx.phase("tell"):  # a move's stop first: a refused one changes nothing
        stops, sent, kept = ask_stops(ctx, cs, stops, moves)
    busy = _gpus_of(cs, {s.workload_id for s in stops} | kept)
    starts = [s for s in cycle_plan.starts if not _overlaps(s.placements, busy)]
    deferred = {
        s.workload_id: tuple(v.workload_id for v in stops if v.for_workload_id == s.workload_id)
        for s in cycle_plan.starts
        if _overlaps(s.placements, busy)
    }
    with ctx.phase("write"), transaction.atomic():
        blocks = {
            s.workload_id: s.placements for s in cycle_plan.starts if s.workload_id in deferred
        }
        stopped = _write_stops(ctx, cs, stops, moves, blocks)
        started = _write_starts(ctx, cs, starts)
        _write_ready(ctx, cs, cycle_plan)
    with ctx.phase("tell"):
        send_move_stops(ctx, stopped, sent)
        send_starts(ctx, started, {v: k for k, v in cs.node_ids.items()})
    with ctx.phase("queue"):
        write_queue(ctx, cs, cycle_plan, deferred)
    record = ctx.record
    record.pending = sum(map(len, cs.snapshot.pending.values())) + len(cs.waiting)
    record.running = len(cs.attempt_ids)
    record.reservations = len(cycle_plan.reservations)


def _write_stops(
    ctx: CycleContext,
    cs: ClusterSnapshot,
    stops,
    moves: Mapping[str, Sequence[Placement]],
    blocks: Mapping[str, Sequence[Placement]],
) -> list[Attempt]:
    """The stops, written STOPPING; a stop for a waiting job carries the block the plan
    gave that job (`blocks`, by workload id), held for it until its victims exit."""
    if not stops:
        return []
    attempts = (
        Attempt.objects.select_for_update(of=("self", "job"))
        .select_related("job", "job__submitter")
        .in_bulk([cs.attempt_ids[s.workload_id] for s in stops])
    )
    preemptors = Job.objects.in_bulk(
        [cs.job_id(s.for_workload_id) for s in stops if s.for_workload_id]
    )
    done = []
    for stop in stops:
        attempt = attempts.get(cs.attempt_ids[stop.workload_id])
        if attempt is None or attempt.state not in (AttemptState.STARTING, AttemptState.RUNNING):
            continue  # cancelled or ended since the snapshot
        drain = stop.reason_code in (StopReason.DRAIN, StopReason.HOST_DOWN)
        moved_to = moves.get(stop.workload_id) if stop.reason_code == StopReason.MIGRATE else None
        intent = AttemptEnd.MIGRATED if moved_to else AttemptEnd.PREEMPTED
        rule = stop_rule(stop.reason_code)
        reason = stop.reason
        if (
            stop.reason_code == StopReason.IDLE
            and ctx.cluster.idle_notify_owner
            and job_idle_reclaim_notify(job=attempt.job, reason=reason)
        ):
            reason += "; its owner was told by e-mail"
        stop_attempt(
            ctx,
            attempt,
            intent=AttemptEnd.DRAINED if drain else intent,
            reason=reason,
            reason_code=str(stop.reason_code),
            rule=rule,
            by=preemptors.get(cs.job_id(stop.for_workload_id)) if stop.for_workload_id else None,
            moved_to=placements_to_json(moved_to) if moved_to else None,
            for_block=placements_to_json(blocks.get(stop.for_workload_id, ())) or None,
        )
        done.append(attempt)
        ctx.counts.actions.append(("stop", rule))
    ctx.counts.stops += len(done)
    return done


def _write_starts(ctx: CycleContext, cs: ClusterSnapshot, starts) -> list[tuple[Attempt, Job]]:
    """Attempts STARTING, committed before any adapter call."""
    if not starts:
        return []
    jobs = (
        Job.objects.select_for_update()
        .filter(pk__in=[cs.job_id(s.workload_id) for s in starts], state=JobState.PENDING)
        .in_bulk()
    )
    chosen = [
        (s, jobs[cs.job_id(s.workload_id)]) for s in starts if cs.job_id(s.workload_id) in jobs
    ]
    if not chosen:
        return []
    Job.objects.filter(pk__in=[j.pk for _, j in chosen]).update(
        attempt_count=F("attempt_count") + 1
    )
    attempts = [
        next_attempt(ctx, job, placements_to_json(start.placements), allocated=start.allocated)
        for start, job in chosen
    ]
    # a new attempt is created STARTING (no transition): its job's event records it
    Attempt.objects.bulk_create(attempts)
    for (start, job), attempt in zip(chosen, attempts, strict=True):
        job_transition(
            job=job,
            to_state=JobState.STARTING,
            reason=start.reason,
            reason_code="scheduled",
            at=ctx.at,
            attempt=attempt,
            cycle=ctx.record,
        )
    ctx.counts.starts += len(attempts)
    ctx.counts.actions += [
        ("start", "allocated" if a.allocated else "unallocated") for a in attempts
    ]
    return [(a, job) for a, (_, job) in zip(attempts, chosen, strict=True)]


def _write_ready(ctx: CycleContext, cs: ClusterSnapshot, cycle_plan: CyclePlan) -> None:
    """Unhealthy hosts the engine reports empty, unless a job still holds GPUs
    there (the engine counts this cycle's stops as gone; the cluster does not yet)."""
    held = {p.host for rw in cs.snapshot.running for p in rw.placements}
    names = [r.host for r in cycle_plan.hosts_ready if r.host not in held]
    if names:
        Host.objects.filter(
            cluster=ctx.cluster, name__in=names, ready_for_repair_at__isnull=True
        ).exclude(health=HostHealth.HEALTHY).update(ready_for_repair_at=ctx.at)


def _gpus_of(cs: ClusterSnapshot, workload_ids: set[str]) -> set[tuple[str, int]]:
    if not workload_ids:
        return set()
    return {
        (p.host, i)
        for rw in cs.snapshot.running
        if rw.workload.id in workload_ids
        for p in rw.placements
        for i in p.gpu_indices
    }


def _overlaps(placements: Sequence[Placement], busy: set[tuple[str, int]]) -> bool:
    return bool(busy) and any((p.host, i) in busy for p in placements for i in p.gpu_indices)
