"""Telling a job's owner what happened to their job, by e-mail once the transaction that
did it commits (Django's mail, `EMAIL_BACKEND`; a failure to send never undoes or
blocks the change). Today: their idle GPUs were reclaimed (a cluster's
`idle_notify_owner`)."""

from __future__ import annotations

from django.core.mail import send_mail
from django.db import transaction

from scheduler.models import Job


def job_idle_reclaim_notify(*, job: Job, reason: str) -> bool:
    """Queue an e-mail to the submitter of `job`, whose idle GPUs were reclaimed (the
    stop's `reason` in the engine's words). Returns whether one was queued (the owner
    has an e-mail address)."""
    owner = job.submitter
    email = owner.email if owner is not None else ""
    if not email:
        return False
    subject = f"Allot: the idle GPUs of your job {job.pk} ({job.name or 'unnamed'}) were reclaimed"
    body = (
        f"Your job {job.pk} on cluster {job.cluster.name} was preempted because its GPUs "
        f"stayed idle past its minimum runtime.\n\n{reason}\n\n"
        + (
            "It is resumable: it waits in the queue again from its last checkpoint.\n"
            if job.resumable
            else "It is not resumable: submit it again when you need it.\n"
        )
    )
    transaction.on_commit(lambda: send_mail(subject, body, None, [email], fail_silently=True))
    return True
