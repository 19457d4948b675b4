"""The share floor: the running work of a project that has not had its share, up to
that share, is not taken by another project's fair-share preemption.

Fair Tree ranks a project with its siblings' usage: a project whose siblings borrowed
idle GPUs ranks below the projects of other branches even while it has itself used
far less than its entitled share, and a job of it larger than its share (a gang) is
then preempted by any of them once its minimum runtime ends, waits, restarts, and is
preempted again. The floor keeps, for each project whose
[usage relative to its entitled share](docs/concepts.md#usage-relative-to-entitled-share)
is below 100%, its oldest running allocated jobs until their GPUs reach its entitled
share of the healthy GPUs now (the job that crosses the share included, so a gang
larger than the share runs too) against every project that is itself served
better, relative to its share (`FloorRule`): a project further below its own share may
still take it, as the fair-share rule allows. It adapts to what it observes and lasts a bounded
time: once the project's window usage reaches its share, or the job ends, the floor
is gone. Protection, its own project's higher-priority work, idle reclaim and drain
are unchanged. Pure: no clock, no I/O.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Protocol

from scheduler.core.engine.cluster import RunInfo

__all__ = ["FloorRule", "floor_jobs"]


class _Standing(Protocol):
    def usage_relative_to_entitled_share(self, proj: str, extra: float = 0.0) -> float: ...


class FloorRule:
    """Who may still take a floor job, for one preemptor: a project whose usage
    relative to its entitled share, once charged for the new job (`mine`, percent),
    stays below that of the floor job's project (so the two could not take each
    other's floor jobs back and forth). Verdicts memoised per project."""

    __slots__ = ("mine", "standing", "verdicts")

    def __init__(self, standing: _Standing, mine: float) -> None:
        self.standing = standing
        self.mine = mine
        self.verdicts: dict[str, bool] = {}

    def __call__(self, other: str) -> bool:
        ok = self.verdicts.get(other)
        if ok is None:
            ok = self.verdicts[other] = self.mine < self.standing.usage_relative_to_entitled_share(
                other
            )
        return ok


def floor_jobs(
    runs: Iterable[RunInfo],
    entitled: Mapping[str, float],
    standing: _Standing,
    healthy_gpus: int,
) -> frozenset[str]:
    """The ids of the running jobs on the share floor: per project with an entitled
    share whose usage relative to it (`standing`) is below 100%, its allocated jobs on healthy hosts,
    oldest start first (then id), while the GPUs of those before are below its entitled
    share of `healthy_gpus`."""
    by_project: dict[str, list[tuple[float, str, int]]] = {}
    for rw, _, on_healthy, _, info in runs:
        if info is None or not on_healthy:
            continue
        w = rw.workload
        lst = by_project.get(w.project)
        if lst is None:
            lst = by_project[w.project] = []
        lst.append((rw.started_s, w.id, w.gpus))
    out: list[str] = []
    for proj, lst in by_project.items():
        share = entitled.get(proj, 0.0) * healthy_gpus
        if share <= 0.0 or standing.usage_relative_to_entitled_share(proj) >= 100.0:
            continue
        lst.sort()
        below = 0
        for _, job_id, gpus in lst:
            if below >= share:
                break
            out.append(job_id)
            below += gpus
    return frozenset(out)
