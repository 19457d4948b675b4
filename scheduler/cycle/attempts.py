"""What the cycle does to one attempt: confirm its start, end it and move its job on,
stop it. Each is one `attempt_transition` (scheduler.services.transitions), which also
moves the job and records the event."""

from __future__ import annotations

import dataclasses
import datetime as dt
import logging
import secrets
from collections.abc import Mapping

from django.conf import settings
from django.db import transaction

from scheduler.adapters import ClusterJob, ClusterJobState, StartRequest
from scheduler.core.engine.runs import saved_work_s
from scheduler.cycle.adapter_io import runs, send_start
from scheduler.cycle.context import CycleContext
from scheduler.cycle.refusals import kept_off_note
from scheduler.models import Attempt, AttemptEnd, AttemptState, Job, JobState
from scheduler.selectors.refusals import START_WITHDRAWN
from scheduler.selectors.translate import (
    placements_from_json,
    placements_to_json,
    policy_for_cluster,
)
from scheduler.services.transitions import (
    attempt_transition,
    is_legal,
    job_target,
    running_reason,
)

log = logging.getLogger(__name__)

_END_TEXT = {
    AttemptEnd.SUCCEEDED: "finished successfully",
    AttemptEnd.FAILED: "failed",
    AttemptEnd.PREEMPTED: "stopped (preempted)",
    AttemptEnd.DRAINED: "stopped (host drained)",
    AttemptEnd.CANCELLED: "cancelled",
    AttemptEnd.LOST: "lost",
    AttemptEnd.START_FAILED: "could not be started",
    AttemptEnd.MIGRATED: "stopped to be moved to other hosts (consolidation)",
}


def start_confirm_s() -> float:
    """How long a STARTING attempt the cluster does not list may still show up there
    (a start in flight when a worker died) before it counts as failed."""
    return float(getattr(settings, "ALLOT_START_CONFIRM_S", 15.0))


def start_timeout_s() -> float:
    """How long the cluster may keep a start waiting (it lists the job, not running:
    Slurm PENDING for Resources, a node Slurm drained after the plan) before the cycle
    takes the start back and requeues the job (docs/architecture.md, start timeout)."""
    return float(getattr(settings, "ALLOT_START_TIMEOUT_S", 300.0))


def start_overdue(at: dt.datetime, created_at: dt.datetime, end_detail: str) -> bool:
    """Whether a STARTING attempt the cluster still reports not running is past the
    start timeout and not already being taken back."""
    if withdrawing(end_detail):
        return False
    return (at - created_at).total_seconds() >= start_timeout_s()


def withdrawing(end_detail: str) -> bool:
    """Whether the cycle is taking the attempt's start back (`withdraw_start`)."""
    return end_detail.startswith(START_WITHDRAWN)


def withdraw_start(ctx: CycleContext, attempt: Attempt, cj: ClusterJob) -> None:
    """Mark an overdue start to be taken back (the cycle then asks the adapter to
    `withdraw` it). The attempt stays STARTING, its GPUs held, until the cluster
    reports the outcome: the job stopped or gone (the attempt ends START_FAILED with
    this detail and the job goes back to the queue), or running after all (it runs,
    `confirm_running`): never ended while the cluster may still run it."""
    waited = (ctx.at - attempt.created_at).total_seconds()
    why = f" ({cj.detail})" if cj.detail else ""
    hosts = tuple(attempt.host_names)
    states = [f"{h} in the cluster: {ctx.host_states[h]}" for h in hosts if ctx.host_states.get(h)]
    why += f"; {', '.join(states)}" if states else ""
    detail = f"{START_WITHDRAWN}the cluster kept it waiting {waited:.0f} s{why}"
    attempt.end_detail = (detail + kept_off_note(ctx, attempt.job_id, hosts, detail))[:1000]
    attempt.save(update_fields=["end_detail"])
    log.info("attempt %s: %s", attempt.attempt_id, attempt.end_detail)


