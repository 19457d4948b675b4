"""Governed sbatch: jobs sbatch'd to a governed Slurm partition become Allot jobs.

`deploy/slurm/job_submit.lua` holds and tags them; each cycle of a Slurm cluster then

1. adopts the held, tagged jobs it has not answered yet (`governed_adopt`): the Slurm
   account is the project (its slug, `scheduler.services.slurm.project_accounts`), the
   Slurm user the Allot user of that name; GPUs, `--time-min` (else the cluster's
   `sbatch_min_runtime_s` option, default 1 h, never above the cluster's cap),
   `--requeue` (resumable), the name and the submit time go through `job_submit`, the
   one place a submission is checked (an array is one Allot array). The job(s) and a
   `SlurmAdoption` row per Slurm id are written in one transaction, and the row is
   unique: a worker killed anywhere adopts nothing twice and loses nothing (the next
   cycle finds the job still held and unanswered). What cannot be adopted is recorded
   refused and, once that is committed, cancelled in Slurm with the reason in its
   comment. At most MAX_ADOPT_PER_CYCLE jobs per cycle, oldest first.
2. keeps Slurm in step (`governed_sync`): the comment of a waiting job carries its queue
   position, reason and ETA (written when they change, all of a cycle's with one
   scontrol); a job cancelled in Slurm
   (`scancel` by its owner) is cancelled in Allot; one Slurm no longer knows is
   cancelled as lost; one Allot ended while Slurm holds it is cancelled in Slurm.

Starts and stops go through the adapter like any attempt (`SlurmAdapter.start` releases
the adopted Slurm job on Allot's hosts, a stop requeues it held when resumable).
"""

from __future__ import annotations

import datetime as dt
import logging
from dataclasses import dataclass, field
from typing import Any

from django.contrib.auth import get_user_model
from django.db import connection, transaction

from config.errors import ApplicationError
from scheduler.adapters.slurm.adapter import SLURM_JOB_KEY
from scheduler.adapters.slurm.governed import (
    GovernedJob,
    comment_news,
    refused_comment,
    waiting_comment,
)
from scheduler.models import TERMINAL_STATES, Cluster, Job, JobState, SlurmAdoption
from scheduler.selectors.eta import cached_etas
from scheduler.selectors.queue import iter_entries, queue_snapshot
from scheduler.services.jobs import job_submit
from scheduler.services.slurm import project_accounts
from scheduler.services.transitions import job_transition

log = logging.getLogger(__name__)

DEFAULT_MIN_RUNTIME_S = 3600
# jobs adopted per cycle at most (~16 ms each on the loaded 2-core machine)
MAX_ADOPT_PER_CYCLE = 250
# comments written per cycle at most, in one scontrol (0.4-3 ms each on the shared
# 2-core machine): as many as a cycle adopts, so each new job is answered in its cycle
MAX_COMMENT_WRITES = MAX_ADOPT_PER_CYCLE
ENDED_IN_SLURM = {"CANCELLED", "COMPLETED", "FAILED", "TIMEOUT", "NODE_FAIL", "PREEMPTED"}


class Refused(Exception):
    """A governed job Allot cannot adopt (the message is the reason)."""


@dataclass
class AdoptionCounts:
    adopted: int = 0
    refused: int = 0
    comments: int = 0
    cancelled: int = 0
    notes: list[str] = field(default_factory=list)


def governed_adopt(*, cluster: Cluster, adapter: Any, now: dt.datetime) -> AdoptionCounts:
    """Adopt or refuse every held, tagged job the adapter's last read found."""
    counts = AdoptionCounts()
    candidates = adapter.governed_jobs()
    if not candidates:
        return counts
    known = dict(
        SlurmAdoption.objects.filter(
            cluster=cluster, slurm_job_id__in=[i for c in candidates for i in c.slurm_ids]
        ).values_list("slurm_job_id", "refused")
    )
    accounts = project_accounts()
    users = {
        u.get_username(): u
        for u in get_user_model().objects.filter(username__in={c.user for c in candidates})
    }
    todo = _batch([c for c in candidates if not any(i in known for i in c.slurm_ids)])
    refusals: list[tuple[GovernedJob, str]] = []
    with transaction.atomic():  # one commit for the batch
        for candidate in todo:
            try:
                jobs = _adopt(cluster, candidate, accounts, users, now)
            except (Refused, ApplicationError) as exc:
                reason = str(exc) or type(exc).__name__
                _record_refusal(cluster, candidate, reason, now)
                refusals.append((candidate, reason))
                continue
            counts.adopted += len(jobs)
    for candidate, reason in refusals:  # Slurm is told once Allot's record is committed
        counts.refused += 1
        # the cycle's record (read by every participant) names the job only: its user,
        # account and reason are for those `permissions.readable_sbatch_refusals` lets in
        counts.notes.append(f"sbatch job {_target(candidate)} refused (see the cluster's refusals)")
        _tell(adapter.refuse, _target(candidate), refused_comment(reason))
    return counts


