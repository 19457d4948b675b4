"""Storing submitted jobs PENDING with their first event in one INSERT, the
Idempotency-Key replay, dry runs (docs/architecture.md, the live data flow, step 1)."""

from __future__ import annotations

import datetime as dt
import json
import uuid
from dataclasses import dataclass, field
from typing import Any

from django.db.models.base import ModelState
from django.utils import timezone

from config.errors import ApplicationError
from config.plainsql import fetch_all
from scheduler.cycle_requests import request_cycle
from scheduler.models import (
    IdempotencyKey,
    Job,
    JobEvent,
    JobKind,
    JobState,
)
from scheduler.selectors.jobs import estimate_position
from scheduler.services.jobs.requests import (
    JobRequest,
    clean_idempotency_key,
    clean_request,
    fingerprint_of,
)

# Keys are kept at least this long (the cleanup task deletes older ones).
IDEMPOTENCY_KEY_TTL = dt.timedelta(hours=24)


class IdempotencyKeyReused(ApplicationError):
    """The same Idempotency-Key was sent earlier with another request body."""

    status_code = 422
    code = "idempotency_key_reused"


@dataclass
class SubmitResult:
    jobs: list[Job]
    project_path: str
    replayed: bool = False  # the first response of an Idempotency-Key retry
    # dry runs only (their jobs are not saved): see `selectors.jobs.estimate_position`
    estimate: dict[str, Any] | None = None
    array_id: uuid.UUID | None = field(default=None)


def job_submit(
    *,
    actor,
    project: Any,
    cluster: Any,
    name: Any,
    gpus: Any,
    min_runtime_s: Any,
    resumable: Any = False,
    priority: Any = 0,
    kind: Any = JobKind.TRAINING,
    spec: Any = None,
    duration_s: Any = None,
    array: Any = 1,
    idempotency_key: str | None = None,
    fingerprint: str | None = None,
    dry_run: bool = False,
    now: dt.datetime | None = None,
    wake_cycle: bool = True,
    adopted: bool = False,
) -> SubmitResult:
    """Submit a job (or an array of `array` identical jobs) as `actor`, submitted at
    `now` (default: the current time). `wake_cycle=False`: no cycle is requested (the
    caller is a cycle itself: governed sbatch's adoption). `adopted`: the job's work is
    in the cluster already (governed sbatch), so it needs no `spec.command` where the
    cluster runs commands (Slurm; elsewhere that is a 400 naming it).

    Raises ValidationFailed (400, with `field`), PermissionDenied (403) or
    IdempotencyKeyReused (422)."""
    key = clean_idempotency_key(idempotency_key)
    req = clean_request(
        project=project,
        cluster=cluster,
        name=name,
        gpus=gpus,
        min_runtime_s=min_runtime_s,
        resumable=resumable,
        priority=priority,
        kind=kind,
        spec=spec,
        duration_s=duration_s,
        array=array,
        actor=actor,
        adopted=adopted,
    )
    now = now or timezone.now()
    if dry_run:
        job = _new_jobs(req, actor=actor, now=now, array_id=None)[0]
        return SubmitResult(
            jobs=[job], project_path=req.project_path, estimate=estimate_position(job=job)
        )
    fingerprint = fingerprint or fingerprint_of(req.canonical())
    array_id = uuid.uuid4() if req.array > 1 else None
    # One statement: atomic by itself, no transaction or savepoint around it.
    ids = _insert_jobs(
        req, actor=actor, now=now, array_id=array_id, key=key, fingerprint=fingerprint
    )
    if ids is None:
        # The key was taken (by the first request, or by a retry that raced it: the
        # insert waited for that transaction to commit): answer like a retry.
        return _replay(_previous_key(actor=actor, key=key, fingerprint=fingerprint), req)
    if wake_cycle:
        request_cycle(req.cluster.pk)  # once the caller's transaction (if any) commits
    jobs = _new_jobs(req, actor=actor, now=now, array_id=array_id, ids=ids)
    return SubmitResult(jobs=jobs, project_path=req.project_path, array_id=array_id)


# Columns of the jobs and first events a submission stores (everything else of the rows
# is the model's default, restated here; a model change that adds a required column
# makes this statement fail in the tests). With an Idempotency-Key the job ids are drawn
# first, the key row (holding them) is inserted unless the user's key exists
# (`ON CONFLICT DO NOTHING`, which waits for a concurrent first request to commit), and
# the jobs only when it was: the check, the jobs, their events and the key are one
# statement, and a retry stores nothing. The submission time is bound once (`args`): each
# mention of a parameter is converted to SQL text separately.
_INSERT_JOBS = """
WITH args AS (SELECT %(now)s::timestamptz AS at),
ids AS MATERIALIZED (
    SELECT nextval(pg_get_serial_sequence('{job}', 'id')) AS id, i
    FROM generate_series(0, %(count)s - 1) AS i
){key_cte}, new_jobs AS (
    INSERT INTO {job} (
        id, cluster_id, project_id, submitter_id, name, gpus, min_runtime_s, resumable,
        priority, kind, spec, duration_s, state, state_reason, submitted_at, queued_at,
        progress_s, attempt_count, array_id, array_index, updated_at
    )
    SELECT id, %(cluster)s, %(project)s, %(user)s, %(name)s, %(gpus)s, %(min_runtime_s)s,
        %(resumable)s, %(priority)s, %(kind)s, %(spec)s::jsonb, %(duration_s)s,
        %(state)s, 'submitted', args.at, args.at, 0, 0, %(array_id)s,
        CASE WHEN %(array_id)s::uuid IS NULL THEN NULL ELSE i END, args.at
    FROM ids CROSS JOIN args{key_taken}
    ORDER BY i
    RETURNING id, array_index
), new_events AS (
    INSERT INTO {event} (job_id, at, from_state, to_state, reason, reason_code, actor_id,
        actor_name, rule)
    SELECT id, args.at, '', %(state)s, %(reason)s, 'submitted', %(user)s, %(username)s, ''
    FROM new_jobs CROSS JOIN args
)
SELECT id FROM new_jobs ORDER BY array_index NULLS FIRST, id
"""
_KEY_CTE = """, new_key AS (
    INSERT INTO {key} (user_id, key, fingerprint, created_at, job_ids)
    SELECT %(user)s, %(key)s, %(fingerprint)s, (SELECT at FROM args), jsonb_agg(id ORDER BY i)
    FROM ids
    ON CONFLICT ON CONSTRAINT idempotency_key_unique DO NOTHING
    RETURNING id
)"""


