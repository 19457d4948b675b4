"""The share floor: the running work of a project that has not had its share, up to
that share, is not taken by the fair-share preemption of a project served clearly
better than it.

Fair Tree ranks a project with its siblings' usage: a project whose siblings borrowed
idle GPUs ranks below the projects of other branches even while it has itself used
far less than its entitled share, and a job of it larger than its share (a gang) is
then preempted by any of them once its minimum runtime ends, waits, restarts, and is
preempted again. The floor keeps, for each project whose
[usage relative to its entitled share](docs/concepts.md#usage-relative-to-entitled-share)
is below 100%, its oldest running allocated jobs until their GPUs reach its entitled
share of the healthy GPUs now (the job that crosses the share included, so a gang
larger than the share runs too) against every project served better by more than
`MARGIN_PCT` points of usage relative to entitled share, once charged for the new job
(`FloorRule`). Between projects served about equally (within the margin) it does
nothing: Fair Tree's rank decides, as without the floor, so that where every project
is under its share (a young cluster, a window longer than the history) or two
under-served projects compete, the floor does not hold one's small jobs against the
other's gang. It adapts to what it observes and lasts a bounded time: once the
project's window usage reaches its share, or the job ends, the floor is gone.
Protection, its own project's higher-priority work, idle reclaim and drain are
unchanged. Pure: no clock, no I/O.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Protocol

from scheduler.core.engine.cluster import RunInfo

__all__ = ["MARGIN_PCT", "FloorRule", "floor_jobs"]

# How much better served (points of usage relative to entitled share, the preemptor
# charged for its new job) a project must be to be kept off another project's floor
# jobs. Within it the two count as equally served and Fair Tree's rank decides.
MARGIN_PCT = 5.0


class _Standing(Protocol):
    def usage_relative_to_entitled_share(self, proj: str, extra: float = 0.0) -> float: ...


class FloorRule:
    """Who may still take a floor job, for one preemptor: a project whose usage
    relative to its entitled share, once charged for the new job (`mine`, percent), is
    below that of the floor job's project plus `MARGIN_PCT` (served about equally or
    worse). The fair-share rule still decides whether it may preempt at all (it never
    lets two projects take each other's work back and forth). Verdicts memoised per
    project."""

    __slots__ = ("mine", "standing", "verdicts")

    def __init__(self, standing: _Standing, mine: float) -> None:
        self.standing = standing
        self.mine = mine
        self.verdicts: dict[str, bool] = {}

    def __call__(self, other: str) -> bool:
        ok = self.verdicts.get(other)
        if ok is None:
            ok = self.verdicts[other] = (
                self.mine < self.standing.usage_relative_to_entitled_share(other) + MARGIN_PCT
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
