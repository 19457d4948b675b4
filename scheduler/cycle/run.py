"""One cycle of a cluster, its steps in order, and its record (`CycleRecord`, the
metrics and one log line with the time of each phase)."""

from __future__ import annotations

import gc
import logging
import time

from config.logs import cycle_scope
from ops.metrics import observe_cycle
from scheduler.core.engine.reserve_effect import ReserveEffect, reserve_effect
from scheduler.cycle.adapter_io import close_adapter, read_cluster
from scheduler.cycle.apply import apply
from scheduler.cycle.context import CycleContext
from scheduler.cycle.governed import adopt_governed, governs, sync_governed
from scheduler.cycle.reconcile import reconcile
from scheduler.cycle.warm import warm_plan
from scheduler.models import CycleRecord
from scheduler.selectors.snapshot import cluster_snapshot
from scheduler.selectors.utilization import idle_attempt_ids

log = logging.getLogger(__name__)


def cycle_steps_run(ctx: CycleContext) -> CycleRecord:
    """Run the cycle's steps and record it; an error is recorded and raised again."""
    # A cycle allocates tens of thousands of short-lived objects; the cyclic collector
    # would only add pauses over the worker's large warm state (the engine leaves the
    # collector alone; its caller decides: bench/live_cycle 148 ms CPU with it off,
    # 163-201 ms with it on).
    gc_was_on = gc.isenabled()
    gc.disable()
    try:
        with cycle_scope(ctx):  # log lines of the cycle carry its id (config.logs)
            return _run(ctx)
    finally:
        if gc_was_on:
            gc.enable()


def _run(ctx: CycleContext) -> CycleRecord:
    t0 = time.perf_counter()
    ctx.record = CycleRecord.objects.create(cluster=ctx.cluster, started_at=ctx.at)
    try:
        with ctx.phase("read"):
            report = read_cluster(ctx)
        if report is not None:
            with ctx.phase("reconcile"):
                holders = reconcile(ctx, report)
        if report is not None and not ctx.reconcile_only:
            if governs(ctx):
                with ctx.phase("adopt"):
                    adopt_governed(ctx)
            with ctx.phase("snapshot"):
                cs = cluster_snapshot(
                    cluster=ctx.cluster,
                    now=ctx.at,
                    holders=holders,
                    cache=ctx.warm.snapshot_cache,
                    idle=_idle_attempts(ctx),
                    refusals=True,
                )
            with ctx.phase("plan"):
                cycle_plan = warm_plan(cs, ctx.warm)
            effect = reserve_effect(cs.snapshot, cs.policy, cycle_plan)
            _record_reserve(ctx.record, cycle_plan.short_reserve, effect)
            apply(ctx, cs, cycle_plan)
            if governs(ctx):
                with ctx.phase("governed_sync"):
                    sync_governed(ctx)
    except Exception as exc:
        ctx.counts.errors.append(f"cycle failed: {type(exc).__name__}: {exc}"[:1000])
        _finish(ctx, t0)
        raise
    finally:
        close_adapter(ctx)
    _finish(ctx, t0)
    return ctx.record


def _idle_attempts(ctx: CycleContext) -> frozenset[int]:
    """The running attempts the engine sees idle: measured below the cluster's threshold
    for its idle window, when idle-GPU reclaim is on (docs/concepts.md#idle-reclaim)."""
    cluster = ctx.cluster
    if not cluster.idle_reclaim:
        return frozenset()
    return idle_attempt_ids(
        cluster, ctx.at, float(cluster.idle_threshold_pct), int(cluster.idle_reclaim_after_s)
    )


def _record_reserve(record: CycleRecord, hosts: tuple[str, ...], effect: ReserveEffect) -> None:
    record.short_reserve_hosts = list(hosts)
    record.short_reserve_gpus = effect.held_gpus
    record.short_reserve_unused_gpus = effect.unused_gpus
    record.short_reserve_starts = effect.short_starts


def _finish(ctx: CycleContext, t0: float) -> None:
    record, counts = ctx.record, ctx.counts
    record.duration_ms = (time.perf_counter() - t0) * 1000.0
    record.reconciled = counts.reconciled
    record.starts = counts.starts
    record.stops = counts.stops
    record.errors = counts.errors + counts.notes
    record.save()
    observe_cycle(
        cluster=ctx.cluster.name,
        duration_s=record.duration_ms / 1000.0,
        actions=counts.actions,
    )
    # not stored: for the worker's log and the benchmarks
    record.phases_ms = {k: round(v, 1) for k, v in ctx.phases.items()}
    log.info(
        "cycle %s of %s: %d starts, %d stops, %d errors in %.0f ms %s",
        record.pk,
        ctx.cluster,
        record.starts,
        record.stops,
        len(counts.errors),
        record.duration_ms,
        record.phases_ms,
    )