def _insert_jobs(
    req: JobRequest,
    *,
    actor,
    now: dt.datetime,
    array_id: uuid.UUID | None,
    key: str | None = None,
    fingerprint: str = "",
) -> list[int] | None:
    """Store the request's job(s) PENDING with their first event ("" -> pending), and
    the Idempotency-Key `key` with their ids, in one statement however many there are
    (10,000 rows built by PostgreSQL, not Python). None: `key` was already taken, and
    nothing was stored."""
    sql = _INSERT_JOBS.format(
        job=Job._meta.db_table,
        event=JobEvent._meta.db_table,
        key_cte="" if key is None else _KEY_CTE.format(key=IdempotencyKey._meta.db_table),
        key_taken="" if key is None else " WHERE EXISTS (SELECT 1 FROM new_key)",
    )
    params = {
        "cluster": req.cluster.pk,
        "project": req.project_id,
        "user": actor.pk,
        "username": actor.get_username(),
        "name": req.name,
        "gpus": req.gpus,
        "min_runtime_s": req.min_runtime_s,
        "resumable": req.resumable,
        "priority": req.priority,
        "kind": req.kind,
        "spec": json.dumps(req.spec),
        "duration_s": req.duration_s,
        "state": JobState.PENDING,
        "now": now,
        "array_id": array_id,
        "count": req.array,
        "reason": f"submitted by {actor.get_username()}"[:1000],
        "key": key,
        "fingerprint": fingerprint,
    }
    ids = [row[0] for row in fetch_all(sql, params, prepared=True)]
    return None if key is not None and not ids else ids


def _new_jobs(
    req: JobRequest,
    *,
    actor,
    now: dt.datetime,
    array_id: uuid.UUID | None,
    ids: list[int] | None = None,
) -> list[Job]:
    """The request's jobs as model instances (unsaved without `ids`, as stored with
    them); thousands are cloned from one instance, which is much cheaper than building
    each."""
    template = Job(
        cluster=req.cluster,
        project_id=req.project_id,
        submitter=actor,
        name=req.name,
        gpus=req.gpus,
        min_runtime_s=req.min_runtime_s,
        resumable=req.resumable,
        priority=req.priority,
        kind=req.kind,
        spec=req.spec,
        duration_s=req.duration_s,
        state=JobState.PENDING,
        state_reason="submitted",
        submitted_at=now,
        queued_at=now,
        array_id=array_id,
        updated_at=now,
    )
    if ids is None:
        return [template]
    jobs = []
    for i, pk in enumerate(ids):
        job = Job.__new__(Job)
        job.__dict__.update(template.__dict__)
        job._state = ModelState()
        job._state.adding, job._state.db = False, "default"
        job._state.fields_cache = dict(template._state.fields_cache)  # cluster, submitter
        job.id = pk
        job.array_index = i if array_id is not None else None
        jobs.append(job)
    return jobs


def _previous_key(*, actor, key: str, fingerprint: str) -> IdempotencyKey:
    """The first request's key row; 422 when its body differed."""
    previous = IdempotencyKey.objects.filter(user=actor, key=key).first()
    if previous is None:  # deleted since the insert found it (pruned): a conflict all the same
        raise IdempotencyKeyReused(
            f"The Idempotency-Key '{key}' was just used; use a new key for a new submission.",
            field="Idempotency-Key",
        )
    if previous.fingerprint != fingerprint:
        raise IdempotencyKeyReused(
            f"The Idempotency-Key '{key}' was used at {previous.created_at:%Y-%m-%d %H:%M:%S} "
            "UTC for another request body; use a new key for a new submission.",
            field="Idempotency-Key",
        )
    return previous


def _replay(previous: IdempotencyKey, req: JobRequest) -> SubmitResult:
    by_id = Job.objects.select_related("cluster").in_bulk(previous.job_ids)
    jobs = [by_id[pk] for pk in previous.job_ids if pk in by_id]
    array_id = jobs[0].array_id if jobs else None
    return SubmitResult(jobs=jobs, project_path=req.project_path, replayed=True, array_id=array_id)


def idempotency_keys_prune(*, now: dt.datetime | None = None) -> int:
    """Delete keys older than `IDEMPOTENCY_KEY_TTL` (a retry after that is a new job)."""
    cutoff = (now or timezone.now()) - IDEMPOTENCY_KEY_TTL
    deleted, _ = IdempotencyKey.objects.filter(created_at__lt=cutoff).delete()
    return deleted
