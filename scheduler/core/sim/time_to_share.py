"""``time_to_share``: how long a project below its share waits to get it (pure Python).

For each project ``p`` with entitled share ``s > 0``, over time:

- ``demand(t)``: GPUs of p's allocated jobs present at ``t`` (pending or running, from
  submit to their end: the ``DemandSpan``s of the entitlement figures);
- ``running(t)``: GPUs of p's allocated runs at ``t``;
- ``entitled(t) = s x healthy GPUs at t``.

An *episode* opens at an instant ``t`` when an allocated job of p arrives (its demand
rises) while p runs below its entitled share, unless an episode is already open. It
closes at the first instant, ``t`` included, when ``running >= min(demand, entitled)``:
p runs everything it asked for, or at least its entitled share. Its length is the time
to share. At one instant, runs and jobs that end are taken out first, then "below its
share" is checked, then starts and arrivals are added and the close is checked: a job
that arrives as another of p's ends sees p without it, and a job the scheduler starts
on arrival closes its episode with 0 s.

Jobs come in whole GPUs and the share rarely is, so "at least its entitled share" means
the next whole job that reaches it: a project entitled to 35.2 GPUs of 8-GPU jobs is
at its share with 40 running, not 32. Episodes still open when the run ends are
counted apart (``open_at_end``) and kept out of the percentiles.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from ledger.accounting import DemandSpan, RunInterval

__all__ = ["ShareEpisode", "share_episodes"]

_TOLERANCE = 1e-9


@dataclass(frozen=True, slots=True)
class ShareEpisode:
    """One rise of a project's demand below its share; ``end_s`` None while still open."""

    project: str
    start_s: float
    end_s: float | None

    @property
    def length_s(self) -> float | None:
        return None if self.end_s is None else self.end_s - self.start_s


def share_episodes(
    shares: Mapping[str, float],
    capacity: Sequence[tuple[float, float]],
    demand: Iterable[DemandSpan],
    intervals: Iterable[RunInterval],
    end_s: float = math.inf,
) -> list[ShareEpisode]:
    """Every episode of every project with a share, in project then time order.

    Changes at or after ``end_s`` (the end of the run, where what still runs or waits is
    closed) are left out, so an episode still open then stays open.
    """
    # per project: (t, demand change, running change, an arrival)
    changes: dict[str, list[tuple[float, int, int, bool]]] = defaultdict(list)
    for d in demand:
        if shares.get(d.project, 0.0) > 0 and end_s > d.start_s < d.end_s:
            changes[d.project].append((d.start_s, d.gpus, 0, True))
            if d.end_s < end_s:
                changes[d.project].append((d.end_s, -d.gpus, 0, False))
    for iv in intervals:
        if iv.allocated and shares.get(iv.project, 0.0) > 0 and end_s > iv.start_s < iv.end_s:
            changes[iv.project].append((iv.start_s, 0, iv.gpus, False))
            if iv.end_s < end_s:
                changes[iv.project].append((iv.end_s, 0, -iv.gpus, False))
    out: list[ShareEpisode] = []
    for project in shares:
        if project in changes:
            # the share itself changes with capacity: check at those instants too
            changes[project].extend((t, 0, 0, False) for t, _ in capacity if t < end_s)
            out.extend(_project_episodes(project, shares[project], capacity, changes[project]))
    return out


def _project_episodes(
    project: str,
    share: float,
    capacity: Sequence[tuple[float, float]],
    changes: list[tuple[float, int, int, bool]],
) -> list[ShareEpisode]:
    # at one instant: what ends first, then the check, then what starts or arrives
    changes.sort(key=lambda c: (c[0], c[1] + c[2] > 0))
    episodes: list[ShareEpisode] = []
    demand = running = 0
    cap = 0.0
    cap_i = 0
    opened: float | None = None
    i, n = 0, len(changes)
    while i < n:
        t = changes[i][0]
        while cap_i < len(capacity) and capacity[cap_i][0] <= t:
            cap = float(capacity[cap_i][1])
            cap_i += 1
        while i < n and changes[i][0] == t and changes[i][1] + changes[i][2] < 0:
            demand += changes[i][1]
            running += changes[i][2]
            i += 1
        running_before = running
        rise = False
        while i < n and changes[i][0] == t:
            _, d_demand, d_running, arrival = changes[i]
            demand += d_demand
            running += d_running
            rise = rise or arrival
            i += 1
        if opened is None and rise and running_before < share * cap - _TOLERANCE:
            opened = t
        if opened is not None and running >= min(demand, share * cap) - _TOLERANCE:
            episodes.append(ShareEpisode(project, opened, t))
            opened = None
    if opened is not None:
        episodes.append(ShareEpisode(project, opened, None))
    return episodes
