"""Step 2 of a cycle: bring hosts and open attempts in line with what the cluster
reports (it is the truth about what runs), start again at once the jobs whose move
stop ended (`scheduler.cycle.moves`), then resend stops and push drains."""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Mapping, Sequence

from django.db import transaction

from budgets.selectors import node_paths
from scheduler.adapters import ClusterJob, ClusterJobState
from scheduler.core.engine import Placement
from scheduler.cycle.adapter_io import (
    START_REFUSED,
    push_host_health,
    resend_stops,
    send_withdraw,
)
from scheduler.cycle.attempts import (
    confirm_running,
    end_attempt,
    end_reason,
    ended_withdrawn,
    send_starts,
    start_confirm_s,
    start_overdue,
    withdraw_start,
    withdrawing,
)
from scheduler.cycle.context import ClusterReport, CycleContext
from scheduler.cycle.hosts import reconcile_hosts
from scheduler.cycle.moves import restart_moved
from scheduler.cycle.planned_gpus import moved_placements, reported_busy
from scheduler.models import Attempt, AttemptEnd, AttemptState
from scheduler.selectors.snapshot import OPEN_ATTEMPT_STATES, fetch_rows
from scheduler.selectors.translate import foreign_holder

log = logging.getLogger(__name__)


def reconcile(ctx: CycleContext, report: ClusterReport) -> list:
    """Bring hosts and open attempts in line with the cluster (one transaction), then
    resend stops, push drains and take back the starts the cluster kept waiting past
    the start timeout. Returns the extra GPU holders (jobs outside Allot, attempts
    Allot ended that still run) for the snapshot."""
    ctx.host_states = {h.name: h.state for h in report.hosts if h.state}
    with transaction.atomic():
        pushes = reconcile_hosts(ctx, report.hosts)
        stopping, withdraws, open_ids, unplaced, ended = _reconcile_attempts(ctx, report.jobs)
        _keep_planned_apart(ctx, report, unplaced)
        holders, zombies = _outside_jobs(ctx, report.jobs, open_ids)
        # moved jobs whose stop ended start again at once, before the plan
        restarts = [] if ctx.reconcile_only else restart_moved(ctx, ended, report.jobs)
    push_host_health(ctx, pushes)
    resend_stops(ctx, stopping, zombies)
    for attempt_id in withdraws:
        send_withdraw(ctx, attempt_id)
    if restarts:
        send_starts(ctx, restarts, _paths(ctx))
    return holders


def _paths(ctx: CycleContext) -> Mapping[int, str]:
    """Budget node id -> slug path (the worker's snapshot cache, else read)."""
    return ctx.warm.snapshot_cache.paths or node_paths()


