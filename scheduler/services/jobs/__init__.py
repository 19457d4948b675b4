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

- `requests`: the field checks, the project lookup, the key and the fingerprint.
- `submit`: `job_submit`, the replay of a key, the cleanup of old keys.
- `cancel`: `job_cancel`.

The public names are re-exported here: callers import `scheduler.services.jobs`.
"""

from scheduler.services.jobs.cancel import job_cancel
from scheduler.services.jobs.requests import (
    COMMAND_MAX_LENGTH,
    ENV_MAX_ENTRIES,
    ENV_NAME,
    ENV_VALUE_MAX_LENGTH,
    IDEMPOTENCY_KEY_MAX_LENGTH,
    IMAGE_MAX_LENGTH,
    MAX_ARRAY,
    MAX_DURATION_S,
    NAME_MAX_LENGTH,
    PRIORITY_MAX,
    PRIORITY_MIN,
    SPEC_KEYS,
    SPEC_MAX_BYTES,
    JobRequest,
    ProjectRef,
    check_gpus,
    clean_idempotency_key,
    clean_kind,
    clean_name,
    clean_request,
    clean_spec,
    fingerprint_of,
    resolve_project,
)
from scheduler.services.jobs.submit import (
    IDEMPOTENCY_KEY_TTL,
    IdempotencyKeyReused,
    SubmitResult,
    idempotency_keys_prune,
    job_submit,
)

__all__ = [
    "COMMAND_MAX_LENGTH",
    "ENV_MAX_ENTRIES",
    "ENV_NAME",
    "ENV_VALUE_MAX_LENGTH",
    "IDEMPOTENCY_KEY_MAX_LENGTH",
    "IDEMPOTENCY_KEY_TTL",
    "IMAGE_MAX_LENGTH",
    "MAX_ARRAY",
    "MAX_DURATION_S",
    "NAME_MAX_LENGTH",
    "PRIORITY_MAX",
    "PRIORITY_MIN",
    "SPEC_KEYS",
    "SPEC_MAX_BYTES",
    "IdempotencyKeyReused",
    "JobRequest",
    "ProjectRef",
    "SubmitResult",
    "check_gpus",
    "clean_idempotency_key",
    "clean_kind",
    "clean_name",
    "clean_request",
    "clean_spec",
    "fingerprint_of",
    "idempotency_keys_prune",
    "job_cancel",
    "job_submit",
    "resolve_project",
]
