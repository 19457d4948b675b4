"""Jobs: the submission, the job and its attempts, events, ETA and blockers, the
cancel, the filters and the queue."""

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from config.api_fields import (
    ChoiceField,
    InputSerializer,
    MultipleChoiceField,
    NumberOrTextField,
    StrictInput,
    TextField,
)
from config.errors import ValidationFailed
from scheduler.api.serializers.fields import (
    MAX_ID,
    ClusterRefField,
    IdOrNameField,
    ProjectRefField,
)
from scheduler.core.engine import RULE_LABELS, rule_label
from scheduler.models import AttemptEnd, AttemptState, JobKind, JobState
from scheduler.selectors.cluster_queue import STATES as QUEUE_STATES
from scheduler.selectors.cluster_queue import user_id
from scheduler.selectors.jobs import projects_at_or_below
from scheduler.services import jobs as job_rules


@extend_schema_field(
    {
        "type": "object",
        "additionalProperties": False,
        "properties": {
            "image": {"type": "string", "maxLength": job_rules.IMAGE_MAX_LENGTH},
            "command": {"type": "string", "maxLength": job_rules.COMMAND_MAX_LENGTH},
            "env": {
                "type": "object",
                "additionalProperties": {"type": "string"},
                "maxProperties": job_rules.ENV_MAX_ENTRIES,
            },
        },
        "description": "What to run: image, command and environment (all optional, but a "
        "Slurm cluster runs the command: there a job without one is a 400 naming "
        "`spec.command`)",
    }
)
class SpecField(serializers.JSONField):
    """The job's spec, checked by `scheduler.services.jobs.clean_spec`."""


class JobSubmitInput(StrictInput):
    project = IdOrNameField(
        help_text="The project's node id, its path (`org/prog-a/a1`) or its slug alone when "
        "one project has it (`a1`)"
    )
    cluster = IdOrNameField(help_text="The cluster's id or name")
    name = TextField(max_length=job_rules.NAME_MAX_LENGTH, required=False, default="job")
    gpus = serializers.IntegerField(
        min_value=1,
        max_value=1_000_000,
        help_text="1, 2, 4, 8 (one host) or a multiple of the host size (whole hosts)",
    )
    min_runtime_s = serializers.IntegerField(
        min_value=0,
        max_value=MAX_ID,
        help_text="Protected, charged runtime in seconds, which makes an allocated job "
        "(0: an unallocated job, free and preemptible); at most the cluster's "
        "`max_min_runtime_s`",
    )
    resumable = serializers.BooleanField(
        required=False, default=False, help_text="Resumes from a checkpoint when preempted"
    )
    priority = serializers.IntegerField(
        required=False,
        default=0,
        min_value=job_rules.PRIORITY_MIN,
        max_value=job_rules.PRIORITY_MAX,
        help_text="Orders the job among its project's jobs only",
    )
    kind = ChoiceField(
        choices=JobKind.choices,
        required=False,
        default="training",
        error_messages={
            "invalid_choice": f'"{{input}}" is not a kind of job; one of {", ".join(JobKind.values)}.'
        },
    )
    spec = SpecField(required=False, default=dict)
    duration_s = serializers.IntegerField(
        required=False,
        allow_null=True,
        default=None,
        min_value=1,
        max_value=job_rules.MAX_DURATION_S,
        help_text="Expected run time; the simulated cluster runs the job this long",
    )
    array = serializers.IntegerField(
        required=False,
        default=1,
        min_value=1,
        max_value=job_rules.MAX_ARRAY,
        help_text="Submit this many identical jobs (like `sbatch --array`)",
    )


class SubmitQuery(InputSerializer):
    dry_run = serializers.BooleanField(
        required=False,
        default=False,
        help_text="Validate and say where the job would stand; store nothing",
    )


class JobOutput(serializers.Serializer):
    id = serializers.IntegerField()
    name = serializers.CharField()
    project = serializers.IntegerField()
    project_path = serializers.CharField()
    cluster = serializers.IntegerField()
    cluster_name = serializers.CharField()
    submitter = serializers.CharField()
    gpus = serializers.IntegerField()
    min_runtime_s = serializers.IntegerField()
    allocated = serializers.BooleanField(help_text="min_runtime_s > 0: charged and protected")
    resumable = serializers.BooleanField()
    priority = serializers.IntegerField()
    kind = ChoiceField(choices=JobKind.choices)
    duration_s = serializers.IntegerField(allow_null=True)
    state = ChoiceField(choices=JobState.choices)
    state_reason = serializers.CharField(allow_blank=True)
    submitted_at = serializers.DateTimeField()
    queued_at = serializers.DateTimeField()
    first_started_at = serializers.DateTimeField(allow_null=True)
    ended_at = serializers.DateTimeField(allow_null=True)
    progress_s = serializers.FloatField()
    attempt_count = serializers.IntegerField()
    array_id = serializers.UUIDField(allow_null=True)
    array_index = serializers.IntegerField(allow_null=True)
    spec = SpecField(
        allow_null=True,
        help_text="null unless you submitted the job, manage its project or are staff",
    )