def _reconcile_attempts(
    ctx: CycleContext, reported: Sequence[ClusterJob]
) -> tuple[list[tuple[str, float]], list[str], set[str], list[int], list[Attempt]]:
    """Apply what the cluster reports to every open attempt. Open attempts are read
    without locks first; only those the report changes are locked and updated.
    Returns the stops to (re)send as (attempt id, grace seconds left), the starts to
    take back (attempt ids: STARTING attempts being withdrawn the cluster still
    reports waiting), the ids of the attempts open before the reconcile and the pks
    of those the cluster had not placed yet (no start time: their GPUs are the
    plan's) and the attempts it ended."""
    by_id = {cj.attempt_id: cj for cj in reported if cj.attempt_id}
    rows = Attempt.objects.filter(cluster=ctx.cluster, state__in=OPEN_ATTEMPT_STATES)
    todo: list[int] = []
    stopping: list[tuple[str, dt.datetime | None]] = []
    withdraws: list[str] = []
    open_ids: set[str] = set()
    unplaced: list[int] = []
    ended: list[Attempt] = []
    for pk, attempt_id, state, external_id, started_at, deadline, created_at, detail in fetch_rows(
        rows.values_list(
            "pk",
            "attempt_id",
            "state",
            "external_id",
            "started_at",
            "stop_deadline",
            "created_at",
            "end_detail",
        )
    ):
        open_ids.add(attempt_id)
        if started_at is None:
            unplaced.append(pk)
        cj = by_id.get(attempt_id)
        overdue = state == AttemptState.STARTING and start_overdue(ctx.at, created_at, detail)
        if _needs_reconcile(state, external_id, started_at, cj, overdue=overdue):
            todo.append(pk)
        elif state == AttemptState.STOPPING:
            stopping.append((attempt_id, deadline))
        elif state == AttemptState.STARTING and withdrawing(detail) and _waits(cj):
            withdraws.append(attempt_id)  # not taken back yet (a failed call, a crash)
    if todo:
        attempts = (
            Attempt.objects.select_for_update(of=("self", "job"))
            .select_related("job")
            .filter(pk__in=todo, state__in=OPEN_ATTEMPT_STATES)
            .order_by("pk")
        )
        for attempt in attempts:
            cj = by_id.get(attempt.attempt_id)
            ctx.counts.reconciled += _reconcile_one(ctx, attempt, cj)
            if attempt.state == AttemptState.ENDED:
                ended.append(attempt)
            elif attempt.state == AttemptState.STOPPING:
                stopping.append((attempt.attempt_id, attempt.stop_deadline))
            elif (
                attempt.state == AttemptState.STARTING
                and withdrawing(attempt.end_detail)
                and _waits(cj)
            ):
                withdraws.append(attempt.attempt_id)
    stops = []
    for attempt_id, deadline in stopping:
        left = (deadline - ctx.at).total_seconds() if deadline else ctx.cluster.grace_s
        stops.append((attempt_id, max(0.0, left)))
    return stops, withdraws, open_ids, unplaced, ended


def _waits(cj: ClusterJob | None) -> bool:
    """Whether the cluster reports the job accepted and not running (STARTING)."""
    return cj is not None and cj.state == ClusterJobState.STARTING


def _keep_planned_apart(ctx: CycleContext, report: ClusterReport, unplaced: list[int]) -> None:
    """Move the planned GPUs of open attempts the cluster has not placed yet off the
    GPUs it reports busy (`scheduler.cycle.planned_gpus`): the engine then sees a host
    full whose jobs run on other GPUs than planned."""
    if not unplaced:
        return
    planned = list(
        Attempt.objects.filter(pk__in=unplaced, state__in=OPEN_ATTEMPT_STATES, started_at=None)
        .order_by("pk")
        .values_list("pk", "attempt_id", "placements")
    )
    if not planned:
        return
    mine = {attempt_id for _, attempt_id, _ in planned}
    busy = reported_busy(
        (p.host, p.gpu_indices)
        for cj in report.jobs
        if not cj.ended and cj.attempt_id not in mine
        for p in cj.placements
    )
    if not busy:
        return
    moved = moved_placements(
        [(pk, placements) for pk, _, placements in planned],
        busy,
        {h.name: h.gpus for h in report.hosts},
    )
    for pk, placements in moved.items():
        Attempt.objects.filter(pk=pk).update(placements=placements)
    if moved:
        log.info("%d planned starts moved off GPUs the cluster gave others", len(moved))


def _needs_reconcile(
    state: str,
    external_id: str,
    started_at: dt.datetime | None,
    cj: ClusterJob | None,
    *,
    overdue: bool = False,
) -> bool:
    """Whether the cluster's report changes an open attempt (see `_reconcile_one`);
    `overdue`: a STARTING attempt past the start timeout, not being taken back yet."""
    if cj is None or cj.ended:
        return True
    if cj.external_id and cj.external_id != external_id:
        return True
    if cj.state == ClusterJobState.STARTING:
        return overdue
    return state == AttemptState.STARTING or started_at is None


