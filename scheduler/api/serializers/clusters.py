"""Clusters: the cluster, its policy (output, history and the policy input) and its
last cycle."""

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from config.api_fields import StrictInput, TextField
from scheduler.services import clusters as cluster_rules
from scheduler.services import utilization as metrics_rules

CONSOLIDATE_HELP = (
    "Consolidation: a waiting job that fits in the free GPUs in total but on no host may "
    "get a block freed by moving a few resumable jobs past their protection to other "
    "hosts, started again there once stopped (false: never)"
)
RESERVATION_ADMIT_HELP = (
    "Reservation admission (docs/concepts.md#reservation-admission): hosts held for a job "
    "waiting for work it may not preempt admit allocated jobs it may preempt whose "
    "protection ends within this many minutes (0: off, only unallocated backfill)"
)


class PolicyOutput(serializers.Serializer):
    cycle_s = serializers.IntegerField(help_text="Seconds between scheduling cycles")
    grace_s = serializers.IntegerField(help_text="Seconds a stopped job has to exit")
    max_min_runtime_s = serializers.IntegerField(
        help_text="The cap on protection: the longest minimum runtime a job may declare (seconds)"
    )
    lookback_s = serializers.IntegerField(
        help_text="The usage window (seconds) the fair-share usage is summed over"
    )
    half_life_s = serializers.IntegerField(
        allow_null=True, help_text="Usage decays with this half-life (seconds); null: no decay"
    )
    short_reserve_hosts = serializers.IntegerField(
        help_text="Short-job reserve: hosts held at least for short jobs and unallocated "
        "backfill, more while short jobs need them (0: none)"
    )
    short_reserve_auto = serializers.BooleanField(
        help_text="The adaptive short-job reserve: hosts held for short jobs as the short"
        " work observed needs them, giving way to the first job in line after "
        "30 minutes (false: only short_reserve_hosts)"
    )
    short_job_max_s = serializers.IntegerField(
        help_text="Short-job reserve: the longest minimum runtime a job may declare to "
        "start on its hosts (seconds; at most max_min_runtime_s)"
    )
    share_floor = serializers.BooleanField(
        help_text="The share floor: a project under its entitled share keeps its oldest "
        "jobs, up to that share, from the fair-share preemption of projects "
        "served more than 5 points of usage relative to entitled share better "
        "(false: Fair Tree's rank alone decides)"
    )
    consolidate = serializers.BooleanField(help_text=CONSOLIDATE_HELP)
    reservation_admit_min = serializers.IntegerField(help_text=RESERVATION_ADMIT_HELP)
    idle_reclaim = serializers.BooleanField(
        help_text="Idle-GPU reclaim: a job past its minimum runtime whose GPUs stay idle "
        "is preempted first when GPUs are needed (rule idle_reclaim)"
    )
    idle_threshold_pct = serializers.IntegerField(
        help_text="Idle-GPU reclaim: GPU utilization (%) below which a job's GPUs count as idle"
    )
    idle_reclaim_after_s = serializers.IntegerField(
        help_text="Idle-GPU reclaim: how long (seconds, 60 to 86400) a job's GPUs must "
        "stay idle before they are reclaimed"
    )
    idle_notify_owner = serializers.BooleanField(
        help_text="Whether a job's owner is told when its idle GPUs are reclaimed"
    )


class LastCycleOutput(serializers.Serializer):
    id = serializers.IntegerField()
    started_at = serializers.DateTimeField()
    duration_ms = serializers.FloatField(allow_null=True)
    starts = serializers.IntegerField(help_text="Now page figures: the cycle's starts")
    stops = serializers.IntegerField(help_text="Now page figures: the cycle's stops")
    errors = serializers.ListField(child=serializers.CharField())


class ClusterMetricsOutput(serializers.Serializer):
    """Where the cluster's GPU metrics are read (docs/concepts.md#utilization); the
    bearer token itself is never shown."""

    prometheus_url = serializers.CharField(
        allow_blank=True,
        help_text="Prometheus read for the DCGM exporter series; blank: none (a simulated "
        "cluster's own /metrics is read, any other cluster's utilization is unknown)",
    )
    host_label = serializers.CharField(help_text="The series' label naming the host")
    gpu_label = serializers.CharField(help_text="The series' label naming the GPU index")
    selector = serializers.CharField(
        allow_blank=True, help_text='Extra label matchers, e.g. cluster="a100"'
    )
    bearer_token_set = serializers.BooleanField(
        help_text="Whether a bearer token is sent to Prometheus (its value is never shown)"
    )
    collected_until = serializers.DateTimeField(
        allow_null=True, help_text="The metrics are read up to this time; null: not yet"
    )
    last_error = serializers.CharField(
        allow_blank=True, help_text="Why the last read failed; blank when it succeeded"
    )
    last_error_at = serializers.DateTimeField(allow_null=True)