def _batch(candidates: list[GovernedJob]) -> list[GovernedJob]:
    """The oldest candidates up to MAX_ADOPT_PER_CYCLE jobs (at least one record): a
    burst of sbatch is adopted over a few cycles, each of them short."""
    out: list[GovernedJob] = []
    jobs = 0
    for candidate in candidates:
        if out and jobs + len(candidate.slurm_ids) > MAX_ADOPT_PER_CYCLE:
            break
        out.append(candidate)
        jobs += len(candidate.slurm_ids)
    return out


def _target(candidate: GovernedJob) -> str:
    """The Slurm id that names the whole record (an array: its array job id)."""
    first = candidate.slurm_ids[0]
    return first.split("_", 1)[0] if candidate.is_array else first


def _tell(action: Any, slurm_id: str, comment: str) -> None:
    """Write Allot's answer to Slurm; a failure is repeated by a later cycle."""
    try:
        action(slurm_id, comment)
    except Exception as exc:
        log.warning("could not write Allot's answer to Slurm job %s: %s", slurm_id, exc)


def _adopt(
    cluster: Cluster,
    candidate: GovernedJob,
    accounts: dict[str, list[str]],
    users: dict[str, Any],
    now: dt.datetime,
) -> list[Job]:
    """The Allot job(s) of one held record and their adoption rows (in the caller's
    transaction; `job_submit` checks everything before it writes, so a refusal writes
    nothing)."""
    user = users.get(candidate.user)
    if user is None:
        raise Refused(f"Slurm user '{candidate.user}' has no Allot account of that name")
    paths = accounts.get(candidate.account, [])
    if len(paths) != 1:
        raise Refused(
            f"account '{candidate.account}' is no Allot project"
            if not paths
            else f"account '{candidate.account}' names {len(paths)} projects: {', '.join(paths)}"
        )
    if candidate.gpus <= 0:
        raise Refused("no GPUs asked for: use --gres=gpu:N or --gpus=N")
    min_runtime_s = candidate.time_min_s
    if min_runtime_s is None:
        option = (cluster.adapter_options or {}).get("sbatch_min_runtime_s")
        default = DEFAULT_MIN_RUNTIME_S if option is None else int(option)
        min_runtime_s = min(default, cluster.max_min_runtime_s)
    # in governed_adopt's transaction: the job(s) and their rows commit together
    result = job_submit(
        actor=user,
        project=paths[0],
        cluster=cluster.pk,
        name=candidate.name,
        gpus=candidate.gpus,
        min_runtime_s=min_runtime_s,
        resumable=candidate.resumable,
        array=len(candidate.slurm_ids),
        now=min(candidate.submitted_at or now, now),
        wake_cycle=False,  # this is a cycle: it plans the job next
        adopted=True,  # its batch script is Slurm's already: no command of ours
    )
    for job, slurm_id in zip(result.jobs, candidate.slurm_ids, strict=True):
        job.spec = {SLURM_JOB_KEY: slurm_id}
        Job.objects.filter(pk=job.pk).update(spec=job.spec)
    SlurmAdoption.objects.bulk_create(
        SlurmAdoption(
            cluster=cluster,
            slurm_job_id=slurm_id,
            job=job,
            slurm_user=candidate.user,
            account=candidate.account,
            at=now,
        )
        for job, slurm_id in zip(result.jobs, candidate.slurm_ids, strict=True)
    )
    return result.jobs


def _record_refusal(
    cluster: Cluster, candidate: GovernedJob, reason: str, now: dt.datetime
) -> None:
    SlurmAdoption.objects.bulk_create(
        (
            SlurmAdoption(
                cluster=cluster,
                slurm_job_id=slurm_id,
                slurm_user=candidate.user[:150],
                account=candidate.account[:150],
                at=now,
                refused=reason[:500],
            )
            for slurm_id in candidate.slurm_ids
        ),
        ignore_conflicts=True,
    )


# ------------------------------------------------------------------------------ sync