def _reconcile_one(ctx: CycleContext, attempt: Attempt, cj: ClusterJob | None) -> bool:
    """One open attempt against the cluster's report of it; True when changed."""
    if cj is None:
        return _reconcile_missing(ctx, attempt)
    if cj.ended:
        withdrawn = ended_withdrawn(attempt, cj)
        if withdrawn is not None:  # the start the cycle took back: it never ran
            end_attempt(ctx, attempt, AttemptEnd.START_FAILED, attempt.end_detail, cj=withdrawn)
        else:
            end_attempt(ctx, attempt, end_reason(attempt, cj), cj.detail, cj=cj)
        return True
    if cj.external_id and attempt.external_id != cj.external_id:
        attempt.external_id = cj.external_id
        attempt.save(update_fields=["external_id"])
    if cj.state == ClusterJobState.STARTING:
        # not running yet: past the start timeout the start is taken back (the
        # adapter's `withdraw` after this transaction; the attempt ends once the
        # cluster reports the job stopped or gone, or runs if it started first)
        if attempt.state == AttemptState.STARTING and start_overdue(
            ctx.at, attempt.created_at, attempt.end_detail
        ):
            withdraw_start(ctx, attempt, cj)
            return True
        return False
    if cj.state == ClusterJobState.STOPPING and cj.started_at is None:
        # stopping without a start: stopped while the cluster was still starting it,
        # so it never ran (it ends without a start; the cycle's time stands in for a
        # start only for a job the cluster runs)
        return False
    if attempt.state == AttemptState.STARTING:
        confirm_running(ctx, attempt, cj)
        return True
    if attempt.started_at is None:  # stopped before Allot saw it run
        attempt.started_at = ctx.clamp(cj.started_at, attempt.created_at)
        attempt.save(update_fields=["started_at"])
    return False


def _reconcile_missing(ctx: CycleContext, attempt: Attempt) -> bool:
    """An open attempt the cluster does not report; True when it ended."""
    if attempt.state == AttemptState.STARTING:
        if not _start_failed(ctx, attempt):
            return False
        detail = attempt.end_detail or "the cluster has no record of the start"
        end_attempt(ctx, attempt, AttemptEnd.START_FAILED, detail)
    elif attempt.state == AttemptState.STOPPING:
        if attempt.started_at is None and not _start_failed(ctx, attempt):
            return False  # stopped while its start may still reach the cluster
        detail = (
            "gone from the cluster"
            if attempt.started_at
            else "stopped before the cluster started it"
        )
        end_attempt(ctx, attempt, attempt.stop_intent or AttemptEnd.LOST, detail)
    else:
        end_attempt(ctx, attempt, AttemptEnd.LOST, "the cluster no longer reports it")
    return True


def _start_failed(ctx: CycleContext, attempt: Attempt) -> bool:
    """Whether a start the cluster does not list has failed: refused, taken back (the
    cluster listed it waiting before), or not listed for `start_confirm_s`."""
    if attempt.end_detail.startswith(START_REFUSED) or withdrawing(attempt.end_detail):
        return True
    return (ctx.at - attempt.created_at).total_seconds() >= start_confirm_s()


def _outside_jobs(
    ctx: CycleContext, reported: Sequence[ClusterJob], open_ids: set[str]
) -> tuple[list, list[tuple[str, float]]]:
    """Jobs the cluster runs that Allot has no open attempt for: jobs outside Allot
    (left alone, noted) and attempts Allot already ended (stopped again). Both hold
    their GPUs for the engine."""
    alive = [cj for cj in reported if not cj.ended and cj.attempt_id not in open_ids]
    if not alive:
        return [], []
    ours = set(
        Attempt.objects.filter(
            attempt_id__in=[cj.attempt_id for cj in alive if cj.attempt_id]
        ).values_list("attempt_id", flat=True)
    )
    now = ctx.at.timestamp()
    holders, zombies = [], []
    for n, cj in enumerate(alive):
        pls = tuple(Placement(p.host, tuple(p.gpu_indices)) for p in cj.placements)
        gpus = sum(len(p.gpu_indices) for p in pls)
        name = cj.attempt_id or cj.external_id or f"#{n}"
        where = ", ".join(p.host for p in pls) or "no hosts yet"
        if cj.attempt_id in ours:
            zombies.append((cj.attempt_id, 0.0))
            ctx.error("attempt ended in Allot still runs on the cluster", Exception(name))
        else:
            ctx.counts.notes.append(f"job outside Allot: {name} on {where} (left alone)")
        if pls:
            holders.append(foreign_holder(f"~{name}", gpus, pls, now=now))
    return holders, zombies
