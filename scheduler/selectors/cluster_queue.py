"""The cluster queue page (like `squeue`): a cluster's pending jobs in start order and its
running jobs, filtered by project, user or state, one page at a time.

Everything a row shows comes from the selectors the job page and the API use: position,
reason and fair-share factor from the cluster's last explained queue (`queue_page`, the
API's queue), the estimated start from the cached ETAs (`etas_for_page`, the job page's
answer), a running job's protection end from the engine's one rule
(`scheduler.selectors.protection`, which calls
`scheduler.core.engine.runs.protected_until`). Who may read it is the API queue's rule
(`budgets.permissions.is_participant`, checked by the view's gate). A page reads the same
number of rows whatever the queue's length (tests/test_query_counts.py).
"""

from __future__ import annotations

import dataclasses
from typing import Any

from django.contrib.auth import get_user_model
from django.db.models.functions import Coalesce

from config.errors import ValidationFailed
from scheduler.models import ACTIVE_STATES, Attempt, Cluster
from scheduler.selectors.eta import CachedJobEtas, etas_for_page
from scheduler.selectors.jobs import project_paths, queue_page
from scheduler.selectors.protection import protection_end_at
from scheduler.selectors.queue import last_cycle, stored_queue

PAGE_SIZE = 50
STATES = ("all", "pending", "running")  # like `squeue -t`


@dataclasses.dataclass(frozen=True)
class QueueFilters:
    """What the page shows: `state` (all, pending, running), and only the jobs of
    `project_ids` (a node and every node below it) and of `submitter_id` when set."""

    state: str = "all"
    project_ids: tuple[int, ...] | None = None
    submitter_id: int | None = None

    @property
    def narrowed(self) -> bool:
        return self.project_ids is not None or self.submitter_id is not None

    def shows(self, state: str) -> bool:
        return self.state in ("all", state)


def user_id(username: str) -> int:
    """The id of the user named `username`; an unknown one is a ValidationFailed naming
    `user` (the queue page's filter)."""
    users = get_user_model()
    found = users.objects.filter(**{users.USERNAME_FIELD: username}).values_list("pk", flat=True)
    pk = next(iter(found), None)
    if pk is None:
        raise ValidationFailed(f"There is no user {username[:100]!r}.", field="user")
    return pk


def page_number(value: str | None) -> int:
    """A page number from the query: 1 for a missing or malformed one."""
    try:
        return max(1, int(value or 1))
    except ValueError:
        return 1


@dataclasses.dataclass
class Section:
    """One table of the page: its `rows` on page `number` of `pages`, `count` in all."""

    rows: list[dict[str, Any]]
    count: int
    number: int
    pages: int

    @property
    def first(self) -> int:
        return (self.number - 1) * PAGE_SIZE + 1 if self.rows else 0

    @property
    def last(self) -> int:
        return self.first + len(self.rows) - 1 if self.rows else 0