class PlacementOutput(serializers.Serializer):
    host = serializers.CharField()
    gpu_indices = serializers.ListField(child=serializers.IntegerField())


class AttemptOutput(serializers.Serializer):
    number = serializers.IntegerField()
    attempt_id = serializers.CharField()
    state = ChoiceField(choices=AttemptState.choices)
    allocated = serializers.BooleanField()
    gpus = serializers.IntegerField()
    placements = PlacementOutput(many=True)
    external_id = serializers.CharField(allow_blank=True)
    created_at = serializers.DateTimeField()
    started_at = serializers.DateTimeField(allow_null=True)
    stop_requested_at = serializers.DateTimeField(allow_null=True)
    stop_deadline = serializers.DateTimeField(allow_null=True)
    stop_intent = serializers.CharField(
        allow_blank=True, help_text=f"Why it is being stopped: {', '.join(AttemptEnd.values)}"
    )
    ended_at = serializers.DateTimeField(allow_null=True)
    end_reason = serializers.CharField(
        allow_blank=True, help_text=f"How it ended: {', '.join(AttemptEnd.values)}"
    )
    end_detail = serializers.CharField(allow_blank=True)
    end_label = serializers.SerializerMethodField(
        help_text="How it ended (while it stops: why) in people's words, as the job page "
        "shows it ('Moved to other hosts' for `migrated`); empty while it runs"
    )
    preempted_by = serializers.IntegerField(allow_null=True, source="preempted_by_id")

    def get_end_label(self, attempt) -> str:
        return attempt.end_label


class JobEventOutput(serializers.Serializer):
    at = serializers.DateTimeField()
    from_state = serializers.CharField(allow_blank=True, help_text="Empty for the submission")
    to_state = ChoiceField(choices=JobState.choices)
    reason = serializers.CharField(allow_blank=True)
    reason_code = serializers.CharField(allow_blank=True)
    attempt = serializers.IntegerField(allow_null=True, source="attempt.number", default=None)
    cycle = serializers.IntegerField(allow_null=True, source="cycle_id")
    actor = serializers.CharField(allow_blank=True, source="actor_name")
    preempting_job = serializers.IntegerField(allow_null=True, source="preempting_job_id")
    preempting_project = serializers.IntegerField(allow_null=True, source="preempting_project_id")
    rule = serializers.CharField(
        allow_blank=True,
        help_text="The preemption rule that stopped the job (empty otherwise): "
        + ", ".join(f"{r} ({label})" for r, label in RULE_LABELS.items()),
    )
    rule_label = serializers.SerializerMethodField(
        help_text="The rule in people's words, as the charts' legends name it"
    )

    def get_rule_label(self, event) -> str:
        return rule_label(event.rule)


class QueueInfoOutput(serializers.Serializer):
    position = serializers.IntegerField(allow_null=True, help_text="Queue position: 1 starts next")
    project_position = serializers.IntegerField(
        allow_null=True, help_text="Queue position among its project's waiting jobs"
    )
    queue_length = serializers.IntegerField(
        help_text="Queue position's 'of m': the jobs the last cycle explained"
    )
    fairshare_factor = serializers.FloatField(
        allow_null=True, help_text="The project's fair-share factor (0..1) that orders the queue"
    )
    reason = serializers.CharField(help_text="Why it waits, in plain language")
    computed_at = serializers.DateTimeField(
        allow_null=True, help_text="When the cycle that explained it ran"
    )


class EtaMoveOutput(serializers.Serializer):
    at = serializers.DateTimeField(help_text="When the estimate moved")
    previous_start = serializers.DateTimeField(help_text="The estimated start shown before")
    because = serializers.CharField(
        help_text="Why: a budget change that moved its project's entitled share, in the "
        "queue reasons' words (\"a1's weight changed 70 -> 30 at ... by ...\"); for a later "
        "start, a "
        "host went down, jobs submitted since start before it, or running jobs ending later "
        "than forecast; for a sooner start, a host came back, or jobs ahead leaving the queue "
        "or running jobs ending sooner than forecast"
    )


