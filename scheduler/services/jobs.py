"""Submitting and cancelling jobs (docs/architecture.md, the live data flow, step 1).

`job_submit` validates a submission (every field, with the field named in the error),
checks that the actor may use the project, and stores the job(s) PENDING with their
first event ("" -> pending, what `transitions.job_event` describes) in one INSERT
statement, so an array of 10,000 costs about what one job does in round trips; a cycle
of the cluster is requested after commit.
An `Idempotency-Key` (IETF httpapi draft) makes retries safe: the same key with the
same body gives back the first request's jobs, even when the retries race (the key's
unique constraint serialises them); the same key with another body is refused (422).
A dry run validates and estimates where the job would stand, storing nothing.

`job_cancel`: a pending job is cancelled at once; a starting or running one is asked
to stop (its attempt gets the stop intent `cancelled` and the cluster's grace period;
the cycle worker sends the stop). Cancelling again, or a finished job, changes nothing.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import re
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from django.db import IntegrityError, connection, transaction
from django.db.models import Exists, OuterRef
from django.db.models.base import ModelState
from django.utils import timezone

from budgets import permissions
from budgets.models import BudgetNode
from config.errors import ApplicationError, NotFound, PermissionDenied, ValidationFailed
from config.text import clean_text, is_id_text, refuse_control_characters
from scheduler.core.engine.blocks import Shape
from scheduler.cycle_requests import request_cycle
from scheduler.models import (
    DAY_S,
    Attempt,
    AttemptEnd,
    AttemptState,
    Cluster,
    IdempotencyKey,
    Job,
    JobEvent,
    JobKind,
    JobState,
)
from scheduler.selectors.clusters import resolve_cluster
from scheduler.selectors.jobs import estimate_position
from scheduler.services.transitions import attempt_transition, job_event, job_transition

MAX_ARRAY = 10_000
NAME_MAX_LENGTH = 200
PRIORITY_MIN, PRIORITY_MAX = -1000, 1000
MAX_DURATION_S = 90 * DAY_S
SPEC_KEYS = ("image", "command", "env")
IMAGE_MAX_LENGTH = 1000
COMMAND_MAX_LENGTH = 10_000
ENV_MAX_ENTRIES = 200
ENV_VALUE_MAX_LENGTH = 10_000
SPEC_MAX_BYTES = 64 * 1024
ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
IDEMPOTENCY_KEY_MAX_LENGTH = 255
# Keys are kept at least this long (the cleanup task deletes older ones).
IDEMPOTENCY_KEY_TTL = dt.timedelta(hours=24)


class IdempotencyKeyReused(ApplicationError):
    """The same Idempotency-Key was sent earlier with another request body."""

    status_code = 422
    code = "idempotency_key_reused"


@dataclass(frozen=True)
class JobRequest:
    """A validated submission (what the fingerprint and the stored jobs are made of)."""

    project_id: int
    project_path: str
    cluster: Cluster
    name: str
    gpus: int
    min_runtime_s: int
    resumable: bool
    priority: int
    kind: str
    spec: dict[str, Any]
    duration_s: int | None
    array: int

    def canonical(self) -> dict[str, Any]:
        return {
            "project": self.project_id,
            "cluster": self.cluster.pk,
            "name": self.name,
            "gpus": self.gpus,
            "min_runtime_s": self.min_runtime_s,
            "resumable": self.resumable,
            "priority": self.priority,
            "kind": self.kind,
            "spec": self.spec,
            "duration_s": self.duration_s,
            "array": self.array,
        }


@dataclass
class SubmitResult:
    jobs: list[Job]
    project_path: str
    replayed: bool = False  # the first response of an Idempotency-Key retry
    # dry runs only (their jobs are not saved): see `selectors.jobs.estimate_position`
    estimate: dict[str, Any] | None = None
    array_id: uuid.UUID | None = field(default=None)


# ---------------------------------------------------------------- field checks


def _integer(value: Any, *, field: str, low: int, high: int, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValidationFailed(f"{field} must be a whole number ({what}).", field=field)
    if not low <= value <= high:
        raise ValidationFailed(
            f"{field} is {value}; it must be between {low} and {high} ({what}).", field=field
        )
    return value


def _boolean(value: Any, *, field: str) -> bool:
    if not isinstance(value, bool):
        raise ValidationFailed(f"{field} must be true or false.", field=field)
    return value


def clean_name(value: Any) -> str:
    return clean_text(
        value,
        field="name",
        max_length=NAME_MAX_LENGTH,
        multiline=False,
        blank_message="name must not be empty.",
    )


def clean_kind(value: Any) -> str:
    if value not in JobKind.values:
        raise ValidationFailed(
            f"kind must be one of {', '.join(JobKind.values)} (got {value!r}).", field="kind"
        )
    return str(value)


def _text(value: Any, *, field: str, max_length: int, multiline: bool) -> str:
    if not isinstance(value, str):
        raise ValidationFailed(f"{field} must be text.", field=field)
    if len(value) > max_length:
        raise ValidationFailed(
            f"{field} has {len(value)} characters; at most {max_length} are allowed.",
            field=field,
        )
    refuse_control_characters(value, field=field, multiline=multiline)
    return value


def clean_spec(value: Any) -> dict[str, Any]:
    """`{"image": str, "command": str, "env": {str: str}}`, every key optional."""
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise ValidationFailed(
            'spec must be an object like {"image": ..., "command": ..., "env": {...}}.',
            field="spec",
        )
    unknown = sorted(set(value) - set(SPEC_KEYS))
    if unknown:
        raise ValidationFailed(
            f"spec has an unknown key '{unknown[0]}'; allowed: {', '.join(SPEC_KEYS)}.",
            field=f"spec.{unknown[0]}",
        )
    spec: dict[str, Any] = {}
    if value.get("image") is not None:
        spec["image"] = _text(
            value["image"], field="spec.image", max_length=IMAGE_MAX_LENGTH, multiline=False
        )
    if value.get("command") is not None:
        spec["command"] = _text(
            value["command"], field="spec.command", max_length=COMMAND_MAX_LENGTH, multiline=True
        )
    env = value.get("env")
    if env is not None:
        if not isinstance(env, Mapping):
            raise ValidationFailed(
                'spec.env must be an object of names to text values, like {"SEED": "1"}.',
                field="spec.env",
            )
        if len(env) > ENV_MAX_ENTRIES:
            raise ValidationFailed(
                f"spec.env has {len(env)} variables; at most {ENV_MAX_ENTRIES} are allowed.",
                field="spec.env",
            )
        for key, val in env.items():
            if not isinstance(key, str) or not ENV_NAME.match(key):
                raise ValidationFailed(
                    f"spec.env has the variable name {key!r}; names are letters, digits and "
                    "underscores, not starting with a digit.",
                    field="spec.env",
                )
            _text(
                val,
                field=f"spec.env.{key}",
                max_length=ENV_VALUE_MAX_LENGTH,
                multiline=True,
            )
        spec["env"] = dict(env)
    size = len(json.dumps(spec).encode())
    if size > SPEC_MAX_BYTES:
        raise ValidationFailed(
            f"spec is {size} bytes long; at most {SPEC_MAX_BYTES} are allowed.", field="spec"
        )
    return spec


def check_gpus(gpus: Any, cluster: Cluster, host_sizes: list[int]) -> int:
    """1, 2, 4, 8 (powers of two that one host holds) or a multiple of the host size
    that the cluster has enough whole hosts for (the engine's placement rule, `Shape`)."""
    gpus = _integer(gpus, field="gpus", low=1, high=1_000_000, what="GPUs of the job")
    sizes = host_sizes or [cluster.gpus_per_host] * cluster.host_count
    biggest = max(sizes)
    if gpus <= biggest and gpus & (gpus - 1):
        raise ValidationFailed(
            f"gpus is {gpus}; a job on one host asks for 1, 2, 4, 8, ... GPUs (a power of "
            f"two up to {biggest}), or for a multiple of the host size to use whole hosts.",
            field="gpus",
        )
    shape = Shape(gpus, sizes)
    if shape.reason:
        host_list = "/".join(str(s) for s in sorted(set(sizes)))
        raise ValidationFailed(
            f"gpus is {gpus}; no placement on cluster '{cluster.name}' can hold it "
            f"({len(sizes)} hosts of {host_list} GPUs): ask for a power of two up to "
            f"{biggest} or a multiple of the host size up to {sum(sizes)}.",
            field="gpus",
        )
    return gpus


# ---------------------------------------------------------------- lookups


@dataclass(frozen=True)
class ProjectRef:
    """A project (a leaf) and the chain of nodes down to it: (id, parent id, slug,
    weight), root first. Who may use it is `budgets.permissions.may_submit`."""

    id: int
    path: str
    chain: list[tuple[int, int | None, str, Any]]


_CHAIN_FIELDS = (
    "pk",
    "parent_id",
    "slug",
    "weight",
    "kind",
    "has_children",
)


def _with_children(qs):
    """The chain's rows with whether each has children (one query with the lookup)."""
    return qs.annotate(has_children=Exists(BudgetNode.objects.filter(parent_id=OuterRef("pk"))))


def resolve_project(value: Any, *, field: str = "project") -> ProjectRef:
    """A leaf of the budget tree by its id or its slug path (`org/program/project`)."""
    if isinstance(value, bool) or not isinstance(value, int | str) or value == "":
        raise ValidationFailed(
            f"{field} must be a project's id or its path like 'org/program/project'.",
            field=field,
        )
    if isinstance(value, int) or is_id_text(value):
        try:
            ancestors = BudgetNode.objects.ancestors(BudgetNode(pk=int(value)), include_self=True)
            rows = list(_with_children(ancestors).values_list(*_CHAIN_FIELDS))
        except BudgetNode.DoesNotExist:
            rows = []
        if not rows:
            raise ValidationFailed(f"There is no project with id {value}.", field=field)
    else:
        rows = _rows_by_path([p for p in value.strip().strip("/").split("/") if p])
        if not rows:
            raise ValidationFailed(
                f"There is no project at the path '{value}' (paths are slugs from the "
                "root, like 'org/program/project').",
                field=field,
            )
    path = "/".join(row[2] for row in rows)
    pk, _, _, _, kind, has_children = rows[-1]
    if has_children:
        raise ValidationFailed(
            f"'{path}' is a {kind}, not a project: jobs belong to the leaves of the "
            "budget tree; pick one of its projects.",
            field=field,
        )
    return ProjectRef(id=pk, path=path, chain=[row[:4] for row in rows])


def _rows_by_path(parts: list[str]) -> list[tuple]:
    """The chain of a slug path, root first, in one query (empty when there is none)."""
    if not parts:
        return []
    rows = _with_children(BudgetNode.objects.filter(slug__in=set(parts))).values_list(
        *_CHAIN_FIELDS
    )
    by_parent_slug = {(row[1], row[2]): row for row in rows}
    chain: list[tuple] = []
    parent: int | None = None
    for slug in parts:
        row = by_parent_slug.get((parent, slug))
        if row is None:
            return []
        chain.append(row)
        parent = row[0]
    return chain


# ---------------------------------------------------------------- submit


def clean_request(
    *,
    project: Any,
    cluster: Any,
    name: Any,
    gpus: Any,
    min_runtime_s: Any,
    resumable: Any,
    priority: Any,
    kind: Any,
    spec: Any,
    duration_s: Any,
    array: Any,
    actor=None,
) -> JobRequest:
    """Every field checked, in the order a person reads a submission; the first
    problem raises `ValidationFailed` naming its field. With `actor`, the permission
    to use the project is checked as soon as the project is known."""
    ref = resolve_project(project)
    chain, path = ref.chain, ref.path
    if actor is not None and not permissions.may_submit(actor, ref.id):
        raise PermissionDenied(
            f"You may not submit to '{path}': only its members and the managers of it or "
            "of a node above it may.",
            field="project",
        )
    the_cluster = resolve_cluster(cluster, with_host_sizes=True)
    host_sizes = list(the_cluster.host_sizes)
    gpus = check_gpus(gpus, the_cluster, host_sizes)
    cap = the_cluster.max_min_runtime_s
    min_runtime_s = _integer(
        min_runtime_s,
        field="min_runtime_s",
        low=0,
        high=cap,
        what=f"seconds of protected runtime; cluster '{the_cluster.name}' allows up to {cap}, "
        "and 0 submits unallocated work",
    )
    if min_runtime_s > 0:
        _refuse_allocated_in_zero_weight(chain, path)
    array = _integer(array, field="array", low=1, high=MAX_ARRAY, what="jobs in the array")
    if duration_s is not None:
        duration_s = _integer(
            duration_s, field="duration_s", low=1, high=MAX_DURATION_S, what="expected seconds"
        )
    return JobRequest(
        project_id=ref.id,
        project_path=path,
        cluster=the_cluster,
        name=clean_name(name),
        gpus=gpus,
        min_runtime_s=min_runtime_s,
        resumable=_boolean(resumable, field="resumable"),
        priority=_integer(
            priority,
            field="priority",
            low=PRIORITY_MIN,
            high=PRIORITY_MAX,
            what="orders the job among its project's jobs only",
        ),
        kind=clean_kind(kind),
        spec=clean_spec(spec),
        duration_s=duration_s,
        array=array,
    )


def _refuse_allocated_in_zero_weight(chain: list[tuple], path: str) -> None:
    zero = [row for row in chain[1:] if row[3] is not None and row[3] == 0]
    if zero:
        where = (
            "it has weight 0"
            if zero[-1][0] == chain[-1][0]
            else f"'{zero[0][2]}' above it has weight 0"
        )
        raise ValidationFailed(
            f"'{path}' has no budget ({where}), so it can run unallocated work only. "
            "Submit with min_runtime_s 0 (free, preemptible at any time), or ask the "
            "program lead for a weight.",
            field="min_runtime_s",
        )


def clean_idempotency_key(value: Any) -> str | None:
    """The header's key (a quoted structured-field string or a bare token), or None."""
    if value is None:
        return None
    if not isinstance(value, str):
        raise ValidationFailed("The Idempotency-Key must be text.", field="Idempotency-Key")
    key = value.strip()
    if len(key) >= 2 and key[0] == key[-1] == '"':
        key = key[1:-1]
    if not key:
        raise ValidationFailed("The Idempotency-Key header is empty.", field="Idempotency-Key")
    if len(key) > IDEMPOTENCY_KEY_MAX_LENGTH:
        raise ValidationFailed(
            f"The Idempotency-Key has {len(key)} characters; at most "
            f"{IDEMPOTENCY_KEY_MAX_LENGTH} are allowed.",
            field="Idempotency-Key",
        )
    if not key.isascii() or not key.isprintable():
        raise ValidationFailed(
            "The Idempotency-Key must be printable ASCII (e.g. a UUID).", field="Idempotency-Key"
        )
    return key


def fingerprint_of(data: Any) -> str:
    """sha256 of a request body in canonical JSON (key order and spacing do not matter)."""
    text = json.dumps(data, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()


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
) -> SubmitResult:
    """Submit a job (or an array of `array` identical jobs) as `actor`, submitted at
    `now` (default: the current time).

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
    )
    now = now or timezone.now()
    if dry_run:
        job = _new_jobs(req, actor=actor, now=now, array_id=None)[0]
        return SubmitResult(
            jobs=[job], project_path=req.project_path, estimate=estimate_position(job=job)
        )
    fingerprint = fingerprint or fingerprint_of(req.canonical())
    array_id = uuid.uuid4() if req.array > 1 else None
    with transaction.atomic():
        if key is not None:
            previous = _previous_key(actor=actor, key=key, fingerprint=fingerprint)
            if previous is not None:
                return _replay(previous, req)
        try:
            with transaction.atomic():  # a savepoint: undone when the key was taken meanwhile
                ids = _insert_jobs(req, actor=actor, now=now, array_id=array_id)
                if key is not None:
                    IdempotencyKey.objects.create(
                        user=actor, key=key, fingerprint=fingerprint, created_at=now, job_ids=ids
                    )
        except IntegrityError:
            # A retry that raced the first request: its key insert waited for the first
            # transaction to commit, then failed on the unique key; answer like a retry.
            previous = _previous_key(actor=actor, key=key, fingerprint=fingerprint) if key else None
            if previous is None:
                raise
            return _replay(previous, req)
        request_cycle(req.cluster.pk)
    jobs = _new_jobs(req, actor=actor, now=now, array_id=array_id, ids=ids)
    return SubmitResult(jobs=jobs, project_path=req.project_path, array_id=array_id)


# Columns of the jobs and first events a submission stores (everything else of the rows
# is the model's default, restated here; a model change that adds a required column
# makes this statement fail in the tests).
_INSERT_JOBS = """
WITH new_jobs AS (
    INSERT INTO {job} (
        cluster_id, project_id, submitter_id, name, gpus, min_runtime_s, resumable,
        priority, kind, spec, duration_s, state, state_reason, submitted_at, queued_at,
        progress_s, attempt_count, array_id, array_index, updated_at
    )
    SELECT %(cluster)s, %(project)s, %(user)s, %(name)s, %(gpus)s, %(min_runtime_s)s,
        %(resumable)s, %(priority)s, %(kind)s, %(spec)s::jsonb, %(duration_s)s,
        %(state)s, 'submitted', %(now)s, %(now)s, 0, 0, %(array_id)s,
        CASE WHEN %(array_id)s::uuid IS NULL THEN NULL ELSE i END, %(now)s
    FROM generate_series(0, %(count)s - 1) AS i
    ORDER BY i
    RETURNING id, array_index
), new_events AS (
    INSERT INTO {event} (job_id, at, from_state, to_state, reason, reason_code, actor_id,
        actor_name, rule)
    SELECT id, %(now)s, '', %(state)s, %(reason)s, 'submitted', %(user)s, %(username)s, ''
    FROM new_jobs
)
SELECT id FROM new_jobs ORDER BY array_index NULLS FIRST, id
"""


def _insert_jobs(
    req: JobRequest, *, actor, now: dt.datetime, array_id: uuid.UUID | None
) -> list[int]:
    """Store the request's job(s) PENDING with their first event ("" -> pending), in one
    statement however many there are (10,000 rows built by PostgreSQL, not Python)."""
    sql = _INSERT_JOBS.format(job=Job._meta.db_table, event=JobEvent._meta.db_table)
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
    }
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return [row[0] for row in cursor.fetchall()]


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


def _previous_key(*, actor, key: str, fingerprint: str) -> IdempotencyKey | None:
    """The first request's key row (None for a new key); 422 when its body differed."""
    previous = IdempotencyKey.objects.filter(user=actor, key=key).first()
    if previous is not None and previous.fingerprint != fingerprint:
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


# ---------------------------------------------------------------- cancel


def job_cancel(*, actor, job_id: int, now: dt.datetime | None = None) -> Job:
    """Cancel a job as `actor` at `now` (default: the current time; idempotent: a job
    already cancelled, stopping for a cancel or finished is returned as it is, with no
    new event)."""
    with transaction.atomic():
        attempt = (
            Attempt.objects.select_for_update(of=("self", "job"))
            .select_related("job", "cluster")
            .filter(job_id=job_id)
            .exclude(state=AttemptState.ENDED)
            .first()
        )
        job = attempt.job if attempt else Job.objects.select_for_update().filter(pk=job_id).first()
        if job is None:
            raise NotFound(f"There is no job with id {job_id}.")
        if not permissions.may_cancel_job(actor, job):
            raise PermissionDenied(
                f"You may not cancel job {job_id}: only its submitter, the managers of its "
                "project and staff may."
            )
        if job.state in (JobState.STARTING, JobState.RUNNING, JobState.STOPPING) and not attempt:
            attempt = (
                Attempt.objects.select_for_update()
                .filter(job=job)
                .exclude(state=AttemptState.ENDED)
                .first()
            )
        changed = _cancel_locked(job, attempt, actor=actor, now=now or timezone.now())
        if changed:
            request_cycle(job.cluster_id)
    return job


def _cancel_locked(job: Job, attempt: Attempt | None, *, actor, now: dt.datetime) -> bool:
    who = actor.get_username()
    if job.state == JobState.PENDING:
        job_transition(
            job=job,
            to_state=JobState.CANCELLED,
            reason=f"cancelled by {who} while pending",
            reason_code="cancelled",
            at=now,
            actor=actor,
        )
        return True
    if attempt is None or job.state not in (JobState.STARTING, JobState.RUNNING, JobState.STOPPING):
        return False  # finished, or cancelled already
    if attempt.stop_intent == AttemptEnd.CANCELLED:
        return False
    if job.state == JobState.STOPPING:
        # Being preempted or drained: it ends cancelled instead of being requeued. The
        # states stay; who asked is recorded as for a transition.
        reason = f"cancel requested by {who} while stopping"
        attempt.stop_intent = AttemptEnd.CANCELLED
        attempt.save(update_fields=["stop_intent"])
        job.state_reason = reason[:500]
        job.save(update_fields=["state_reason", "updated_at"])
        job_event(
            job=job,
            from_state=job.state,
            to_state=job.state,
            reason=reason,
            reason_code="cancelled",
            at=now,
            attempt=attempt,
            actor=actor,
        ).save()
        return True
    grace = dt.timedelta(seconds=job.cluster.grace_s)
    attempt.job = job  # the locked row: its transition is the attempt's
    attempt_transition(
        attempt=attempt,
        to_state=AttemptState.STOPPING,
        changes={
            "stop_intent": AttemptEnd.CANCELLED,
            "stop_requested_at": now,
            "stop_deadline": now + grace,
        },
        job_steps=[JobState.STOPPING],
        reason=f"cancelled by {who}; stopping with a grace period of {job.cluster.grace_s} s",
        reason_code="cancelled",
        at=now,
        actor=actor,
    )
    return True
