"""Where a list of jobs stands now (a researcher's own jobs page): for each pending job
its place in its cluster's last explained queue, why it waits and its estimated start;
and the order such a page lists jobs in (`start_order`: pending ones as they will
start). One queue read per cluster, whatever the number of jobs."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from typing import Any

from scheduler.models import Job, JobState
from scheduler.selectors.budget_changes import cluster_change_notes, with_change_note
from scheduler.selectors.eta import job_eta_for_page
from scheduler.selectors.queue import stored_queue

NOT_PLACED = "submitted after the last scheduling cycle; the next cycle places it"


def job_standings(jobs: Iterable[Job]) -> dict[int, dict[str, Any]]:
    """Job pk -> {position, queue_length, reason, eta} for the pending ones among
    `jobs` (position None while no cycle has placed the job yet; `eta` as `job_eta`
    gives it, with datetimes)."""
    pending = [j for j in jobs if j.state == JobState.PENDING]
    by_cluster: dict[int, list[Job]] = defaultdict(list)
    for job in pending:
        by_cluster[job.cluster_id].append(job)
    out: dict[int, dict[str, Any]] = {}
    for cluster_id, cluster_jobs in by_cluster.items():
        snap = stored_queue(cluster_id=cluster_id)
        wanted = {j.pk for j in cluster_jobs}
        found = {e["job"]: e for e in snap.entries_of(wanted)} if snap else {}
        length = snap.length if snap else 0
        notes = (
            cluster_change_notes(
                lookback_s=cluster_jobs[0].cluster.lookback_s,
                as_of=snap.computed_at,
                project_ids={j.project_id for j in cluster_jobs},
                any_change=snap.budget_changed,
            )
            if snap and found
            else {}
        )
        for job in cluster_jobs:
            entry = found.get(job.pk)
            reason = entry["reason"] if entry else NOT_PLACED
            out[job.pk] = {
                "position": entry["position"] if entry else None,
                "queue_length": length,
                "reason": with_change_note(reason, notes.get(job.project_id)),
                "eta": job_eta_for_page(job=job),
            }
    return out


def start_order(pending: Iterable[tuple[int, int]]) -> list[int]:
    """The pks of pending jobs, given as (pk, cluster id), in the order they will start:
    by their positions in their clusters' last explained queues (the queue page's and
    the API's `position`), those no cycle has placed yet last, oldest first."""
    by_cluster: dict[int, list[int]] = defaultdict(list)
    for pk, cluster_id in pending:
        by_cluster[cluster_id].append(pk)
    keyed: list[tuple[int, int, int]] = []
    for cluster_id, pks in by_cluster.items():
        snap = stored_queue(cluster_id=cluster_id)
        index = snap.index if snap else {}
        for pk in pks:
            place = index.get(pk)
            keyed.append((0, place, pk) if place is not None else (1, 0, pk))
    return [pk for *_, pk in sorted(keyed)]