class EtaOutput(serializers.Serializer):
    start = serializers.DateTimeField(
        allow_null=True,
        help_text="Estimated start: a forward simulation of the cluster's running jobs and "
        "queue through the scheduling engine, runtimes forecast from history (median); "
        "null when it does not start within the simulated 30 days",
    )
    earliest = serializers.DateTimeField(
        allow_null=True,
        help_text="Earliest of the range (shorter runtimes, 10th percentile, no other arrivals)",
    )
    latest = serializers.DateTimeField(
        allow_null=True, help_text="Latest of the range (longer runtimes, 90th percentile)"
    )
    method = ChoiceField(
        choices=["forward-simulation", "victims-stopping", "estimating"],
        help_text="victims-stopping: the jobs it preempted are exiting; it starts next. "
        "estimating: a worker is computing the cluster's estimates (the times are null); "
        "ask again in a few seconds",
    )
    baseline_start = serializers.DateTimeField(
        allow_null=True,
        help_text="Slurm backfill-style estimate for comparison: the queue booked in order "
        "on the GPUs that free first, no preemption",
    )
    moved = EtaMoveOutput(
        allow_null=True,
        help_text="The last time the estimated start moved by more than the range shown "
        "before it, and why; null while it never did",
    )
    overdue = serializers.BooleanField(
        help_text="True when `start` passed over a minute ago and the job still waits: the "
        "estimate was overtaken and a new one follows (pages and the CLI say 'due now')",
    )


class BlockerOutput(serializers.Serializer):
    kind = ChoiceField(choices=["misconfiguration", "budget", "capacity"])
    text = serializers.CharField(help_text="The reason, with its numbers, in plain language")
    numbers = serializers.DictField(
        child=NumberOrTextField(allow_null=True),
        help_text="The figures the text quotes, by name: each a number, a time as ISO 8601 "
        "text (`protected_until`), or null where it is not known",
    )


class JobUtilizationOutput(serializers.Serializer):
    utilization = serializers.FloatField(
        allow_null=True,
        help_text="GPU utilization (0-1) over the job's measured GPU-time, all attempts; "
        "null when none was measured (unknown, never 0; docs/concepts.md#utilization)",
    )
    effective_gpu_h = serializers.FloatField(
        allow_null=True,
        help_text="Effective GPU-hours: the GPU-hours its attempts held x GPU utilization; "
        "null when utilization is unknown",
    )
    measured_gpu_h = serializers.FloatField(
        help_text="GPU-time of its attempts with a known GPU utilization"
    )
    last_sample_at = serializers.DateTimeField(
        allow_null=True, help_text="The end of its last known sample"
    )
    sm_active = serializers.FloatField(
        allow_null=True,
        help_text="SM active (0-1): the mean share of cycles its GPUs' streaming "
        "multiprocessors had work (DCGM_FI_PROF_SM_ACTIVE) over the GPU-time it was "
        "measured, all attempts; null where it was not published (unknown, never 0; "
        "docs/concepts.md#sm-active)",
    )
    memory_used_max_mib = serializers.FloatField(
        allow_null=True,
        help_text="Peak GPU memory used (MiB): the most frame-buffer memory any one of its "
        "GPUs had in use at a sample (DCGM_FI_DEV_FB_USED), all attempts; null where it "
        "was not published (unknown; docs/concepts.md#peak-gpu-memory-used)",
    )


class JobDetailOutput(JobOutput):
    attempts = AttemptOutput(many=True)
    protected_until = serializers.DateTimeField(
        allow_null=True,
        help_text="Protected until: when the protection of the job's current run ends (its "
        "start + min(min runtime, the cluster's `max_min_runtime_s`); before then no other "
        "job may preempt it); null when the job holds no GPUs (not starting, running or "
        "stopping) or is unallocated, which is never protected (docs/concepts.md#protection)",
    )
    utilization = JobUtilizationOutput(
        help_text="The job's GPU utilization over its life (docs/concepts.md#utilization)"
    )
    events = JobEventOutput(many=True)
    queue = QueueInfoOutput(allow_null=True, help_text="Only while the job is pending")
    eta = EtaOutput(allow_null=True, help_text="Only while the job is pending")
    blockers = BlockerOutput(
        many=True,
        help_text="Every reason a pending job waits, ranked: misconfiguration, budget, "
        "capacity; empty once it is not pending",
    )


class SubmitOutput(serializers.Serializer):
    count = serializers.IntegerField()
    array_id = serializers.UUIDField(allow_null=True)
    replayed = serializers.BooleanField(
        help_text="True when an Idempotency-Key retry returned the first request's jobs"
    )
    jobs = JobOutput(many=True)


