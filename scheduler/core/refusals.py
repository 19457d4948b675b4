"""Hosts a job is kept off after the cluster refused to start it there.

A start the cluster keeps waiting past the start timeout (Slurm leaves it PENDING:
the node is reserved or not available in Slurm, its CPUs or memory are taken outside
Allot's GPUs, the job's constraints do not match it) is taken back
(`scheduler.cycle.attempts.withdraw_start`). Planned on the same host again, it would
wait and be taken back again, every start timeout, for as long as the cause lasts. So
each refusal keeps the job off the hosts it was refused on for a window that doubles
with each refusal of the job there (`avoid_window_s`: 15 min, 30 min, 1 h, ... up to
4 h by default): bounded, so that a cause that has gone costs at most one window, and
growing, so that a lasting one costs one start timeout per window. The engine reads
the result as `Snapshot.avoid`.

Pure: no Django, no clock (times are epoch seconds passed in)."""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

AVOID_BASE_S = 15 * 60.0
AVOID_MAX_S = 4 * 3600.0
# refusals older than this many longest windows are forgotten (a job refused there
# once a week ago starts over at the shortest window)
MEMORY_WINDOWS = 6

# Slurm's pending reasons (squeue %r) -> what they say about the refused node
_CAUSES = (
    ("ReqNodeNotAvail", "the node is not available to it in Slurm (drained, down or reserved)"),
    ("NodeDown", "the node is down in Slurm"),
    ("Reservation", "the node is reserved in Slurm"),
    ("Reserved", "the node is reserved in Slurm"),
    ("BadConstraints", "its constraints (features) do not match the node"),
    ("PartitionNodeLimit", "the node is outside its partition's limits"),
    ("PartitionConfig", "the node is outside its partition"),
    ("Resources", "Slurm finds the node's CPUs or memory taken (outside Allot's GPUs)"),
    ("Priority", "Slurm ranks other jobs first on the node"),
)
_UNAVAILABLE_RE = re.compile(r"UnavailableNodes:(\S+?)[),]*(?:\s|$)")
_RANGE_RE = re.compile(r"^(?P<prefix>[^\[]*)\[(?P<ranges>[^\]]+)\](?P<suffix>.*)$")


@dataclass(frozen=True, slots=True)
class Refusal:
    """A start of job `job` the cluster kept waiting on `hosts` and that was taken
    back at `at` (epoch seconds); `why` is the cluster's word for it."""

    job: str
    hosts: tuple[str, ...]
    at: float
    why: str = ""


@dataclass(frozen=True, slots=True)
class Avoidance:
    """Job `job` is kept off `host` until `until` (epoch seconds), after `refusals`
    refusals there, the last one for `why`."""

    job: str
    host: str
    until: float
    refusals: int
    why: str


def avoid_window_s(
    refusals: int, base_s: float = AVOID_BASE_S, max_s: float = AVOID_MAX_S
) -> float:
    """How long a job is kept off a host after its `refusals`-th refusal there."""
    if refusals <= 0:
        return 0.0
    return min(max_s, base_s * 2.0 ** min(refusals - 1, 30))


def memory_s(max_s: float = AVOID_MAX_S) -> float:
    """How far back refusals count (older ones are forgotten)."""
    return MEMORY_WINDOWS * max_s


def refused_hosts(hosts: Sequence[str], why: str) -> tuple[str, ...]:
    """The hosts of a refused start that the cluster named unavailable in `why`
    (Slurm's "ReqNodeNotAvail, UnavailableNodes:gpu[03-04]"), or all of them when it
    names none of them (a one-host start: its host)."""
    match = _UNAVAILABLE_RE.search(why or "")
    if match is None:
        return tuple(hosts)
    named = set(expand_nodes(match.group(1)))
    chosen = tuple(h for h in hosts if h in named)
    return chosen or tuple(hosts)


def expand_nodes(text: str) -> list[str]:
    """Slurm's node list "gpu[01-03,07],cpu1" -> its names (one level of brackets)."""
    names: list[str] = []
    for item in re.split(r",(?![^\[]*\])", text):
        match = _RANGE_RE.match(item)
        if match is None:
            if item:
                names.append(item)
            continue
        for part in match.group("ranges").split(","):
            low, _, high = part.partition("-")
            if not (low.isdigit() and (not high or high.isdigit())):
                continue
            width = len(low)
            for n in range(int(low), int(high or low) + 1):
                names.append(f"{match.group('prefix')}{n:0{width}d}{match.group('suffix')}")
    return names


def avoidances(
    refusals: Iterable[Refusal],
    now: float,
    *,
    base_s: float = AVOID_BASE_S,
    max_s: float = AVOID_MAX_S,
) -> list[Avoidance]:
    """The (job, host) pairs kept apart at `now`: per pair, the refusals within
    `memory_s` count; the pair is avoided for `avoid_window_s(count)` after the last.
    Ordered by job, then host."""
    since = now - memory_s(max_s)
    last: dict[tuple[str, str], tuple[float, int, str]] = {}
    for r in refusals:
        if r.at < since:
            continue
        for host in refused_hosts(r.hosts, r.why):
            at, count, why = last.get((r.job, host), (r.at, 0, r.why))
            if r.at >= at:
                at, why = r.at, r.why
            last[r.job, host] = (at, count + 1, why)
    out = []
    for (job, host), (at, count, why) in sorted(last.items()):
        until = at + avoid_window_s(count, base_s, max_s)
        if until > now:
            out.append(Avoidance(job, host, until, count, why))
    return out


def avoid_map(kept: Iterable[Avoidance]) -> dict[str, frozenset[str]]:
    """{job: hosts} of the avoidances, as `Snapshot.avoid` takes it."""
    hosts: dict[str, set[str]] = {}
    for a in kept:
        hosts.setdefault(a.job, set()).add(a.host)
    return {job: frozenset(names) for job, names in hosts.items()}


def avoid_ends(kept: Iterable[Avoidance]) -> dict[str, dict[str, float]]:
    """{job: {host: until}} of the avoidances: when each lapses (the ETA's forward run
    keeps the job off the host until then, `scheduler.core.sim.eta.forward_starts`)."""
    ends: dict[str, dict[str, float]] = {}
    for a in kept:
        hosts = ends.setdefault(a.job, {})
        hosts[a.host] = max(a.until, hosts.get(a.host, a.until))
    return ends


def cause(why: str) -> str:
    """What the cluster's reason for keeping a start waiting says, in words."""
    for code, text in _CAUSES:
        if code in (why or ""):
            return text
    return "the cluster kept it waiting there"


def avoid_texts(kept: Iterable[Avoidance]) -> dict[str, str]:
    """{job: the sentence its queue reason gets}, e.g. "not placed on gpu03 before
    23:45 UTC: Slurm refused it there (1 time): the node is reserved in Slurm
    (Slurm job 12 PENDING (ReqNodeNotAvail))"."""
    per_job: dict[str, list[Avoidance]] = {}
    for a in kept:
        per_job.setdefault(a.job, []).append(a)
    return {job: _text(items) for job, items in per_job.items()}


def _text(items: Sequence[Avoidance]) -> str:
    hosts = ", ".join(a.host for a in items)
    until = max(a.until for a in items)
    last = max(items, key=lambda a: a.until)
    times = max(a.refusals for a in items)
    when = dt.datetime.fromtimestamp(until, dt.UTC).strftime("%H:%M UTC")
    why = f" ({last.why})" if last.why else ""
    plural = "s" if times > 1 else ""
    return (
        f"not placed on {hosts} before {when}: the cluster refused to start it there "
        f"({times} time{plural}): {cause(last.why)}{why}"
    )
