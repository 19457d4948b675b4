"""Planned migrations (consolidation, `scheduler.core.engine.consolidate`) in the live
cycle: a running job the plan moves is stopped and then started again on the hosts
the plan gave it; the block it leaves goes to the waiting job it was moved for.

The engine plans the stop and both starts in one plan, as if the stop were instant.
The cluster frees GPUs only when it reports the end (a graceful stop lasts up to the
grace period), so the live cycle does it in two steps, the same for every adapter:

1. the cycle that plans it asks the cluster to stop the run *first* (`ask_stops`): a
   stop the adapter refuses leaves the job running untouched (nothing is written, and
   the waiting job's start waits); an accepted stop is then written like a preemption
   stop, with intent `migrated` and the planned hosts as `Attempt.moved_to`. Until the
   cluster reports the end, the snapshot holds both the old GPUs and the planned ones
   for it, and the waiting job is held out of the plan (it waits for its "victim");
2. the reconcile that sees the end starts the job again at once on `moved_to`
   (`restart_moved`), before the snapshot and the plan: first in line, in the same
   transaction as the end (one open attempt at a time), with the protection it had
   (over: the engine moves only jobs past their protection), and the work since its
   last checkpoint lost like any stop. Where those GPUs are no longer free (a host
   drained, a job outside Allot on them) the job waits in the queue instead.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping, Sequence

from django.db.models import F

from scheduler.adapters import AdapterError, ClusterJob
from scheduler.core.engine import CyclePlan, Placement, StopReason
from scheduler.cycle.adapter_io import send_stop
from scheduler.cycle.attempts import next_attempt
from scheduler.cycle.context import CycleContext
from scheduler.models import Attempt, AttemptEnd, AttemptState, Host, HostHealth, Job, JobState
from scheduler.selectors.refusals import avoid_s
from scheduler.selectors.snapshot import OPEN_ATTEMPT_STATES, ClusterSnapshot
from scheduler.services.transitions import job_transition, stored_placements_text

__all__ = ["ask_stops", "planned_moves", "restart_moved", "send_move_stops"]


def planned_moves(cycle_plan: CyclePlan) -> dict[str, tuple[Placement, ...]]:
    """Workload id of each run the plan moves -> the placements it starts again on."""
    moved = {s.workload_id for s in cycle_plan.stops if s.reason_code == StopReason.MIGRATE}
    if not moved:
        return {}
    return {s.workload_id: s.placements for s in cycle_plan.starts if s.workload_id in moved}


def ask_stops(
    ctx: CycleContext, cs: ClusterSnapshot, stops: Sequence, moves: Mapping[str, object]
) -> tuple[list, set[str], set[str]]:
    """Send the stops of the planned moves before anything is written. Returns the
    stops to write (the moves the cluster accepted or may have: an error that is not
    a refusal is written and resent like any stop), the workload ids whose stop was
    sent, and those not moved (a refusal, a run not running, no planned start): they
    keep their GPUs this cycle."""
    asked = [s for s in stops if s.reason_code == StopReason.MIGRATE]
    if not asked:
        return list(stops), set(), set()
    running = dict(
        Attempt.objects.filter(
            pk__in=[cs.attempt_ids[s.workload_id] for s in asked],
            state=AttemptState.RUNNING,
        ).values_list("pk", "attempt_id")
    )
    sent: set[str] = set()
    kept: set[str] = set()
    for stop in asked:
        wid = stop.workload_id
        attempt_id = running.get(cs.attempt_ids[wid])
        if attempt_id is None or not moves.get(wid):
            kept.add(wid)
            continue
        try:
            ctx.adapter.stop(attempt_id, float(ctx.cluster.grace_s))
        except AdapterError as exc:
            ctx.error(f"stop {attempt_id} (move)", exc)
            if not exc.retryable:
                _refused(ctx, wid, cs.attempt_ids[wid])
                kept.add(wid)
                continue
        except Exception as exc:
            ctx.error(f"stop {attempt_id} (move)", exc)
        else:
            ctx.warm.stops_sent[attempt_id] = (ctx.at, ctx.cluster.grace_s <= 0)
        sent.add(wid)
    return [s for s in stops if s.workload_id not in kept], sent, kept


def _refused(ctx: CycleContext, wid: str, attempt_pk: int) -> None:
    """A move whose stop the cluster refused: the run is protected for the shortest
    refusal-avoidance time (`selectors.refusals.avoid_s`), so the next cycles neither
    plan the same move nor any other stop of it, each refused again, meanwhile."""
    until = ctx.at + dt.timedelta(seconds=avoid_s()[0])
    Attempt.objects.filter(pk=attempt_pk).update(protected_until=until)
    ctx.counts.notes.append(
        f"job {wid} not moved: the cluster refused its stop; "
        f"protected until {until:%H:%M:%S} UTC, no stop is planned for it meanwhile"
    )


def _taken(ctx: CycleContext, reported: Sequence[ClusterJob]) -> set[tuple[str, int]]:
    """GPUs held now: by the cluster's live jobs and by Allot's open attempts."""
    busy = {
        (p.host, i) for cj in reported if not cj.ended for p in cj.placements for i in p.gpu_indices
    }
    rows = Attempt.objects.filter(cluster=ctx.cluster, state__in=OPEN_ATTEMPT_STATES)
    for placements in rows.values_list("placements", flat=True):
        busy.update((p["host"], int(i)) for p in placements for i in p["gpu_indices"])
    return busy


def _blocked(ctx: CycleContext, target: list[dict], busy: set[tuple[str, int]]) -> str:
    """Why `target` cannot take the job now ("" when it can)."""
    hosts = {p["host"] for p in target}
    healthy = set(
        Host.objects.filter(
            cluster=ctx.cluster, name__in=hosts, health=HostHealth.HEALTHY
        ).values_list("name", flat=True)
    )
    if hosts - healthy:
        return f"{', '.join(sorted(hosts - healthy))} takes no new work"
    if any((p["host"], int(i)) in busy for p in target for i in p["gpu_indices"]):
        return "its planned GPUs are held by another job"
    return ""


def restart_moved(
    ctx: CycleContext, ended: Sequence[Attempt], reported: Sequence[ClusterJob]
) -> list[tuple[Attempt, Job]]:
    """Start again on its planned hosts each job whose move stop the cluster reported
    ended (in the reconcile's transaction): a new STARTING attempt, committed before
    the adapter's start like any start. Returns the attempts for `send_starts`."""
    todo = [a for a in ended if a.end_reason == AttemptEnd.MIGRATED and a.moved_to]
    if not todo:
        return []
    busy = _taken(ctx, reported)
    out: list[tuple[Attempt, Job]] = []
    for old in todo:
        job = Job.objects.select_for_update().get(pk=old.job_id)
        if job.state != JobState.PENDING:
            continue  # cancelled, or it ended another way
        why = _blocked(ctx, old.moved_to, busy)
        if why:
            ctx.counts.notes.append(
                f"job {job.pk} not started again after its move: {why}; it waits in the queue"
            )
            continue
        busy.update((p["host"], int(i)) for p in old.moved_to for i in p["gpu_indices"])
        out.append((_start_again(ctx, old, job), job))
    ctx.counts.starts += len(out)
    ctx.counts.actions += [("start", "consolidation")] * len(out)
    return out


def _start_again(ctx: CycleContext, old: Attempt, job: Job) -> Attempt:
    """The job's next attempt on `old.moved_to`, STARTING, its protection over."""
    Job.objects.filter(pk=job.pk).update(attempt_count=F("attempt_count") + 1)
    # `moved_to` is stored as `placements_to_json` wrote the planned placements
    attempt = next_attempt(ctx, job, old.moved_to, allocated=old.allocated, protected_until=ctx.at)
    attempt.save()
    where = stored_placements_text(old.moved_to)
    by = f" for waiting job {old.preempted_by_id}" if old.preempted_by_id else ""
    job_transition(
        job=job,
        to_state=JobState.STARTING,
        reason=(
            f"started again on {where} (attempt {attempt.number}): moved from "
            f"{', '.join(old.host_names)} to free a block{by} (consolidation)"
        ),
        reason_code="moved",
        at=ctx.at,
        attempt=attempt,
        cycle=ctx.record,
    )
    return attempt


def send_move_stops(ctx: CycleContext, attempts: Sequence[Attempt], sent: set[str]) -> None:
    """The stops of `attempts` not sent already (`ask_stops` sent the moves')."""
    for attempt in attempts:
        if str(attempt.job_id) not in sent:
            send_stop(ctx, attempt.attempt_id, float(ctx.cluster.grace_s))
