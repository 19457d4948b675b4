"""Clusters, hosts, jobs, their attempts and events, and the records of scheduling cycles.

The live data flow (docs/architecture.md): a job is stored PENDING by `scheduler.services`;
a cycle per cluster reconciles with the cluster adapter, asks the pure engine for a
plan and applies it. Every run of a job is an `Attempt` with an id stamped on the
cluster's job (adopt-before-retry); every state change is an append-only `JobEvent`.
"""

from __future__ import annotations

from django.conf import settings
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models
from django.utils import timezone

from budgets.models import APPEND_ONLY

# The models' value sets are scheduler.choices's; import them from here.
from scheduler.choices import ACTIVE_STATES as ACTIVE_STATES
from scheduler.choices import (
    DAY_S,
    HOUR_S,
    RESERVATION_ADMIT_DEFAULT_MIN,
    RESERVATION_ADMIT_MAX_MIN,
    AdapterKind,
    AttemptEnd,
    AttemptState,
    HostHealth,
    JobKind,
    JobState,
    PreviewState,
)
from scheduler.choices import RUNS_COMMANDS as RUNS_COMMANDS
from scheduler.choices import TERMINAL_STATES as TERMINAL_STATES


class Cluster(models.Model):
    """A pool of hosts run through one cluster adapter, with its scheduling policy.

    `host_count` x `gpus_per_host` is the declared shape (the hosts themselves are
    `Host` rows, kept in step with the adapter by each cycle's reconcile)."""

    name = models.CharField(max_length=100, unique=True)
    host_count = models.PositiveIntegerField(validators=[MinValueValidator(1)])
    gpus_per_host = models.PositiveIntegerField(default=8, validators=[MinValueValidator(1)])
    adapter = models.CharField(
        max_length=20, choices=AdapterKind.choices, default=AdapterKind.SIMULATED
    )
    # The simulated cluster's base URL; Slurm: options e.g. {"slurm_conf": "/etc/slurm/..."}
    adapter_url = models.CharField(max_length=500, blank=True)
    adapter_options = models.JSONField(default=dict, blank=True)
    # Policy (SPEC 1.3-1.4): cycle period, stop grace, min-runtime cap, usage window.
    cycle_s = models.PositiveIntegerField(default=10, validators=[MinValueValidator(1)])
    grace_s = models.PositiveIntegerField(default=30)
    max_min_runtime_s = models.PositiveIntegerField(default=8 * HOUR_S)
    lookback_s = models.PositiveIntegerField(default=7 * DAY_S, validators=[MinValueValidator(1)])
    half_life_s = models.PositiveIntegerField(null=True, blank=True)
    # The short-job reserve (engine `Policy.short_reserve_hosts`; 0: none).
    short_reserve_hosts = models.PositiveIntegerField(
        default=0,
        help_text="Hosts held for jobs with a short minimum runtime (and unallocated "
        "backfill), so a quick debug job starts within minutes for any team; 0: none.",
    )
    # The adaptive short-job reserve (engine `Policy.short_reserve_auto`).
    short_reserve_auto = models.BooleanField(
        default=True,
        help_text="Hold hosts for short jobs as the short work observed needs them, giving "
        "way to the first job in line after 30 minutes; off: only short_reserve_hosts.",
    )
    share_floor = models.BooleanField(  # engine Policy.share_floor
        default=True, help_text="Under-served projects keep their oldest jobs up to their share."
    )
    consolidate = models.BooleanField(  # engine Policy.consolidate (scheduler.cycle.moves)
        default=True, help_text="Move a few jobs past their protection to free a block."
    )
    # engine Policy.reservation_admit_s = this x 60 (`policy_for_cluster`); 0: off
    reservation_admit_min = models.PositiveIntegerField(
        default=RESERVATION_ADMIT_DEFAULT_MIN,
        validators=[MaxValueValidator(RESERVATION_ADMIT_MAX_MIN)],
        help_text="Reservation admission: hosts held for a job waiting for work it may not "
        "preempt admit allocated jobs it may preempt whose protection ends within this many "
        "minutes (0: off, only unallocated backfill).",
    )
    short_job_max_s = models.PositiveIntegerField(
        default=15 * 60,
        validators=[MinValueValidator(1)],
        help_text="The longest minimum runtime (seconds) a job may declare to start on "
        "the short-job reserve.",
    )
    # Idle-GPU reclaim (engine `Policy.idle_reclaim`): a running job past its minimum
    # runtime whose GPUs stay below `idle_threshold_pct` for `idle_reclaim_after_s` is
    # the first candidate for preemption; `idle_notify_owner` tells its owner.
    idle_reclaim = models.BooleanField(
        default=False,
        help_text="Reclaim idle GPUs: a job past its minimum runtime whose GPUs stay idle "
        "is preempted first when GPUs are needed.",
    )
    idle_threshold_pct = models.PositiveIntegerField(
        default=5, help_text="GPU utilization (%) below which a job's GPUs count as idle."
    )
    idle_reclaim_after_s = models.PositiveIntegerField(
        default=30 * 60,
        validators=[MinValueValidator(60)],
        help_text="How long (seconds) a job's GPUs must stay idle before they are reclaimed.",
    )
    idle_notify_owner = models.BooleanField(
        default=True, help_text="Tell a job's owner when its idle GPUs are reclaimed."
    )
    created_at = models.DateTimeField(default=timezone.now)
    operators = models.ManyToManyField(
        settings.AUTH_USER_MODEL,
        blank=True,
        related_name="operated_clusters",
        help_text="Users who may drain and resume this cluster's hosts (staff always may).",
    )

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name

    @property
    def gpu_capacity(self) -> int:
        return self.host_count * self.gpus_per_host

    @property
    def clock_speed(self) -> float:
        """Cluster seconds per wall second: a simulated cluster's `speed` (the demo's
        runs 60x), 1 for a real cluster. Forecasts from history count in this clock."""
        if self.adapter != AdapterKind.SIMULATED:
            return 1.0
        try:
            speed = float(self.adapter_options.get("speed", 1.0))
        except (TypeError, ValueError):
            return 1.0
        return speed if speed > 0 else 1.0


