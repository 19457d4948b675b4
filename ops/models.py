"""What operators need the database to remember: the scheduling processes' heartbeats and
whether scheduling may run on this database (paused after a restore)."""

from __future__ import annotations

from django.db import models


class ProcessKind(models.TextChoices):
    BEAT = "beat", "Celery beat"
    WORKER = "worker", "Celery worker"


class Heartbeat(models.Model):
    """The last sign of life of a scheduling process: beat (one row) or a worker (one row
    per worker name). Written by the process itself every `ops.selectors.heartbeat_interval_s()`
    (ALLOT_HEARTBEAT_S, less when a cluster cycles faster)."""

    kind = models.CharField(max_length=20, choices=ProcessKind.choices)
    name = models.CharField(max_length=200)  # the worker's node name; "beat"
    host = models.CharField(max_length=200, blank=True)
    pid = models.PositiveIntegerField(null=True, blank=True)
    started_at = models.DateTimeField()  # when this process started beating
    # a worker's queues, comma-separated ("celery,background"); "" for beat, and for a
    # worker row written before workers said (it counts for every queue)
    queues = models.CharField(max_length=500, blank=True, default="")
    seen_at = models.DateTimeField()

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["kind", "name"], name="heartbeat_kind_name_unique")
        ]

    def __str__(self) -> str:
        return f"{self.kind} {self.name} at {self.seen_at:%H:%M:%S}"


class SchedulingGate(models.Model):
    """One row: the identity of the database it was written in, and whether scheduling
    is paused. A row read in another database (a restore, a copy, a promoted replica)
    pauses scheduling until `manage.py reconcile_restore` has reconciled every cluster
    against what it really runs (ops.services.scheduling_gate_check)."""

    database = models.CharField(max_length=200)  # system id / timeline / database oid
    paused_reason = models.CharField(max_length=500, blank=True)
    paused_at = models.DateTimeField(null=True, blank=True)
    resumed_at = models.DateTimeField(null=True, blank=True)
    resumed_by = models.CharField(max_length=150, blank=True)

    def __str__(self) -> str:
        return f"scheduling {'paused' if self.paused_reason else 'on'} ({self.database})"
