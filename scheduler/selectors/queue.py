"""The explained queue of a cluster, as its last cycle stored it (`QueueSnapshot`).

The cycle stores the entries in columns (each field as comma-separated text,
positions implicit, reason texts deduplicated) because a queue of 10,000 jobs written
as one JSON object per job costs more than the rest of the cycle. Read it through these functions, which
give one dict per waiting job:

    {"job": id, "project": node id, "position": n, "project_position": n,
     "project_rank": n, "metric": f, "reason": "..."}

in start order (position 1 starts next).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from scheduler.models import QueueSnapshot

COLUMNS = ("job", "project", "project_position", "project_rank", "metric", "reason")
_INTS = ("job", "project_position", "project_rank", "reason")


def queue_snapshot(*, cluster_id: int) -> QueueSnapshot | None:
    """The cluster's stored queue (None before its first successful cycle)."""
    return QueueSnapshot.objects.filter(cluster_id=cluster_id).first()


@dataclass(frozen=True)
class CycleStamp:
    """When a cluster's last scheduling cycle ran (`at`, its queue's `computed_at`) and
    its record's id (None once the record is pruned)."""

    at: dt.datetime
    cycle_id: int | None


def last_cycle(*, cluster_id: int) -> CycleStamp | None:
    """The time every scheduling figure of the cluster is as of (docs/concepts.md,
    "Windows"): the queue, its reasons, the fair-share dashboard, API `fairshare/` and
    `allot shares`. None before the cluster's first successful cycle."""
    row = (
        QueueSnapshot.objects.filter(cluster_id=cluster_id)
        .values_list("computed_at", "cycle_id")
        .first()
    )
    return CycleStamp(at=row[0], cycle_id=row[1]) if row else None


def _column(entries: Mapping[str, Any], name: str, start: int = 0, stop: int | None = None) -> list:
    """Values `start` .. `stop` of a column; only those are converted (a page of a
    10,000-job queue needs 50 of each column, not 10,000)."""
    values = (entries.get(name) or "").split(",")[start:stop]  # "" is one empty project
    if name in _INTS:
        return list(map(int, values))
    if name == "metric":
        return list(map(float, values))
    return [int(v) if v else None for v in values]  # project node ids


def queue_length(entries: Mapping[str, Any]) -> int:
    text = (entries or {}).get("job") or ""
    return text.count(",") + 1 if text else 0


def iter_entries(
    entries: Mapping[str, Any], start: int = 0, stop: int | None = None
) -> Iterator[dict]:
    """Entries `start` .. `stop` (0-based, like a slice) of a stored queue as dicts."""
    if not entries or not entries.get("job"):
        return
    length = queue_length(entries)
    start = max(0, start)
    stop = length if stop is None else min(stop, length)
    if start >= stop:
        return
    cols = [_column(entries, name, start, stop) for name in COLUMNS]
    reasons = entries["reasons"]
    for i, row in enumerate(zip(*cols, strict=True), start):
        job, project, project_position, project_rank, metric, reason = row
        yield {
            "job": job,
            "project": project,
            "position": i + 1,
            "project_position": project_position,
            "project_rank": project_rank,
            "metric": metric,
            "reason": reasons[reason],
        }


def queue_entry(entries: Mapping[str, Any], *, job_id: int) -> dict | None:
    """The entry of one job (None when it is not waiting in this queue)."""
    if not entries or not entries.get("job"):
        return None
    try:
        i = entries["job"].split(",").index(str(job_id))
    except ValueError:
        return None
    return next(iter_entries(entries, i, i + 1))
