"""Governed sbatch in the cycle (`scheduler.services.slurm_adoption`): after the
reconcile, the held, tagged sbatch jobs are adopted (so this cycle plans them); after
the apply, Slurm's comments and cancellations are brought in step. Only adapters that
read governed partitions (`governed_jobs`) take part; errors are recorded, never raised."""

from __future__ import annotations

from scheduler.cycle.context import CycleContext
from scheduler.services.slurm_adoption import governed_adopt, governed_sync


def governs(ctx: CycleContext) -> bool:
    """Whether the cluster's adapter reads governed partitions (Slurm's)."""
    return hasattr(ctx.adapter, "governed_jobs")


def adopt_governed(ctx: CycleContext) -> None:
    try:
        counts = governed_adopt(cluster=ctx.cluster, adapter=ctx.adapter, now=ctx.at)
    except Exception as exc:
        ctx.error("governed sbatch: adoption", exc)
        return
    ctx.counts.notes.extend(counts.notes)


def sync_governed(ctx: CycleContext) -> None:
    try:
        governed_sync(cluster=ctx.cluster, adapter=ctx.adapter, now=ctx.at)
    except Exception as exc:
        ctx.error("governed sbatch: sync", exc)