class AuditEvent(models.Model):
    """What every audited change of the live service keeps: when, why and who (the
    user, and their name as it was then; no user: the system). Append-only."""

    at = models.DateTimeField()
    reason = models.CharField(max_length=500)
    actor = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    actor_name = models.CharField(max_length=150, blank=True)

    class Meta:
        abstract = True
        ordering = ["-at", "-id"]
        triggers = [APPEND_ONLY]


class ClusterPolicyEvent(AuditEvent):
    """An audited change of a cluster's policy: which fields changed from what to what.
    `changes` is `{field: [before, after]}` for the fields that changed
    (`scheduler.services.clusters.cluster_policy_update`)."""

    cluster = models.ForeignKey(Cluster, on_delete=models.PROTECT, related_name="policy_events")
    changes = models.JSONField()

    def __str__(self) -> str:
        return f"{self.cluster}: {', '.join(self.changes)}"


class Host(models.Model):
    """A machine of a cluster. Only HEALTHY hosts take new work (SPEC 1.4 drain)."""

    cluster = models.ForeignKey(Cluster, on_delete=models.CASCADE, related_name="hosts")
    name = models.CharField(max_length=200)
    gpus = models.PositiveIntegerField(validators=[MinValueValidator(1)])
    health = models.CharField(max_length=20, choices=HostHealth.choices, default=HostHealth.HEALTHY)
    health_reason = models.CharField(max_length=500, blank=True)
    health_changed_at = models.DateTimeField(null=True, blank=True)
    # When the drain emptied the host (the engine reported it ready for repair).
    ready_for_repair_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["cluster", "name"]
        constraints = [
            models.UniqueConstraint(fields=["cluster", "name"], name="host_name_unique_in_cluster")
        ]

    def __str__(self) -> str:
        return f"{self.cluster}/{self.name}"


class HostEvent(AuditEvent):
    """An audited health change of a host: a drain asked by an operator, its end, or a
    state the adapter reported."""

    host = models.ForeignKey(Host, on_delete=models.PROTECT, related_name="events")
    from_health = models.CharField(max_length=20, choices=HostHealth.choices)
    to_health = models.CharField(max_length=20, choices=HostHealth.choices)

    def __str__(self) -> str:
        return f"{self.host}: {self.from_health} -> {self.to_health}"