class ClusterOutput(serializers.Serializer):
    id = serializers.IntegerField()
    name = serializers.CharField()
    adapter = serializers.CharField()
    hosts = serializers.IntegerField()
    gpus = serializers.IntegerField()
    healthy_gpus = serializers.IntegerField(help_text="Now page figures: GPUs of healthy hosts")
    draining_hosts = serializers.IntegerField(help_text="Now page figures: hosts draining")
    down_hosts = serializers.IntegerField(help_text="Now page figures: hosts down")
    pending_jobs = serializers.IntegerField(help_text="Now page figures: pending (waiting) jobs")
    running_jobs = serializers.IntegerField(
        help_text="Now page figures: running jobs (starting, running or stopping)"
    )
    policy = PolicyOutput()
    operators = serializers.ListField(child=serializers.CharField())
    metrics = ClusterMetricsOutput()
    last_cycle = LastCycleOutput(allow_null=True)


@extend_schema_field(
    {
        "oneOf": [
            {"type": "integer"},
            {"type": "boolean"},
            {"type": "string"},
            {"type": "array", "items": {"type": "string"}},
            {"type": "null"},
        ]
    }
)
class PolicyValueField(serializers.Field):
    """A policy field's value (a whole number, true/false or null), a metrics setting
    (text; a bearer token only as "set" or "unset"), or the operators' user names."""

    def to_representation(self, value):
        return value


class ClusterPolicyEventOutput(serializers.Serializer):
    at = serializers.DateTimeField()
    changes = serializers.DictField(
        child=serializers.ListField(child=PolicyValueField(), min_length=2, max_length=2),
        help_text="`{field: [before, after]}` for each policy field that changed; "
        "`operators` (set in the admin): the user names before and after; "
        "`metrics.<setting>` (PATCH clusters/{id}/metrics/): the metrics settings, a "
        "bearer token as `set` or `unset`",
    )
    reason = serializers.CharField()
    actor = serializers.CharField(
        allow_blank=True, source="actor_name", help_text="Who changed it (`system`: a command)"
    )


class ShortReserveOutput(serializers.Serializer):
    """The short-job reserve now and over the last 7 days (docs/concepts.md,
    short-job-reserve-cost)."""

    adaptive = serializers.BooleanField(help_text="The policy's short_reserve_auto")
    held_hosts = serializers.ListField(
        child=serializers.CharField(), help_text="Hosts the last planned cycle held for short jobs"
    )
    held_gpus = serializers.IntegerField(
        help_text="Short-job reserve: held for short jobs now, their GPUs"
    )
    reserve_cost_gpu_h = serializers.FloatField(
        help_text="Short-job reserve cost: GPU-hours of held GPUs that no short job used "
        "while longer "
        "allocated work waited, over the last window_days"
    )
    short_waits_saved = serializers.IntegerField(
        help_text="Short-job reserve, waits saved: short jobs started on held hosts while longer "
        "allocated work waited, over the last window_days"
    )
    window_days = serializers.IntegerField(help_text="The window of the two sums in days (7)")


class SbatchRefusalOutput(serializers.Serializer):
    slurm_job_id = serializers.CharField(help_text='Slurm\'s job id ("123"; an array task "122_3")')
    slurm_user = serializers.CharField(help_text="The Slurm user who submitted it")
    account = serializers.CharField(help_text="The Slurm account it named (-A)")
    at = serializers.DateTimeField(help_text="When Allot refused it")
    reason = serializers.CharField(
        help_text="Why Allot could not adopt it (also in the job's Slurm comment)"
    )


class ClusterDetailOutput(ClusterOutput):
    policy_events = ClusterPolicyEventOutput(
        many=True, help_text="The last 20 policy changes, newest first"
    )
    short_reserve = ShortReserveOutput()
    sbatch_refusals = SbatchRefusalOutput(
        many=True,
        help_text="Governed sbatch (docs/slurm.md): the last 20 jobs sbatch'd to a governed "
        "partition that Allot could not adopt and cancelled in Slurm, newest first; staff "
        "and the cluster's operators read every one, others those sbatch'd under their own "
        "user name or on the account of a project they manage",
    )


def _policy_field(name: str, help_text: str) -> serializers.Field:
    """An optional policy field of `ClusterPolicyInput`: any JSON value goes to
    `cluster_policy_update`, whose rule (`POLICY_RULES`) refuses a wrong type or range
    with a message naming the field; the schema documents that rule."""
    rule = cluster_rules.POLICY_RULES[name]
    schema: dict = (
        {"type": "boolean"}
        if rule.boolean
        else {"type": "integer", "minimum": rule.low, "maximum": rule.high}
    )
    if rule.nullable:
        schema["nullable"] = True
    field_class = extend_schema_field(schema)(
        type(f"PolicyField_{name}", (serializers.JSONField,), {})
    )
    return field_class(required=False, allow_null=rule.nullable, help_text=help_text)


