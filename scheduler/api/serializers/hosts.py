"""Hosts: the host, its health history and the drain/heal input."""

from rest_framework import serializers

from config.api_fields import ChoiceField, InputSerializer, StrictInput, TextField
from scheduler.api.serializers.fields import (
    ClusterRefField,
)
from scheduler.models import HostHealth


class HostFilter(InputSerializer):
    cluster = ClusterRefField(required=False, help_text="The cluster's id or name")
    health = ChoiceField(choices=HostHealth.choices, required=False)


class HostOutput(serializers.Serializer):
    id = serializers.IntegerField()
    cluster = serializers.IntegerField()
    cluster_name = serializers.CharField()
    name = serializers.CharField()
    gpus = serializers.IntegerField()
    gpus_in_use = serializers.IntegerField(
        help_text="Now page figures: GPUs in use, held by the host's open attempts"
    )
    health = ChoiceField(choices=HostHealth.choices)
    health_reason = serializers.CharField(allow_blank=True)
    health_changed_at = serializers.DateTimeField(allow_null=True)
    ready_for_repair_at = serializers.DateTimeField(
        allow_null=True, help_text="When a drain emptied it"
    )


class HostEventOutput(serializers.Serializer):
    at = serializers.DateTimeField()
    from_health = ChoiceField(choices=HostHealth.choices)
    to_health = ChoiceField(choices=HostHealth.choices)
    reason = serializers.CharField()
    actor = serializers.CharField(allow_blank=True, source="actor_name")


class HostDetailOutput(HostOutput):
    events = HostEventOutput(many=True, help_text="The last 20 health changes, newest first")


class HostHealthInput(StrictInput):
    health = ChoiceField(
        choices=[("draining", "Draining"), ("healthy", "Healthy")],
        help_text="`draining` starts a drain, `healthy` ends it",
    )
    reason = TextField(max_length=500, help_text="Why, for the audit trail")