def confirm_running(ctx: CycleContext, attempt: Attempt, cj: ClusterJob) -> None:
    """The cluster runs a STARTING attempt: RUNNING, with the GPUs it really gave (a
    start being taken back that ran first runs: the withdrawal is forgotten)."""
    changes: dict[str, object] = {"started_at": ctx.clamp(cj.started_at, attempt.created_at)}
    if withdrawing(attempt.end_detail):
        changes["end_detail"] = ""
    if cj.placements:
        changes["placements"] = placements_to_json(cj.placements)
    if cj.external_id:
        changes["external_id"] = cj.external_id
    placements = changes.get("placements", attempt.placements)
    attempt_transition(
        attempt=attempt,
        to_state=AttemptState.RUNNING,
        changes=changes,
        job_steps=[JobState.RUNNING] if attempt.job.state == JobState.STARTING else [],
        reason=running_reason(placements, attempt.number),
        reason_code="started",
        at=changes["started_at"],
        cycle=ctx.record,
    )


def next_attempt(
    ctx: CycleContext, job: Job, placements: list[dict], *, allocated: bool, **fields
) -> Attempt:
    """The job's next attempt, unsaved and STARTING on `placements` (stored form): its
    number and a unique attempt id. The caller counts it in `Job.attempt_count` in the
    database (one UPDATE for many jobs) and saves it."""
    job.attempt_count += 1
    return Attempt(
        job=job,
        number=job.attempt_count,
        attempt_id=f"allot-{job.pk}-{job.attempt_count}-{secrets.token_hex(3)}",
        cluster=ctx.cluster,
        project_id=job.project_id,
        gpus=job.gpus,
        placements=placements,
        allocated=allocated,
        state=AttemptState.STARTING,
        created_at=ctx.at,
        started_by_cycle=ctx.record,
        **fields,
    )


def stop_attempt(
    ctx: CycleContext,
    attempt: Attempt,
    *,
    intent: str,
    reason: str,
    reason_code: str,
    rule: str,
    by: Job | None,
    moved_to: list[dict] | None = None,
    for_block: list[dict] | None = None,
) -> None:
    """A STARTING or RUNNING attempt the plan stops: STOPPING with its intent and the
    cluster's grace period, its job STOPPING with the preempting job and the rule;
    `moved_to`: where a moved job starts again once stopped (`scheduler.cycle.moves`);
    `for_block`: the GPUs the plan gave the preempting job, held for it while it waits
    (`scheduler.selectors.snapshot`)."""
    changes: dict[str, object] = {
        "stop_intent": intent,
        "stop_requested_at": ctx.at,
        "stop_deadline": ctx.at + dt.timedelta(seconds=ctx.cluster.grace_s),
        "preempted_by": by,
    }
    if moved_to:
        changes["moved_to"] = moved_to
    if for_block:
        changes["for_block"] = for_block
    attempt_transition(
        attempt=attempt,
        to_state=AttemptState.STOPPING,
        changes=changes,
        job_steps=[JobState.STOPPING],
        reason=reason,
        reason_code=reason_code,
        at=ctx.at,
        cycle=ctx.record,
        preempting_job=by,
        rule=rule,
    )


def end_attempt(
    ctx: CycleContext, attempt: Attempt, end: str, detail: str, *, cj: ClusterJob | None = None
) -> None:
    """Close an attempt (its GPUs are free) and move its job to its next state (through
    STOPPING when the state machine asks for it), saving checkpointed work of requeued
    runs. A run the cluster never reported started keeps no start time (the ledger
    charges nothing)."""
    started_at = attempt.started_at
    if cj is not None and started_at is None and cj.started_at is not None:
        started_at = ctx.clamp(cj.started_at, attempt.created_at)
    ended_at = ctx.clamp(cj.ended_at if cj else None, started_at or attempt.created_at)
    detail = (detail or "")[:1000]
    job = attempt.job
    target = job_target(
        end, resumable=job.resumable, started=started_at is not None, intent=attempt.stop_intent
    )
    reason = f"attempt {attempt.number} {_END_TEXT.get(end, end)}{': ' + detail if detail else ''}"
    if target == JobState.PENDING and started_at is not None and job.resumable:
        ran = (ended_at - started_at).total_seconds()
        saved = saved_work_s(ran, policy_for_cluster(ctx.cluster).checkpoint_interval_s)
        if saved > 0:
            job.progress_s += saved
            job.save(update_fields=["progress_s"])
            reason += f"; {saved / 60:.0f} min of work saved at checkpoints, requeued"
    attempt_transition(
        attempt=attempt,
        to_state=AttemptState.ENDED,
        changes={
            "started_at": started_at,
            "ended_at": ended_at,
            "end_reason": end,
            "end_detail": detail,
        },
        job_steps=_job_steps(job, target, end),
        reason=reason,
        reason_code=end,
        at=ctx.at,
        cycle=ctx.record,
    )


