"""The what-if preview: weights to try, the request and its result."""

from django.conf import settings
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from config.api_fields import ChoiceField, NumberOrTextField, StrictInput
from scheduler.api.serializers.fields import (
    MAX_ID,
    IdOrNameField,
)

MAX_PREVIEW_DAYS = settings.ALLOT_PREVIEW_MAX_DAYS


class PreviewWeightInput(StrictInput):
    node = serializers.IntegerField(
        min_value=1, max_value=MAX_ID, help_text="A child of `node` (its id)"
    )
    weight = NumberOrTextField(help_text="The proposed weight (>= 0, up to 4 decimals)")


NODE_PATH_HELP = "The node's slug path (`org/program/project`), as budget changes give it"
NODE_NAME_HELP = "The node's name"


class PreviewWeightOutput(serializers.Serializer):
    """A proposed weight; the node named as a budget change's items name it."""

    node = serializers.IntegerField(help_text="A child of the preview's node (its id)")
    node_path = serializers.CharField(help_text=NODE_PATH_HELP)
    node_name = serializers.CharField(help_text=NODE_NAME_HELP)
    weight = serializers.CharField(help_text="The proposed weight, as decimal text")


@extend_schema_field({"type": "boolean", "nullable": True})
class IdleReclaimField(serializers.JSONField):
    """true, false or null; `preview_request` refuses any other JSON value naming the
    field (DRF's BooleanField would take "yes" or 1, which the schema does not)."""


class PreviewInput(StrictInput):
    node = serializers.IntegerField(
        min_value=1, max_value=MAX_ID, help_text="The node whose children's weights change"
    )
    cluster = IdOrNameField(help_text="The cluster whose jobs are replayed (id or name)")
    weights = PreviewWeightInput(many=True, allow_empty=True)
    days = serializers.IntegerField(
        required=False,
        allow_null=True,
        default=None,
        min_value=1,
        max_value=MAX_PREVIEW_DAYS,
        help_text="The window: days replayed (default ALLOT_PREVIEW_DAYS, 14; at most ALLOT_PREVIEW_MAX_DAYS)",
    )
    idle_reclaim = IdleReclaimField(
        required=False,
        allow_null=True,
        default=None,
        help_text="Idle-GPU reclaim in the replay with the proposed weights: true shows what "
        "turning it on would give (with no weights: reclaim alone), jobs idle as their "
        "recorded GPU utilization was; null or absent: the cluster's policy",
    )


@extend_schema_field(
    {
        "type": "object",
        "nullable": True,
        "description": "When done: `jobs` replayed, `skipped` (by reason), `empty` (no job "
        "in the window), `window_s`, `window_start`, `window_end` (complete hours), "
        "`changed` weights and `projects`: per project the ledger's recorded figures "
        "(`delivered_gpu_h_recorded`, `capped_entitled_gpu_h_recorded` (demand-capped "
        "entitlement), `ratio_recorded`), the "
        "replay with today's weights (`<figure>_before`) and with the proposed weights "
        "(`<figure>_after`) for entitled_share, delivered_gpu_h, capped_entitled_gpu_h, ratio "
        "(delivery ratio) and p90_replay_wait_s, and `replay_difference` (|replay with today's "
        "weights - recorded| / recorded delivered GPU-h); `fidelity` (`worst` of those over "
        "the projects that made `share` of the recorded delivery) and `not_reproduced` "
        "(`carried` jobs present when the window opened, `carried_running` of them "
        "running then and replayed going on with that run, `carried_before_gpu_h` they ran "
        "before it, `unknown_runtime` jobs and their `unknown_runtime_gpu_h`); idle-GPU "
        "reclaim: `idle_reclaim` (`before`, `after`: whether each replay reclaimed), "
        "`idle_jobs` (jobs replayed idle from the point their recorded utilization stayed "
        "below the cluster's idle threshold), `idle_reclaims` ([before, after] "
        "preemptions by rule idle_reclaim) and per project `idle_gpu_h_before`/`_after` "
        "(allocated-but-idle GPU-h)",
    }
)
class PreviewResultField(serializers.JSONField):
    """The what-if figures (see `scheduler.core.sim.whatif.run_whatif`)."""


class PreviewOutput(serializers.Serializer):
    id = serializers.IntegerField()
    state = ChoiceField(choices=["queued", "running", "done", "failed"])
    progress = serializers.FloatField(help_text="0..1")
    node = serializers.IntegerField(help_text="The node whose children's weights change")
    node_path = serializers.CharField(help_text=NODE_PATH_HELP)
    node_name = serializers.CharField(help_text=NODE_NAME_HELP)
    cluster = serializers.IntegerField()
    cluster_name = serializers.CharField()
    requester = serializers.CharField()
    window_days = serializers.IntegerField()
    weights = PreviewWeightOutput(many=True)
    idle_reclaim = serializers.BooleanField(
        allow_null=True,
        help_text="Idle-GPU reclaim asked for the replay with the proposed weights; null: "
        "the cluster's policy",
    )
    error = serializers.CharField(allow_blank=True)
    created_at = serializers.DateTimeField()
    started_at = serializers.DateTimeField(allow_null=True)
    finished_at = serializers.DateTimeField(allow_null=True)
    result = PreviewResultField(allow_null=True)
