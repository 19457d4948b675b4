"""What the cycle asks of the cluster's adapter: read it, push drains, send stops and
starts. Adapter errors are recorded in the cycle, never raised: the next reconcile
checks or repeats every call."""

from __future__ import annotations

import logging
from collections.abc import Sequence

from scheduler import adapters
from scheduler.adapters import ClusterJob, ClusterJobState, HostHealthState, StartRequest
from scheduler.cycle.context import ClusterReport, CycleContext

log = logging.getLogger(__name__)

STOP_RESEND_S = 30.0
# `Attempt.end_detail` of a start the adapter refused (it will not come) or failed on
# (it may still come); the reconcile tells them apart by these prefixes.
START_REFUSED = "start refused: "
START_ERROR = "start error: "


def read_cluster(ctx: CycleContext) -> ClusterReport | None:
    """Hosts and jobs as the cluster reports them; None (error recorded) when it
    cannot be read: the cycle then changes nothing."""
    try:
        if ctx.adapter is None:
            ctx.adapter = adapters.for_cluster(ctx.cluster)
        # jobs first: a node that fails between the two reads then shows down in
        # the host read as well, so a job it lost is never restarted on it
        jobs = list(ctx.adapter.jobs())
        report = ClusterReport(hosts=list(ctx.adapter.hosts()), jobs=jobs)
    except Exception as exc:
        ctx.error("cluster unreachable", exc)
        return None
    ctx.cluster_read()
    return report


def close_adapter(ctx: CycleContext) -> None:
    """Close the adapter the cycle opened itself (one passed in stays open)."""
    if ctx.own_adapter and ctx.adapter is not None:
        try:
            ctx.adapter.close()
        except Exception:
            log.warning("closing the adapter of %s failed", ctx.cluster, exc_info=True)


def push_host_health(ctx: CycleContext, pushes: Sequence[tuple[str, HostHealthState, str]]) -> None:
    """Drains and resumes made in Allot, pushed to the cluster."""
    for name, health, reason in pushes:
        try:
            ctx.adapter.set_host_health(name, health, reason)
        except Exception as exc:
            ctx.error(f"set_host_health({name}, {health})", exc)


def send_stop(ctx: CycleContext, attempt_id: str, grace_s: float) -> None:
    try:
        ctx.adapter.stop(attempt_id, grace_s)
    except Exception as exc:
        ctx.error(f"stop {attempt_id}", exc)
    else:
        ctx.warm.stops_sent[attempt_id] = (ctx.at, grace_s <= 0)


def resend_stops(
    ctx: CycleContext,
    stopping: Sequence[tuple[str, float]],
    zombies: Sequence[tuple[str, float]],
) -> None:
    """Stops of STOPPING attempts (attempt id, grace seconds left), sent again when this
    worker has not sent them yet, once their grace is over, and every STOP_RESEND_S;
    stops of runs Allot ended that the cluster still runs, every cycle."""
    sent = ctx.warm.stops_sent
    for attempt_id in set(sent) - {a for a, _ in stopping}:
        del sent[attempt_id]
    for attempt_id, grace_s in stopping:
        last = sent.get(attempt_id)
        if (
            last is None
            or (grace_s <= 0 and not last[1])
            or (ctx.at - last[0]).total_seconds() >= STOP_RESEND_S
        ):
            send_stop(ctx, attempt_id, grace_s)
    for attempt_id, grace_s in zombies:
        send_stop(ctx, attempt_id, grace_s)


def send_start(ctx: CycleContext, request: StartRequest) -> tuple[ClusterJob | None, str]:
    """adapter.start: the cluster's job, or None and the error to record on the attempt
    (refused: it will not start; an error: it may still)."""
    try:
        return ctx.adapter.start(request), ""
    except adapters.AdapterError as exc:
        ctx.error(f"start {request.attempt_id}", exc)
        return None, (START_ERROR if exc.retryable else START_REFUSED) + str(exc)
    except Exception as exc:
        ctx.error(f"start {request.attempt_id}", exc)
        return None, START_ERROR + str(exc)


def send_withdraw(ctx: CycleContext, attempt_id: str) -> None:
    """Take back a start the cluster has not run (`withdraw`: it never runs, or it runs
    already and is kept; the next reconcile sees which). An adapter without `withdraw`
    gets a stop with no grace (the simulated cluster never runs a job stopped while
    starting)."""
    withdraw = getattr(ctx.adapter, "withdraw", None)
    try:
        if withdraw is not None:
            withdraw(attempt_id)
        else:
            ctx.adapter.stop(attempt_id, 0.0)
    except Exception as exc:
        ctx.error(f"withdraw {attempt_id}", exc)


def runs(cj: ClusterJob) -> bool:
    """Whether the cluster reports the job running (or being stopped after running)."""
    return cj.state in (ClusterJobState.RUNNING, ClusterJobState.STOPPING)
