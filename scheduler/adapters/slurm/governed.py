"""Governed sbatch: jobs sbatch'd to a governed partition, as Allot reads them.

`deploy/slurm/job_submit.lua` holds every job submitted to a governed partition
(priority 0) and tags it in its admin comment (`allot-governed`, `,requeue` after an
explicit `--requeue`). Allot's cycle reads them from `squeue --json`, adopts them as
Allot jobs and writes its answer in the job's comment:

- `allot-job:<id> ...`: adopted, waiting in Allot's queue (position, reason, ETA);
- `allot-attempt:<attempt id>...`: Allot started it (the usual attempt comment);
- `allot-refused: <reason>`: not adoptable, cancelled by Allot.

A Slurm job is named by its id ("123"), an array task by `<array job id>_<task>`
("122_3"), the form `scontrol` and `scancel` accept before and after Slurm splits the
task off the array's record. Plain Python, no Django.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from scheduler.adapters.slurm.parsing import (
    REQUEUE_HELD,
    is_governed_record,
    parse_index_list,
)

REQUEUE_TAG = ",requeue"
WAITING_PREFIX = "allot-job:"
REFUSED_PREFIX = "allot-refused:"
ALLOT_PREFIX = "allot-"
GPU_TRES_RE = re.compile(r"gres[:/]gpu(?::[^:,]+)?:(\d+)")


@dataclass(frozen=True, slots=True)
class GovernedJob:
    """One held, tagged Slurm record not yet answered by Allot: a job, or an array's
    pending tasks (`slurm_ids` in task order)."""

    slurm_ids: tuple[str, ...]
    user: str
    account: str
    name: str
    gpus: int
    time_min_s: int | None  # --time-min (None: not given)
    resumable: bool  # an explicit --requeue
    submitted_at: dt.datetime | None
    partition: str

    @property
    def is_array(self) -> bool:
        return "_" in self.slurm_ids[0]


@dataclass(frozen=True, slots=True)
class SlurmRecord:
    """What Allot needs to know of one governed Slurm id's record."""

    state: str
    held: bool
    comment: str


def is_requeue_tagged(admin_comment: str | None) -> bool:
    return REQUEUE_TAG in (admin_comment or "")


def is_held(job: Mapping[str, Any]) -> bool:
    reason = str(job.get("state_reason") or "")
    return _state(job) == "PENDING" and reason.startswith(REQUEUE_HELD)


def gpus_of(job: Mapping[str, Any]) -> int:
    """GPUs asked for: `--gres=gpu:N` (per node, times the nodes) or `--gpus=N`."""
    per_node = GPU_TRES_RE.search(str(job.get("tres_per_node") or ""))
    if per_node:
        return int(per_node.group(1)) * max(1, int(job.get("node_count") or 1))
    per_job = GPU_TRES_RE.search(str(job.get("tres_per_job") or ""))
    return int(per_job.group(1)) if per_job else 0


def task_ids(job: Mapping[str, Any]) -> tuple[str, ...]:
    """The Slurm ids a record stands for: its own, or its array's pending tasks."""
    array_job = int(job.get("array_job_id") or 0)
    if not array_job:
        return (str(job["job_id"]),)
    task = job.get("array_task_id")
    if isinstance(task, dict):  # newer Slurm: {"set": ..., "number": ...}
        task = task.get("number") if task.get("set") else None
    if task is not None and str(task).isdigit() and not job.get("array_task_string"):
        return (f"{array_job}_{task}",)
    tasks = str(job.get("array_task_string") or "").split("%", 1)[0]
    return tuple(f"{array_job}_{t}" for t in parse_index_list(tasks))


def governed_candidates(jobs: Iterable[Mapping[str, Any]]) -> list[GovernedJob]:
    """Held, tagged records whose comment Allot has not written yet (to adopt or
    refuse; a crash between Allot's record and its comment leaves them here too, and
    the adoption service skips what it recorded)."""
    out = []
    for job in jobs:
        comment = str(job.get("comment") or "")
        if not is_governed_record(job) or not is_held(job) or comment.startswith(ALLOT_PREFIX):
            continue
        ids = task_ids(job)
        if not ids:
            continue
        minimum = job.get("time_minimum")
        submitted = job.get("submit_time")
        out.append(
            GovernedJob(
                slurm_ids=ids,
                user=str(job.get("user_name") or ""),
                account=str(job.get("account") or "").lower(),
                name=str(job.get("name") or ids[0])[:200],
                gpus=gpus_of(job),
                time_min_s=int(minimum) * 60 if minimum else None,
                resumable=is_requeue_tagged(job.get("admin_comment")),
                submitted_at=dt.datetime.fromtimestamp(int(submitted), tz=dt.UTC)
                if submitted
                else None,
                partition=str(job.get("partition") or ""),
            )
        )
    return sorted(out, key=lambda g: g.submitted_at or dt.datetime.max.replace(tzinfo=dt.UTC))