class EstimateOutput(QueueInfoOutput):
    starts_now = serializers.BooleanField(help_text="The next cycle would start it")
    computed_at = None


class DryRunJobOutput(serializers.Serializer):
    name = serializers.CharField()
    project = serializers.IntegerField()
    project_path = serializers.CharField()
    cluster = serializers.IntegerField()
    cluster_name = serializers.CharField()
    gpus = serializers.IntegerField()
    min_runtime_s = serializers.IntegerField()
    allocated = serializers.BooleanField()
    resumable = serializers.BooleanField()
    priority = serializers.IntegerField()
    kind = ChoiceField(choices=JobKind.choices)
    duration_s = serializers.IntegerField(allow_null=True)
    spec = SpecField()


class DryRunOutput(serializers.Serializer):
    dry_run = serializers.BooleanField()
    count = serializers.IntegerField(help_text="Jobs the request would submit")
    job = DryRunJobOutput()
    estimate = EstimateOutput()


class JobFilter(InputSerializer):
    mine = serializers.BooleanField(required=False, default=False, help_text="only your jobs")
    project = ProjectRefField(
        required=False,
        help_text="A budget node's id or path (`org/program/project`): the jobs of the "
        "projects at or below it (an unknown one: 400)",
    )
    cluster = ClusterRefField(
        required=False, help_text="The cluster's id or name (an unknown one: 400)"
    )
    state = MultipleChoiceField(
        choices=JobState.choices, required=False, help_text="repeat or comma-separate"
    )
    kind = MultipleChoiceField(choices=JobKind.choices, required=False)


class QueueFilter(InputSerializer):
    cluster = ClusterRefField(help_text="The cluster's id or name")
    mine = serializers.BooleanField(
        required=False,
        default=False,
        help_text="Only your own jobs (like `squeue --me`), at their places in the whole queue",
    )


class QueuePageFilter(InputSerializer):
    """The cluster queue page's filters (scheduler.views.queue), read as every page reads
    its query (`config.query.read_page_query`): each refused one named with why, all at
    once. `project` becomes the ids of the node and every node below it, `user` the
    user's id (an unknown one is refused, as the API's filters refuse it)."""

    state = ChoiceField(choices=QUEUE_STATES, required=False, default="all")
    project = ProjectRefField(required=False)
    user = serializers.CharField(required=False, max_length=150)
    mine = serializers.BooleanField(required=False, default=False)

    def validate_project(self, value) -> tuple[int, ...]:
        return tuple(_checked(projects_at_or_below, str(value).strip()))

    def validate_user(self, value: str) -> int:
        return _checked(user_id, value.strip())


def _checked(resolve, ref):
    """`resolve(ref)`, a selector's refusal (ValidationFailed) as the field's error."""
    try:
        return resolve(ref)
    except ValidationFailed as error:
        raise serializers.ValidationError(error.message) from error


class QueueRowOutput(serializers.Serializer):
    position = serializers.IntegerField(help_text="Queue position: 1 starts next")
    project_position = serializers.IntegerField(
        help_text="Queue position among its project's waiting jobs"
    )
    project_rank = serializers.IntegerField(
        allow_null=True,
        help_text="The project's rank in fair-share order; null for a project without "
        "entitlement (weight 0 on its path), which is not ranked",
    )
    job = serializers.IntegerField()
    name = serializers.CharField(allow_blank=True)
    project = serializers.IntegerField(allow_null=True)
    project_path = serializers.CharField(allow_blank=True)
    submitter = serializers.CharField(allow_blank=True)
    gpus = serializers.IntegerField(allow_null=True)
    kind = serializers.CharField(allow_blank=True)
    min_runtime_s = serializers.IntegerField(allow_null=True)
    priority = serializers.IntegerField(allow_null=True)
    state = serializers.CharField(
        allow_blank=True, help_text="The job's state now (the queue is the last cycle's)"
    )
    queued_at = serializers.DateTimeField(allow_null=True)
    fairshare_factor = serializers.FloatField(
        source="metric",
        allow_null=True,
        help_text="The project's fair-share factor (0..1) that orders the queue; null for "
        "a project without entitlement",
    )
    reason = serializers.CharField()


class QueuePageOutput(serializers.Serializer):
    count = serializers.IntegerField()
    next = serializers.URLField(allow_null=True)
    previous = serializers.URLField(allow_null=True)
    computed_at = serializers.DateTimeField(
        allow_null=True, help_text="When the cycle that ordered this queue ran"
    )
    cycle = serializers.IntegerField(allow_null=True)
    results = QueueRowOutput(many=True)