def _job_steps(job: Job, target: str, end: str) -> list[str]:
    """The job's way to `target`: at once, or through STOPPING; only its legal part."""
    if job.state == target:
        return []
    steps = [target]
    if not is_legal(job.state, target) and is_legal(job.state, JobState.STOPPING):
        steps = [JobState.STOPPING, target]
    state = job.state
    for n, step in enumerate(steps):
        if not is_legal(state, step):
            log.error("job %s: cannot go from %s to %s after %s", job.pk, state, step, end)
            return steps[:n]
        state = step
    return steps


def ended_withdrawn(attempt: Attempt, cj: ClusterJob) -> ClusterJob | None:
    """The cluster's end of a start the cycle took back (stopped or cancelled while it
    waited), without the start time Slurm gives a pending job it cancels: it never ran.
    None for any other end (a job that ran and ended first ends as it did)."""
    if not withdrawing(attempt.end_detail):
        return None
    if cj.state not in (ClusterJobState.STOPPED, ClusterJobState.CANCELLED):
        return None
    return dataclasses.replace(cj, started_at=None)


def end_reason(attempt: Attempt, cj: ClusterJob) -> str:
    """How an attempt ended, from the cluster's final state of its job."""
    state = cj.state
    if state == ClusterJobState.SUCCEEDED:
        return AttemptEnd.SUCCEEDED
    if state == ClusterJobState.FAILED:
        return AttemptEnd.FAILED
    if state == ClusterJobState.CANCELLED:
        return AttemptEnd.CANCELLED
    if state == ClusterJobState.STOPPED:
        return attempt.stop_intent or AttemptEnd.LOST
    return AttemptEnd.LOST


def send_starts(
    ctx: CycleContext, started: list[tuple[Attempt, Job]], paths: Mapping[int, str]
) -> None:
    """adapter.start for each new attempt (`paths`: budget node id -> its slug path);
    confirmations and errors recorded after."""
    if not started:
        return
    outcomes: list[tuple[Attempt, ClusterJob | None, str]] = []
    for attempt, job in started:
        request = StartRequest(
            attempt_id=attempt.attempt_id,
            job_name=job.name,
            gpus=attempt.gpus,
            placements=tuple(placements_from_json(attempt.placements)),
            spec=job.spec,
            run_for_s=max(0.0, job.duration_s - job.progress_s) if job.duration_s else None,
            project=paths.get(job.project_id, ""),
            grace_s=float(ctx.cluster.grace_s),
            kind=job.kind,
        )
        outcomes.append((attempt, *send_start(ctx, request)))
    todo = [o for o in outcomes if o[2] or (o[1] is not None and runs(o[1]))]
    if not todo:
        return
    ctx.cluster_read()  # the answers came after the first read
    with transaction.atomic():
        fresh = (
            Attempt.objects.select_for_update(of=("self", "job"))
            .select_related("job")
            .in_bulk([a.pk for a, _, _ in todo])
        )
        for attempt, cj, error in todo:
            row = fresh[attempt.pk]
            if row.state != AttemptState.STARTING:
                continue  # a stop (cancel) came in meanwhile: reconcile takes it on
            if error:
                row.end_detail = error[:1000]
                row.save(update_fields=["end_detail"])
            else:
                confirm_running(ctx, row, cj)
