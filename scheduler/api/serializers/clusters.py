"""Clusters: the cluster, its policy (output, history and the policy input) and its
last cycle."""

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from config.api_fields import StrictInput, TextField
from scheduler.services import clusters as cluster_rules


class PolicyOutput(serializers.Serializer):
    cycle_s = serializers.IntegerField()
    grace_s = serializers.IntegerField()
    max_min_runtime_s = serializers.IntegerField()
    lookback_s = serializers.IntegerField()
    half_life_s = serializers.IntegerField(allow_null=True)
    short_reserve_hosts = serializers.IntegerField(
        help_text="Hosts held at least for short jobs and unallocated backfill, more while "
        "short jobs need them (0: none)"
    )
    short_reserve_auto = serializers.BooleanField(
        help_text="The adaptive short-job reserve: hosts held for short jobs as the short "
        "work observed needs them (false: only short_reserve_hosts)"
    )
    short_job_max_s = serializers.IntegerField(
        help_text="Longest minimum runtime a job may declare to start on those hosts"
    )
    idle_reclaim = serializers.BooleanField(
        help_text="Idle-GPU reclaim: a job past its minimum runtime whose GPUs stay idle "
        "is preempted first when GPUs are needed (rule idle_reclaim)"
    )
    idle_threshold_pct = serializers.IntegerField(
        help_text="GPU utilization (%) below which a job's GPUs count as idle"
    )
    idle_reclaim_after_s = serializers.IntegerField(
        help_text="How long (seconds) a job's GPUs must stay idle before they are reclaimed"
    )
    idle_notify_owner = serializers.BooleanField(
        help_text="Whether a job's owner is told when its idle GPUs are reclaimed"
    )


class LastCycleOutput(serializers.Serializer):
    id = serializers.IntegerField()
    started_at = serializers.DateTimeField()
    duration_ms = serializers.FloatField(allow_null=True)
    starts = serializers.IntegerField()
    stops = serializers.IntegerField()
    errors = serializers.ListField(child=serializers.CharField())


class ClusterOutput(serializers.Serializer):
    id = serializers.IntegerField()
    name = serializers.CharField()
    adapter = serializers.CharField()
    hosts = serializers.IntegerField()
    gpus = serializers.IntegerField()
    healthy_gpus = serializers.IntegerField()
    draining_hosts = serializers.IntegerField()
    down_hosts = serializers.IntegerField()
    pending_jobs = serializers.IntegerField()
    running_jobs = serializers.IntegerField()
    policy = PolicyOutput()
    operators = serializers.ListField(child=serializers.CharField())
    last_cycle = LastCycleOutput(allow_null=True)


@extend_schema_field(
    {
        "oneOf": [
            {"type": "integer"},
            {"type": "boolean"},
            {"type": "array", "items": {"type": "string"}},
            {"type": "null"},
        ]
    }
)
class PolicyValueField(serializers.Field):
    """A policy field's value (a whole number, true/false or null), or the operators' user
    names."""

    def to_representation(self, value):
        return value


class ClusterPolicyEventOutput(serializers.Serializer):
    at = serializers.DateTimeField()
    changes = serializers.DictField(
        child=serializers.ListField(child=PolicyValueField(), min_length=2, max_length=2),
        help_text="`{field: [before, after]}` for each policy field that changed; "
        "`operators` (set in the admin): the user names before and after",
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
    held_gpus = serializers.IntegerField(help_text="Held for short jobs now: their GPUs")
    reserve_cost_gpu_h = serializers.FloatField(
        help_text="Reserve cost: GPU-hours of held GPUs that no short job used while longer "
        "allocated work waited, over the last window_days"
    )
    short_waits_saved = serializers.IntegerField(
        help_text="Short-job waits saved: short jobs started on held hosts while longer "
        "allocated work waited, over the last window_days"
    )
    window_days = serializers.IntegerField(help_text="The window of the two sums (7)")


class ClusterDetailOutput(ClusterOutput):
    policy_events = ClusterPolicyEventOutput(
        many=True, help_text="The last 20 policy changes, newest first"
    )
    short_reserve = ShortReserveOutput()


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
    """Some of the policy fields (only those sent change) and the reason."""

    cycle_s = _policy_field("cycle_s", "Seconds between scheduling cycles")
    grace_s = _policy_field("grace_s", "Seconds a stopped job has to exit")
    max_min_runtime_s = _policy_field(
        "max_min_runtime_s", "The longest minimum runtime a job may declare (seconds)"
    )
    lookback_s = _policy_field("lookback_s", "The fair-share usage window (seconds)")
    half_life_s = _policy_field(
        "half_life_s", "Half-life of past usage in fair share (seconds); null: no decay"
    )
    short_reserve_hosts = _policy_field(
        "short_reserve_hosts",
        "Hosts held at least for short jobs and unallocated backfill, more while short jobs "
        "need them (0: none)",
    )
    short_reserve_auto = _policy_field(
        "short_reserve_auto",
        "The adaptive short-job reserve: hosts held for short jobs as the short work observed "
        "needs them, giving way to the first job in line after 30 minutes (false: only "
        "short_reserve_hosts)",
    )
    short_job_max_s = _policy_field(
        "short_job_max_s",
        "The longest minimum runtime a job may declare to start on the short-job reserve "
        "(seconds; at most max_min_runtime_s)",
    )
    idle_reclaim = _policy_field(
        "idle_reclaim",
        "Idle-GPU reclaim: a job past its minimum runtime whose GPUs stay idle is preempted "
        "first when GPUs are needed",
    )
    idle_threshold_pct = _policy_field(
        "idle_threshold_pct", "GPU utilization (%) below which a job's GPUs count as idle"
    )
    idle_reclaim_after_s = _policy_field(
        "idle_reclaim_after_s",
        "How long (seconds, 60 to 86400) a job's GPUs must stay idle before they are reclaimed",
    )
    idle_notify_owner = _policy_field(
        "idle_notify_owner", "Tell a job's owner when its idle GPUs are reclaimed"
    )
    reason = TextField(max_length=500, help_text="Why, for the audit trail")

    default_error_messages = {
        "unknown": "Not a policy field; the policy fields are "
        + ", ".join(cluster_rules.POLICY_FIELDS)
        + " (and reason)."
    }