def governed_records(jobs: Iterable[Mapping[str, Any]]) -> dict[str, SlurmRecord]:
    """{Slurm id: its record} of every governed record slurmctld still knows."""
    out: dict[str, SlurmRecord] = {}
    for job in jobs:
        if not is_governed_record(job):
            continue
        record = SlurmRecord(_state(job), is_held(job), str(job.get("comment") or ""))
        for slurm_id in task_ids(job):
            out[slurm_id] = record
    return out


WAITING_MAX = 400


def waiting_comment(job_id: int, position: int | None, reason: str, eta: str) -> str:
    """What `squeue -o "%i %k"` shows of an adopted job waiting in Allot's queue, at
    most WAITING_MAX characters: a long reason is cut, never the ETA after it."""
    head = f"{WAITING_PREFIX}{job_id}" + (f" #{position}" if position is not None else "")
    tail = f" ETA {' '.join(eta.split())}" if eta else ""
    words = " ".join(reason.split())
    room = WAITING_MAX - len(head) - len(tail) - 1
    body = f" {words[: max(0, room)].rstrip()}" if words and room > 0 else ""
    return f"{head}{body}{tail}"[:WAITING_MAX]


# A waiting comment, read back: job, position, reason, ETA (`waiting_comment`)
_WAITING_RE = re.compile(
    r"^allot-job:(?P<job>\d+)(?: #(?P<position>\d+))?(?P<reason>.*?)"
    r"(?: ETA (?P<eta>\d{4}-\d\d-\d\d \d\d:\d\d))?$"
)
_NUMBER_RE = re.compile(r"\d+(?:\.\d+)?(%?)")
# What moves a waiting comment's reader: a share that moved by this many points (the
# usage of a project's running jobs moves it a little every cycle), a place in the
# queue among the first POSITION_EXACT or moved by a tenth, an ETA that moved by more
# than ETA_STEP_S and ETA_SHARE of the wait left (a forecast is no closer).
PERCENT_STEP = 5.0
POSITION_EXACT = 10
ETA_STEP_S = 300.0
ETA_SHARE = 0.1


def comment_news(old: str, new: str, now: dt.datetime) -> bool:
    """Whether the waiting comment `new` tells the job's owner something that `old`,
    the one Slurm shows, does not: another job, another place (`_position_news`), a
    reason in other words or with other counts, a share moved by PERCENT_STEP points,
    an ETA where none was shown, one moved by more than ETA_STEP_S and ETA_SHARE of the
    wait left, or one shown that has passed. A queue that stands still costs no writes,
    however often its cycles run."""
    if old == new:
        return False
    a, b = _WAITING_RE.match(old), _WAITING_RE.match(new)
    if a is None or b is None:
        return True
    if a["job"] != b["job"] or _position_news(a["position"], b["position"]):
        return True
    return _reason_news(a["reason"], b["reason"]) or _eta_news(a["eta"], b["eta"], now)


def _position_news(old: str | None, new: str | None) -> bool:
    """Another place among the first POSITION_EXACT, or one moved by a tenth (#409 and
    #406 tell the same: far back, a start ahead shifts every job behind it by one)."""
    if old is None or new is None:
        return old != new
    was, now = int(old), int(new)
    if was == now:
        return False
    return min(was, now) <= POSITION_EXACT or abs(was - now) >= max(1, was // 10)


def _reason_news(old: str, new: str) -> bool:
    if _NUMBER_RE.sub("#", old) != _NUMBER_RE.sub("#", new):
        return True
    for x, y in zip(_NUMBER_RE.finditer(old), _NUMBER_RE.finditer(new), strict=True):
        if x.group(1) != y.group(1):
            return True
        if not x.group(1):  # a count, a rank, a time of day: exact
            if x.group() != y.group():
                return True
        elif abs(float(x.group()[:-1]) - float(y.group()[:-1])) >= PERCENT_STEP:
            return True
    return False


def _eta_news(old: str | None, new: str | None, now: dt.datetime) -> bool:
    """An ETA where none was shown is news; none where one was is not (the forecast
    leaves out some jobs some of the time), unless the one shown has passed."""
    if old is None:
        return new is not None
    shown = dt.datetime.fromisoformat(old).replace(tzinfo=dt.UTC)
    if shown <= now:
        return new != old  # the ETA shown has passed: corrected, or taken away
    if new is None or new == old:
        return False
    then = dt.datetime.fromisoformat(new).replace(tzinfo=dt.UTC)
    left = max(0.0, (then - now).total_seconds())
    return abs((then - shown).total_seconds()) > max(ETA_STEP_S, ETA_SHARE * left)


def refused_comment(reason: str) -> str:
    return f"{REFUSED_PREFIX} {' '.join(reason.split())}"[:400]


def _state(job: Mapping[str, Any]) -> str:
    state = job.get("job_state") or ""
    if isinstance(state, list):
        return str(state[0]) if state else ""
    return str(state)
