"""The short-job reserve's reading of a cycle (`Reservations.hold_for_short_jobs`): the
waiting short jobs and how many hosts their work needs. Pure functions."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from operator import attrgetter

from scheduler.core.engine.types import Workload

__all__ = ["hosts_with_room", "pending_short"]

_GPUS = attrgetter("gpus")


def hosts_with_room(
    short_gpus: int, size: int, long_gpus: Mapping[int, int], by_long: Sequence[int]
) -> int:
    """How many of `by_long`'s first hosts it takes for their GPUs not under long
    protected work (the room short jobs have there within the short limit) to hold
    `short_gpus`; hosts without such room add none and end the count."""
    room = hosts = 0
    for h in by_long:
        if room >= short_gpus or long_gpus[h] >= size:
            break
        room += size - long_gpus[h]
        hosts += 1
    return hosts


def pending_short(
    short_limit: float, size: int, pending: Mapping[str, Sequence[Workload]]
) -> tuple[int, int, dict[str, list[Workload]]]:
    """(GPUs of the widest pending job, GPUs of the pending short jobs, those with a min
    runtime in (0, `short_limit`], that fit one host of `size` GPUs: only those can start
    on a held host; those jobs per project). Every pending job is read once per cycle:
    no call per job."""
    widest = short = 0
    found: dict[str, list[Workload]] = {}
    for proj, jobs in pending.items():
        if jobs:
            widest = max(widest, max(map(_GPUS, jobs)))
            mine = [w for w in jobs if 0.0 < w.min_runtime_s <= short_limit and w.gpus <= size]
            if mine:
                found[proj] = mine
                short += sum(map(_GPUS, mine))
    return widest, short, found
