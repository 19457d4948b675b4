"""GPUs of starts the cluster has not placed yet, kept apart from those it reports busy.

An attempt records the GPUs the engine chose until the cluster reports the GPUs it
really gave (`confirm_running`). A cluster may give others: Slurm takes a host's lowest
free GPU indices, whatever Allot planned, and starts the jobs Allot released on a host
in its own order. Once one of them runs on GPUs another start there was planned on,
the two attempts share GPUs in Allot's books and the GPUs the running one left look
free: the engine would start a job on a host that is full (it then waits in Slurm,
STARTING in Allot, with more GPUs counted in use than the cluster has). So each
reconcile moves a planned start's GPUs that collide with GPUs the cluster reports busy
(or with another planned start's) to GPUs of the same host nobody holds: the count per
host, which is all the cluster was asked for, stays; only the indices change.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

Placements = list[dict]  # Attempt.placements: [{"host": str, "gpu_indices": [int, ...]}]


def reported_busy(placements: Iterable[tuple[str, Sequence[int]]]) -> dict[str, set[int]]:
    """{host: GPU indices} of the placements (host, indices) the cluster reports."""
    busy: dict[str, set[int]] = {}
    for host, indices in placements:
        busy.setdefault(host, set()).update(indices)
    return busy


def moved_placements(
    planned: Sequence[tuple[int, Placements]],
    busy: Mapping[str, set[int]],
    host_gpus: Mapping[str, int],
) -> dict[int, Placements]:
    """{attempt pk: new placements} of the planned attempts [(pk, placements)] (in the
    order given, which decides who keeps contested GPUs) whose GPUs collide with `busy`
    or with an earlier planned attempt's; each colliding host part keeps its GPUs that
    are still free and takes the lowest free others. A part that does not fit is left
    as it is (the cluster reports more busy than the host has: nothing to move to)."""
    taken = {host: set(indices) for host, indices in busy.items()}
    clashing: list[tuple[int, Placements]] = []
    for pk, placements in planned:  # first who keeps: every part clear of `taken`
        if any(_clashes(p, taken) for p in placements):
            clashing.append((pk, placements))
        else:
            _take(placements, taken)
    moved: dict[int, Placements] = {}
    for pk, placements in clashing:
        new = [_moved(p, taken, host_gpus.get(p["host"], 0)) for p in placements]
        _take(new, taken)
        if new != placements:
            moved[pk] = new
    return moved


def _clashes(part: dict, taken: Mapping[str, set[int]]) -> bool:
    held = taken.get(part["host"])
    return bool(held) and any(i in held for i in part["gpu_indices"])


def _take(placements: Placements, taken: dict[str, set[int]]) -> None:
    for part in placements:
        taken.setdefault(part["host"], set()).update(part["gpu_indices"])


def _moved(part: dict, taken: Mapping[str, set[int]], gpus: int) -> dict:
    """One host part on GPUs nobody holds: its own free ones first, then the lowest."""
    held = taken.get(part["host"], set())
    wanted = len(part["gpu_indices"])
    keep = [i for i in part["gpu_indices"] if i not in held]
    free = [i for i in range(gpus) if i not in held and i not in keep]
    if len(keep) + len(free) < wanted:
        return part
    return {**part, "gpu_indices": sorted(keep + free[: wanted - len(keep)])}