def governed_sync(*, cluster: Cluster, adapter: Any, now: dt.datetime) -> AdoptionCounts:
    """Keep Slurm and Allot in step for every open adoption (see the module docstring);
    waiting jobs' changed comments are written with one scontrol, at most
    MAX_COMMENT_WRITES per cycle: first those of jobs that have no answer yet, then
    front of the queue first (every position behind a start changes)."""
    counts = AdoptionCounts()
    rows = list(
        SlurmAdoption.objects.filter(cluster=cluster, open=True)
        .select_related("job")
        .only("slurm_job_id", "refused", "comment", "job", "job__state")
    )
    if not rows:
        return counts
    records = adapter.governed_records()
    answers = _queue_answers(cluster)
    closed: list[int] = []
    waiting: list[SlurmAdoption] = []
    for row in rows:
        record = records.get(row.slurm_job_id)
        job = row.job
        if job is None:  # refused: open until Slurm has cancelled it
            if record is not None and record.state == "PENDING":
                _tell(adapter.refuse, row.slurm_job_id, refused_comment(row.refused))
            else:
                closed.append(row.pk)
        elif job.state in TERMINAL_STATES:
            if record is not None and record.state == "PENDING":
                _tell(lambda sid, _c: adapter.cancel_governed(sid), row.slurm_job_id, "")
            else:
                closed.append(row.pk)
        elif job.state == JobState.PENDING:
            if record is None or record.state in ENDED_IN_SLURM:
                _cancel_pending(job, row, record is None, now)
                counts.cancelled += 1
            elif record.held:
                waiting.append(row)
    waiting.sort(key=lambda r: (bool(r.comment), answers.get(r.job_id, (1 << 30,))[0]))
    counts.comments = _write_answers(adapter, _changed_answers(waiting, answers, now))
    if closed:
        SlurmAdoption.objects.filter(pk__in=closed).update(open=False)
    return counts


def _queue_answers(cluster: Cluster) -> dict[int, tuple[int, str, str]]:
    """{job id: (queue position, reason, ETA)} from the cluster's stored queue."""
    snapshot = queue_snapshot(cluster_id=cluster.pk)
    cached = cached_etas(cluster.pk)
    etas = cached[2] if cached else {}
    out: dict[int, tuple[int, str, str]] = {}
    for entry in iter_entries(snapshot.entries if snapshot else {}):
        eta = (etas.get(str(entry["job"])) or etas.get(entry["job"]) or {}).get("start") or ""
        out[int(entry["job"])] = (entry["position"], entry["reason"], eta[:16].replace("T", " "))
    return out


def _changed_answers(
    rows: list[SlurmAdoption], answers: dict[int, tuple[int, str, str]], now: dt.datetime
) -> dict[str, tuple[SlurmAdoption, str]]:
    """{Slurm id: (row, answer)} of the first MAX_COMMENT_WRITES rows whose answer tells
    the job's owner something the comment last written does not (`comment_news`: a
    share or an ETA that only drifted is not rewritten)."""
    out: dict[str, tuple[SlurmAdoption, str]] = {}
    for row in rows:
        if len(out) >= MAX_COMMENT_WRITES:
            break
        position, reason, eta = answers.get(row.job_id, (None, "waiting for the next cycle", ""))
        comment = waiting_comment(row.job_id, position, reason, eta)
        if comment_news(row.comment, comment, now):
            out[row.slurm_job_id] = (row, comment)
    return out


def _write_answers(adapter: Any, changed: dict[str, tuple[SlurmAdoption, str]]) -> int:
    """Write the answers in Slurm in one batch and record those it took (a job Slurm no
    longer knows counts as told: the next sync cancels it); a failed one is written
    again by a later cycle. The number recorded."""
    if not changed:
        return 0
    try:
        result = adapter.annotate({slurm_id: c for slurm_id, (_, c) in changed.items()})
    except Exception as exc:
        log.warning("could not write the comments of %d Slurm jobs: %s", len(changed), exc)
        return 0
    if result.failed:
        first = next(iter(result.failed.items()))
        log.warning(
            "could not write the comments of %d Slurm jobs (job %s: %s)",
            len(result.failed),
            *first,
        )
    told = [changed[slurm_id] for slurm_id in (*result.written, *result.gone)]
    _record_comments([(row.pk, comment) for row, comment in told])
    return len(told)


# one statement for a cycle's comments (bulk_update's CASE took ~0.5 ms a row)
_RECORD_COMMENTS_SQL = (
    "UPDATE {table} AS a SET comment = v.comment"
    " FROM unnest(%s::bigint[], %s::text[]) AS v(id, comment) WHERE a.id = v.id"
)


def _record_comments(comments: list[tuple[int, str]]) -> None:
    """Store the comments [(row pk, comment)] Slurm took."""
    if not comments:
        return
    with connection.cursor() as cursor:
        cursor.execute(
            _RECORD_COMMENTS_SQL.format(table=SlurmAdoption._meta.db_table),
            [[pk for pk, _ in comments], [comment for _, comment in comments]],
        )


def _cancel_pending(job: Job, row: SlurmAdoption, lost: bool, now: dt.datetime) -> None:
    """A waiting adopted job whose Slurm job was cancelled (`scancel`) or forgotten."""
    with transaction.atomic():
        locked = Job.objects.select_for_update().get(pk=job.pk)
        if locked.state != JobState.PENDING:
            return
        reason = (
            f"lost: Slurm no longer knows its sbatch job {row.slurm_job_id}"
            if lost
            else f"cancelled in Slurm (scancel of sbatch job {row.slurm_job_id})"
        )
        job_transition(
            job=locked,
            to_state=JobState.CANCELLED,
            reason=reason,
            reason_code="cancelled",
            at=now,
            actor=None,
        )
        SlurmAdoption.objects.filter(pk=row.pk).update(open=False)