def _pages(count: int) -> int:
    return max(1, -(-count // PAGE_SIZE))


def pending_section(*, cluster: Cluster, filters: QueueFilters, page: int) -> dict[str, Any]:
    """The cluster's pending jobs on page `page` (a page past the last shows the last),
    as the API's queue gives them; with the queue's `computed_at` and `cycle_id` (None
    before the first cycle). `with_etas` adds their estimated starts."""
    read = _pending_reader(cluster, filters)
    found = read(page)
    if not found.rows and found.count and page > _pages(found.count):
        page = _pages(found.count)
        found = read(page)
    return {
        "section": Section(
            rows=found.rows, count=found.count, number=page, pages=_pages(found.count)
        ),
        "computed_at": found.computed_at,
        "cycle_id": found.cycle_id,
        "queue_length": _queue_length(cluster, filters, found.count),
    }


def _queue_length(cluster: Cluster, filters: QueueFilters, count: int) -> int:
    """How many jobs the whole queue holds (a position is "n of" this, as on the job
    page), whatever the filters."""
    if not filters.narrowed:
        return count
    stored = stored_queue(cluster_id=cluster.pk)
    return stored.length if stored else 0


def _pending_reader(cluster: Cluster, filters: QueueFilters):
    def read(page: int):
        return queue_page(
            cluster=cluster,
            offset=(page - 1) * PAGE_SIZE,
            limit=PAGE_SIZE,
            submitter_id=filters.submitter_id,
            project_ids=filters.project_ids,
        )

    return read


def waiting_job_ids(section: Section | None) -> list[int]:
    """The jobs of a pending section that still wait (the queue is the last cycle's)."""
    return [r["job"] for r in section.rows if r["state"] == "pending"] if section else []


def with_etas(
    section: Section | None, *, cluster_id: int, current: CachedJobEtas | None = None
) -> Section | None:
    """The pending section with each waiting row's estimated start (`eta`, as the job
    page shows it: `etas_for_page`), in one cache read (none with `current`, what
    `cluster_eta_refresh_request` answered for these rows)."""
    if section is None:
        return None
    queued = {r["job"]: r["queued_at"] for r in section.rows if r["state"] == "pending"}
    etas = etas_for_page(cluster_id=cluster_id, queued=queued, current=current)
    rows = [{**row, "eta": etas.get(row["job"])} for row in section.rows]
    return dataclasses.replace(section, rows=rows)


def running_section(*, cluster: Cluster, filters: QueueFilters, page: int) -> Section:
    """The cluster's running jobs (an open attempt: starting, running or stopping), the
    earliest started first, on page `page`: each with its start and the end of its
    protection (None: unallocated, never protected)."""
    attempts = Attempt.objects.filter(
        cluster=cluster, ended_at__isnull=True, job__state__in=ACTIVE_STATES
    )
    if filters.submitter_id is not None:
        attempts = attempts.filter(job__submitter_id=filters.submitter_id)
    if filters.project_ids is not None:
        attempts = attempts.filter(project_id__in=filters.project_ids)
    count = attempts.count()
    page = min(page, _pages(count))
    ordered = (
        attempts.select_related("job", "job__submitter")
        .annotate(since=Coalesce("started_at", "created_at"))
        .order_by("since", "pk")
    )
    chosen = list(ordered[(page - 1) * PAGE_SIZE : page * PAGE_SIZE])
    paths = project_paths() if chosen else {}
    cap = float(cluster.max_min_runtime_s)
    rows = [_running_row(a, paths.get(a.project_id, ""), cap) for a in chosen]
    return Section(rows=rows, count=count, number=page, pages=_pages(count))


def _running_row(attempt: Attempt, project_path: str, cap: float) -> dict[str, Any]:
    job = attempt.job
    started = attempt.since
    return {
        "job": job.pk,
        "name": job.name,
        "state": job.state,
        "state_label": job.get_state_display(),
        "project_path": project_path,
        "submitter": job.submitter.get_username(),
        "gpus": attempt.gpus,
        "hosts": sorted({p.get("host", "") for p in attempt.placements or []}),
        "started_at": started,
        "protected_until": protection_end_at(attempt, job, started, cap),
        "stopping": attempt.stop_requested_at is not None,
    }


def cluster_queue(
    *, cluster: Cluster, filters: QueueFilters, page: int, running_page: int
) -> dict[str, Any]:
    """What the queue page shows of `cluster`: the pending section (None when the
    filters hide it), the running section (likewise) and the cycle that ordered the
    queue (`computed_at` None before the first)."""
    if filters.shows("pending"):
        pending = pending_section(cluster=cluster, filters=filters, page=page)
    else:
        stamp = last_cycle(cluster_id=cluster.pk)
        pending = {
            "section": None,
            "computed_at": stamp.at if stamp else None,
            "cycle_id": stamp.cycle_id if stamp else None,
            "queue_length": 0,
        }
    return {
        "cluster": cluster,
        "filters": filters,
        "pending": pending["section"],
        "computed_at": pending["computed_at"],
        "cycle_id": pending["cycle_id"],
        "queue_length": pending["queue_length"],
        "running": (
            running_section(cluster=cluster, filters=filters, page=running_page)
            if filters.shows("running")
            else None
        ),
    }
