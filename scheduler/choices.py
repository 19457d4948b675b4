"""The value sets of the scheduler's models (adapter kinds, host health, job and attempt
states, how an attempt ended, a preview's state) and the time units of their defaults.

They live apart from `scheduler.models`, which re-exports every name here, so that the
models module stays within the module size limit; import them from `scheduler.models`.
"""

from __future__ import annotations

from django.db import models

HOUR_S = 3600
DAY_S = 86400
# A cluster's reservation admission (`Cluster.reservation_admit_min`), in minutes: by
# default the engine's (`Policy.reservation_admit_s`, 1 h), at most a day.
RESERVATION_ADMIT_DEFAULT_MIN = 60
RESERVATION_ADMIT_MAX_MIN = 24 * 60


class AdapterKind(models.TextChoices):
    SIMULATED = "simulated", "Simulated"
    SLURM = "slurm", "Slurm"


# The adapter kinds that run a job's `spec.command` (Slurm, in a batch script): a job
# there needs one. A simulated job only runs for its duration.
RUNS_COMMANDS = frozenset({AdapterKind.SLURM.value})


class HostHealth(models.TextChoices):
    HEALTHY = "healthy", "Healthy"
    DRAINING = "draining", "Draining"  # takes no new work; running jobs stop after protection
    DOWN = "down", "Down"  # unreachable or failed (reported by the adapter)


class JobKind(models.TextChoices):
    DEBUG = "debug", "Debug"
    TRAINING = "training", "Training"
    INTERACTIVE = "interactive", "Interactive"
    INFERENCE = "inference", "Inference"
    BATCH = "batch", "Batch"
    SWEEP = "sweep", "Sweep"


class JobState(models.TextChoices):
    PENDING = "pending", "Pending"
    STARTING = "starting", "Starting"
    RUNNING = "running", "Running"
    STOPPING = "stopping", "Stopping"
    SUCCEEDED = "succeeded", "Succeeded"
    FAILED = "failed", "Failed"
    CANCELLED = "cancelled", "Cancelled"
    PREEMPTED = "preempted", "Preempted"  # stopped and not resumable: ends here


TERMINAL_STATES = frozenset(
    {JobState.SUCCEEDED, JobState.FAILED, JobState.CANCELLED, JobState.PREEMPTED}
)
# States in which a job holds (or may hold) GPUs on the cluster: it has an open attempt.
ACTIVE_STATES = frozenset({JobState.STARTING, JobState.RUNNING, JobState.STOPPING})


class AttemptState(models.TextChoices):
    STARTING = "starting", "Starting"  # decided by a cycle; the adapter may not have it yet
    RUNNING = "running", "Running"  # the adapter reported it running
    STOPPING = "stopping", "Stopping"  # a graceful stop was sent; GPUs still held
    ENDED = "ended", "Ended"  # the adapter reported it gone: GPUs are free


class AttemptEnd(models.TextChoices):
    SUCCEEDED = "succeeded", "Finished successfully"
    FAILED = "failed", "Failed"
    PREEMPTED = "preempted", "Preempted"
    DRAINED = "drained", "Drained"
    CANCELLED = "cancelled", "Cancelled"
    LOST = "lost", "Lost with its host or outside Allot"
    START_FAILED = "start_failed", "Could not be started"
    MIGRATED = "migrated", "Moved to other hosts"  # consolidation: scheduler.cycle.moves


class PreviewState(models.TextChoices):
    QUEUED = "queued", "queued"
    RUNNING = "running", "running"
    DONE = "done", "done"
    FAILED = "failed", "failed"