class ClusterPolicyInput(StrictInput):
    """Some of the policy fields (only those sent change) and the reason; each described
    as `PolicyOutput` describes it (a test holds the two to the same words)."""

    cycle_s = _policy_field(
        "cycle_s",
        "Seconds between scheduling cycles",
    )
    grace_s = _policy_field(
        "grace_s",
        "Seconds a stopped job has to exit",
    )
    max_min_runtime_s = _policy_field(
        "max_min_runtime_s",
        "The cap on protection: the longest minimum runtime a job may declare (seconds)",
    )
    lookback_s = _policy_field(
        "lookback_s",
        "The usage window (seconds) the fair-share usage is summed over",
    )
    half_life_s = _policy_field(
        "half_life_s",
        "Usage decays with this half-life (seconds); null: no decay",
    )
    short_reserve_hosts = _policy_field(
        "short_reserve_hosts",
        "Short-job reserve: hosts held at least for short jobs and unallocated backfill, "
        "more while short jobs need them (0: none)",
    )
    short_reserve_auto = _policy_field(
        "short_reserve_auto",
        "The adaptive short-job reserve: hosts held for short jobs as the short work "
        "observed needs them, giving way to the first job in line after 30 minutes "
        "(false: only short_reserve_hosts)",
    )
    short_job_max_s = _policy_field(
        "short_job_max_s",
        "Short-job reserve: the longest minimum runtime a job may declare to start on its"
        " hosts (seconds; at most max_min_runtime_s)",
    )
    share_floor = _policy_field(
        "share_floor",
        "The share floor: a project under its entitled share keeps its oldest jobs, up to"
        " that share, from the fair-share preemption of projects served more than 5 "
        "points of usage relative to entitled share better (false: Fair Tree's rank alone"
        " decides)",
    )
    consolidate = _policy_field("consolidate", CONSOLIDATE_HELP)
    reservation_admit_min = _policy_field("reservation_admit_min", RESERVATION_ADMIT_HELP)
    idle_reclaim = _policy_field(
        "idle_reclaim",
        "Idle-GPU reclaim: a job past its minimum runtime whose GPUs stay idle is "
        "preempted first when GPUs are needed (rule idle_reclaim)",
    )
    idle_threshold_pct = _policy_field(
        "idle_threshold_pct",
        "Idle-GPU reclaim: GPU utilization (%) below which a job's GPUs count as idle",
    )
    idle_reclaim_after_s = _policy_field(
        "idle_reclaim_after_s",
        "Idle-GPU reclaim: how long (seconds, 60 to 86400) a job's GPUs must stay idle "
        "before they are reclaimed",
    )
    idle_notify_owner = _policy_field(
        "idle_notify_owner",
        "Whether a job's owner is told when its idle GPUs are reclaimed",
    )
    reason = TextField(max_length=500, help_text="Why, for the audit trail")

    default_error_messages = {
        "unknown": "Not a policy field; the policy fields are "
        + ", ".join(cluster_rules.POLICY_FIELDS)
        + " (and reason)."
    }


def _metrics_field(name: str, help_text: str, **schema) -> serializers.Field:
    """An optional text field of `ClusterMetricsInput`: a JSON string of at most the
    setting's length (checked as sent, spaces included, so that the schema and the API
    refuse the same); `cluster_metrics_update` checks the rest, naming the field."""
    return TextField(
        required=False,
        allow_blank=True,
        trim_whitespace=False,
        max_length=metrics_rules.METRICS_MAX_LENGTH[name],
        help_text=help_text,
        **schema,
    )


@extend_schema_field({"type": "string", "pattern": metrics_rules.LABEL_PATTERN, "maxLength": 100})
class LabelNameField(TextField):
    """A Prometheus label name (letters, digits and _, not starting with a digit); the
    service refuses anything else naming the field."""


class ClusterMetricsInput(StrictInput):
    """Some of the metrics settings (only those sent change) and the reason."""

    prometheus_url = _metrics_field(
        "prometheus_url",
        "Prometheus's base URL, http:// or https:// (without user:password@); blank: none",
    )
    host_label = LabelNameField(
        required=False,
        trim_whitespace=False,
        help_text="The series' label naming the host (DCGM exporter: Hostname)",
    )
    gpu_label = LabelNameField(
        required=False,
        trim_whitespace=False,
        help_text="The series' label naming the GPU index (DCGM exporter: gpu)",
    )
    selector = _metrics_field(
        "selector",
        'Extra label matchers, comma separated, e.g. cluster="a100", job=~"dcgm.*"; blank: none',
    )
    bearer_token = _metrics_field(
        "bearer_token",
        "Sent as Authorization: Bearer ...; visible ASCII without spaces; blank: none. "
        "Never shown again (the cluster shows bearer_token_set) nor kept in the audit trail",
        write_only=True,
    )
    reason = TextField(max_length=500, help_text="Why, for the audit trail")

    default_error_messages = {
        "unknown": "Not a metrics setting; the metrics settings are "
        + ", ".join(metrics_rules.METRICS_FIELDS)
        + " (and reason)."
    }
