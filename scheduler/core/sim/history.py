"""A simulator run as the history a live cluster would have recorded (pure Python).

The demo back-fills its ledger by replaying its load through the simulator (the same
engine as live) and storing the result as jobs, attempts and events. The simulator
counts GPUs per host, not GPU indices; `runs_with_gpu_indices` gives each run the
indices it held (lowest free first), which a live attempt records from its cluster.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from ledger.accounting import EndReason, RunInterval

__all__ = ["GpuIndexError", "RunRecord", "runs_with_gpu_indices"]


class GpuIndexError(ValueError):
    """Runs that overlap on a host hold more GPUs than it has."""


@dataclass(frozen=True, slots=True)
class RunRecord:
    """One run of a job with the GPU indices it held on each of its hosts."""

    job_id: str
    start_s: float
    end_s: float
    end_reason: EndReason
    allocated: bool
    gpus: int
    placements: tuple[tuple[str, tuple[int, ...]], ...]


def runs_with_gpu_indices(
    intervals: Iterable[RunInterval], host_gpus: Mapping[str, int]
) -> list[RunRecord]:
    """Every run of `intervals` with GPU indices, in start order.

    A run on several hosts holds `gpus / len(hosts)` GPUs on each. Runs are taken in
    time order with ends before starts at the same instant (a GPU freed at t may be
    taken at t); each start gets the lowest free indices of each of its hosts.
    Runs of no length are left out. Raises GpuIndexError when a host would be over-committed."""
    runs = sorted(
        (r for r in intervals if r.end_s > r.start_s), key=lambda r: (r.start_s, r.job_id)
    )
    free: dict[str, set[int]] = {host: set(range(n)) for host, n in host_gpus.items()}
    # (time, 0 = end / 1 = start, order, run index)
    timeline = [(r.end_s, 0, i) for i, r in enumerate(runs)] + [
        (r.start_s, 1, i) for i, r in enumerate(runs)
    ]
    timeline.sort()
    held: dict[int, tuple[tuple[str, tuple[int, ...]], ...]] = {}
    for _, kind, i in timeline:
        run = runs[i]
        if kind == 0:
            for host, indices in held.get(i, ()):
                free[host].update(indices)
            continue
        per_host = run.gpus // max(1, len(run.hosts))
        placements = []
        for host in run.hosts:
            available = sorted(free.get(host, ()))
            if len(available) < per_host:
                raise GpuIndexError(
                    f"{run.job_id} needs {per_host} GPUs of {host} at {run.start_s}, "
                    f"{len(available)} free"
                )
            taken = tuple(available[:per_host])
            free[host].difference_update(taken)
            placements.append((host, taken))
        held[i] = tuple(placements)
    return [
        RunRecord(
            job_id=r.job_id,
            start_s=r.start_s,
            end_s=r.end_s,
            end_reason=r.end_reason,
            allocated=r.allocated,
            gpus=r.gpus,
            placements=held[i],
        )
        for i, r in enumerate(runs)
    ]