class Job(models.Model):
    """A workload submitted to a project (a leaf of the budget tree) on a cluster.

    `min_runtime_s` > 0 makes it allocated work (charged to the project, protected for
    that long); 0 makes it unallocated (free, preemptible at any time). `priority`
    orders it only among its project's jobs. `duration_s` is a hint the simulated
    cluster runs the job for; real clusters ignore it. `submitted_at` is the original
    submission; `queued_at` the last time it entered PENDING (its current wait)."""

    cluster = models.ForeignKey(Cluster, on_delete=models.PROTECT, related_name="jobs")
    project = models.ForeignKey("budgets.BudgetNode", on_delete=models.PROTECT, related_name="jobs")
    submitter = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="jobs"
    )
    name = models.CharField(max_length=200)
    gpus = models.PositiveIntegerField(validators=[MinValueValidator(1)])
    min_runtime_s = models.PositiveIntegerField(default=0)
    resumable = models.BooleanField(default=False)
    priority = models.IntegerField(default=0)
    kind = models.CharField(max_length=20, choices=JobKind.choices, default=JobKind.TRAINING)
    spec = models.JSONField(default=dict, blank=True)  # image, command, env
    duration_s = models.PositiveIntegerField(null=True, blank=True)
    state = models.CharField(max_length=20, choices=JobState.choices, default=JobState.PENDING)
    state_reason = models.CharField(max_length=500, blank=True)
    submitted_at = models.DateTimeField()
    queued_at = models.DateTimeField()
    first_started_at = models.DateTimeField(null=True, blank=True)
    ended_at = models.DateTimeField(null=True, blank=True)
    # Work saved at checkpoints by earlier attempts (resumable jobs), in seconds: a
    # simulated run lasts duration_s - progress_s.
    progress_s = models.FloatField(default=0.0)
    attempt_count = models.PositiveIntegerField(default=0)
    # `allot submit --array N` / `"array": N`: the jobs of one request share an array id.
    array_id = models.UUIDField(null=True, blank=True, db_index=True)
    array_index = models.PositiveIntegerField(null=True, blank=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["-id"]
        indexes = [
            models.Index(fields=["cluster", "state"], name="job_cluster_state"),
            models.Index(fields=["project", "state"], name="job_project_state"),
            models.Index(fields=["submitter", "-id"], name="job_submitter_newest"),
            # the ETA's expected arrivals: the cluster's submissions of the last week
            models.Index(fields=["cluster", "submitted_at"], name="job_cluster_submitted"),
        ]
        constraints = [
            models.CheckConstraint(condition=models.Q(gpus__gte=1), name="job_gpus_positive"),
        ]

    def __str__(self) -> str:
        return f"job {self.pk} {self.name}"

    @property
    def allocated(self) -> bool:
        """Charged to the project's budget and protected for its minimum runtime."""
        return self.min_runtime_s > 0


class Attempt(models.Model):
    """One run of a job on the cluster. `attempt_id` (unique) is stamped on the
    cluster's job, so a start that timed out is looked up and adopted, never repeated.

    `placements` is what the cluster actually gave: [{"host": name, "gpu_indices": [..]}].
    `started_at`..`ended_at` is the occupancy interval the ledger charges (to the
    project's budget when `allocated`)."""

    job = models.ForeignKey(Job, on_delete=models.PROTECT, related_name="attempts")
    number = models.PositiveIntegerField()
    attempt_id = models.CharField(max_length=100, unique=True)
    cluster = models.ForeignKey(Cluster, on_delete=models.PROTECT, related_name="attempts")
    # Denormalised from the job so the ledger reads intervals without a join.
    project = models.ForeignKey(
        "budgets.BudgetNode", on_delete=models.PROTECT, related_name="attempts"
    )
    gpus = models.PositiveIntegerField()
    placements = models.JSONField(default=list)
    allocated = models.BooleanField()
    state = models.CharField(
        max_length=20, choices=AttemptState.choices, default=AttemptState.STARTING
    )
    external_id = models.CharField(max_length=100, blank=True)  # e.g. the Slurm job id
    created_at = models.DateTimeField()  # when a cycle decided to start it
    started_at = models.DateTimeField(null=True, blank=True)
    stop_requested_at = models.DateTimeField(null=True, blank=True)
    stop_deadline = models.DateTimeField(null=True, blank=True)  # end of the grace period
    # Why the stop was asked (what the job becomes once the adapter reports the end).
    stop_intent = models.CharField(max_length=20, choices=AttemptEnd.choices, blank=True)
    ended_at = models.DateTimeField(null=True, blank=True)
    end_reason = models.CharField(max_length=20, choices=AttemptEnd.choices, blank=True)
    end_detail = models.CharField(max_length=1000, blank=True)
    preempted_by = models.ForeignKey(
        Job, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    moved_to = models.JSONField(default=list, blank=True)  # a move's target (cycle.moves)
    for_block = models.JSONField(default=list, blank=True)  # preempted_by's planned GPUs
    protected_until = models.DateTimeField(null=True, blank=True)  # set: after a move
    started_by_cycle = models.ForeignKey(
        "CycleRecord", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )

    class Meta:
        ordering = ["job", "number"]
        constraints = [
            models.UniqueConstraint(fields=["job", "number"], name="attempt_number_unique"),
            # At most one attempt per job holds GPUs at a time: a new attempt starts only
            # after the adapter has seen the previous one end.
            models.UniqueConstraint(
                fields=["job"],
                condition=~models.Q(state="ended"),
                name="one_open_attempt_per_job",
            ),
        ]
        indexes = [
            models.Index(fields=["cluster", "state"], name="attempt_cluster_state"),
            models.Index(fields=["cluster", "ended_at"], name="attempt_cluster_ended"),
        ]

    def __str__(self) -> str:
        return self.attempt_id

    @property
    def host_names(self) -> list[str]:
        return [p["host"] for p in self.placements]

    @property
    def end_label(self) -> str:
        """How the run ended, or why it is being stopped, in words ("Moved to other
        hosts"): the job page's End, the API's `end_label`, `allot show`'s END."""
        code = self.end_reason or self.stop_intent
        return str(AttemptEnd(code).label) if code in AttemptEnd.values else code


class JobEvent(models.Model):
    """One state transition of a job (append-only). A preemption names the job that
    took the GPUs, its project and the rule that allowed it."""

    job = models.ForeignKey(Job, on_delete=models.PROTECT, related_name="events")
    at = models.DateTimeField()
    from_state = models.CharField(max_length=20, choices=JobState.choices, blank=True)
    to_state = models.CharField(max_length=20, choices=JobState.choices)
    reason = models.CharField(max_length=1000)
    reason_code = models.CharField(max_length=40, blank=True)
    attempt = models.ForeignKey(
        Attempt, null=True, blank=True, on_delete=models.PROTECT, related_name="events"
    )
    cycle = models.ForeignKey(
        "CycleRecord", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    actor = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    actor_name = models.CharField(max_length=150, blank=True)
    preempting_job = models.ForeignKey(
        Job, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    preempting_project = models.ForeignKey(
        "budgets.BudgetNode", null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    rule = models.CharField(max_length=40, blank=True)

    class Meta:
        ordering = ["at", "id"]
        triggers = [APPEND_ONLY]
        indexes = [models.Index(fields=["job", "at"], name="jobevent_job_at")]

    def __str__(self) -> str:
        return f"job {self.job_id}: {self.from_state or '-'} -> {self.to_state}"


class CycleRecord(models.Model):
    """One scheduling cycle of a cluster (kept 30 days)."""

    cluster = models.ForeignKey(Cluster, on_delete=models.CASCADE, related_name="cycles")
    started_at = models.DateTimeField()
    duration_ms = models.FloatField(null=True, blank=True)
    pending = models.PositiveIntegerField(default=0)
    running = models.PositiveIntegerField(default=0)
    starts = models.PositiveIntegerField(default=0)
    stops = models.PositiveIntegerField(default=0)
    reservations = models.PositiveIntegerField(default=0)
    reconciled = models.PositiveIntegerField(default=0)  # attempts whose state the adapter changed
    # The short-job reserve in this cycle (engine `reserve_effect`): GPUs of the hosts it
    # held, those that waiting longer allocated work could not use because of it, and
    # the short jobs it started while that work waited.
    short_reserve_hosts = models.JSONField(default=list, blank=True)  # host names
    short_reserve_gpus = models.PositiveIntegerField(default=0)
    short_reserve_unused_gpus = models.PositiveIntegerField(default=0)
    short_reserve_starts = models.PositiveIntegerField(default=0)
    errors = models.JSONField(default=list, blank=True)  # ["adapter unreachable: ..."]

    class Meta:
        ordering = ["-started_at", "-id"]
        indexes = [models.Index(fields=["cluster", "-started_at"], name="cycle_cluster_newest")]

    def __str__(self) -> str:
        return f"cycle {self.pk} of {self.cluster_id} at {self.started_at:%H:%M:%S}"


class QueueSnapshot(models.Model):
    """The explained queue of a cluster's last successful cycle (one row per cluster).

    `entries` is the engine's queue in start order, stored in columns (10,000 objects
    of JSON per cycle would cost more than the cycle): {"job": "id,id,..", "project":
    "node id,..", "project_position", "project_rank", "metric", "reason": "index into
    reasons,..", "reasons": [texts]}, each column comma-separated text; the position is
    the index + 1. Read it with `scheduler.selectors.queue`, which gives one dict per
    job: {"job", "project", "position", "project_position", "project_rank", "metric",
    "reason"}. `project_order` is [[project node id, factor], ...]."""

    cluster = models.OneToOneField(
        Cluster, on_delete=models.CASCADE, primary_key=True, related_name="queue_snapshot"
    )
    cycle = models.ForeignKey(CycleRecord, null=True, on_delete=models.SET_NULL, related_name="+")
    computed_at = models.DateTimeField()
    entries = models.JSONField(default=list)
    project_order = models.JSONField(default=list)

    def __str__(self) -> str:
        return f"queue of {self.cluster_id} at {self.computed_at:%H:%M:%S}"


class IdempotencyKey(models.Model):
    """An `Idempotency-Key` of a submission (IETF httpapi draft): a retry with the same
    key and body returns the first response; the same key with another body is refused.
    Kept at least 24 h."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    key = models.CharField(max_length=255)
    fingerprint = models.CharField(max_length=64)  # sha256 of the canonical request body
    created_at = models.DateTimeField()
    job_ids = models.JSONField(default=list)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["user", "key"], name="idempotency_key_unique")
        ]
        indexes = [models.Index(fields=["created_at"], name="idempotency_created")]

    def __str__(self) -> str:
        return f"{self.user_id}:{self.key}"


class Preview(models.Model):
    """A what-if preview of a weight change (SPEC 1.5): the cluster's jobs of the last
    `window_days` replayed with the current and the proposed weights of `node`'s
    children. Nothing in the tree changes; `result` holds the per-project figures."""

    requester = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="previews"
    )
    node = models.ForeignKey("budgets.BudgetNode", on_delete=models.CASCADE, related_name="+")
    cluster = models.ForeignKey(Cluster, on_delete=models.CASCADE, related_name="previews")
    weights = models.JSONField(default=list)  # [{"node": id, "weight": "2.5"}], as proposed
    window_days = models.PositiveIntegerField(default=14, validators=[MinValueValidator(1)])
    # idle-GPU reclaim in the replay with the proposed weights; null: the cluster's policy
    idle_reclaim = models.BooleanField(null=True, blank=True)
    state = models.CharField(
        max_length=20, choices=PreviewState.choices, default=PreviewState.QUEUED
    )
    progress = models.FloatField(default=0.0)  # 0..1
    result = models.JSONField(null=True, blank=True)
    error = models.CharField(max_length=1000, blank=True)
    created_at = models.DateTimeField(default=timezone.now)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        indexes = [models.Index(fields=["requester", "-created_at"], name="preview_requester")]

    def __str__(self) -> str:
        return f"preview {self.pk} of node {self.node_id} ({self.state})"


class SlurmAdoption(models.Model):
    """A job sbatch'd to a governed Slurm partition, as Allot answered it (governed
    sbatch, docs/slurm.md): adopted as `job`, or refused (`refused` says why; Allot
    cancelled it in Slurm). One row per Slurm id ("123", an array task "122_3"),
    unique per cluster, written in the transaction that creates the job: a job is
    adopted once, also when a worker dies between reading Slurm and writing here.
    `comment` is the last answer Allot wrote in the job's Slurm comment (rewritten
    only when it changes); `open` while Allot may still have to act on the Slurm job."""

    cluster = models.ForeignKey(Cluster, on_delete=models.PROTECT, related_name="slurm_adoptions")
    slurm_job_id = models.CharField(max_length=40)
    job = models.OneToOneField(
        Job, null=True, blank=True, on_delete=models.PROTECT, related_name="slurm_adoption"
    )
    slurm_user = models.CharField(max_length=150, blank=True)
    account = models.CharField(max_length=150, blank=True)
    at = models.DateTimeField()
    refused = models.CharField(max_length=500, blank=True)
    comment = models.CharField(max_length=500, blank=True)
    open = models.BooleanField(default=True)

    class Meta:
        ordering = ["-at", "-id"]
        constraints = [
            models.UniqueConstraint(
                fields=["cluster", "slurm_job_id"], name="slurm_adoption_once_per_job"
            ),
        ]
        indexes = [models.Index(fields=["cluster", "open"], name="slurm_adoption_open")]

    def __str__(self) -> str:
        what = f"job {self.job_id}" if self.job_id else f"refused: {self.refused}"
        return f"Slurm job {self.slurm_job_id}: {what}"


class ClusterMetrics(models.Model):
    """Where a cluster's GPU metrics are read (docs/concepts.md#utilization).

    With `prometheus_url` empty, a simulated cluster's own `/metrics` is scraped directly
    (the demo needs no set-up) and any other cluster has no utilization (unknown). The
    settings change through `scheduler.services.utilization.cluster_metrics_update`,
    audited as a `ClusterPolicyEvent`; `collected_until` and `last_error` are the
    collection's own bookkeeping."""

    cluster = models.OneToOneField(Cluster, on_delete=models.CASCADE, related_name="metrics")
    prometheus_url = models.CharField(max_length=500, blank=True)
    host_label = models.CharField(max_length=100, default="Hostname")
    gpu_label = models.CharField(max_length=100, default="gpu")
    selector = models.CharField(max_length=500, blank=True)  # extra label matchers
    bearer_token = models.CharField(max_length=1000, blank=True)
    collected_until = models.DateTimeField(null=True, blank=True)
    last_error = models.CharField(max_length=1000, blank=True)
    last_error_at = models.DateTimeField(null=True, blank=True)

    def __str__(self) -> str:
        return f"metrics of cluster {self.cluster_id}"


class UtilizationSample(models.Model):
    """An attempt's known GPU utilization over [start, end] (one collection): `samples`
    times with a value, their mean and highest (0-100, the mean over the attempt's GPUs
    at each time), and the seconds they stand for (`known_s`). Times without a value
    are unknown and have no row; derived data (`ledger.utilization.attribute`).
    Where the metrics publish them: the mean SM activity (0-100,
    `DCGM_FI_PROF_SM_ACTIVE`) over the `sm_active_known_s` seconds that had one, and the
    most frame-buffer memory any of its GPUs had in use (MiB, `DCGM_FI_DEV_FB_USED`);
    null where none was published (unknown, never 0)."""

    attempt = models.ForeignKey(Attempt, on_delete=models.CASCADE, related_name="utilization")
    cluster = models.ForeignKey(Cluster, on_delete=models.CASCADE, related_name="+")
    start = models.DateTimeField()
    end = models.DateTimeField()
    samples = models.PositiveIntegerField()
    mean_pct = models.FloatField()
    max_pct = models.FloatField()
    known_s = models.FloatField()
    sm_active_pct = models.FloatField(null=True, blank=True)
    sm_active_known_s = models.FloatField(default=0.0)
    memory_used_max_mib = models.FloatField(null=True, blank=True)
    # merged by `utilization_compact` (an attempt ended long ago): not merged again
    compacted = models.BooleanField(default=False)

    class Meta:
        ordering = ["attempt", "end"]
        constraints = [
            models.UniqueConstraint(fields=["attempt", "end"], name="utilization_attempt_end")
        ]
        indexes = [models.Index(fields=["cluster", "end"], name="utilization_cluster_end")]

    def __str__(self) -> str:
        return f"{self.attempt_id}@{self.end:%Y-%m-%d %H:%M:%S}: {self.mean_pct:.0f}%"
