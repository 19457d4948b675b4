"""API input/output shapes. Input serializers only check shapes; rules live in services."""

from rest_framework import serializers

from budgets.models import BudgetEvent, BudgetEventItem, EventKind, Membership, Role


class NodeOutput(serializers.Serializer):
    id = serializers.IntegerField()
    name = serializers.CharField()
    kind = serializers.CharField()
    parent = serializers.IntegerField(allow_null=True)
    path = serializers.CharField()
    weight = serializers.DecimalField(max_digits=14, decimal_places=4)
    share = serializers.FloatField()
    entitled_share = serializers.FloatField()
    managers = serializers.ListField(child=serializers.CharField())
    members = serializers.ListField(child=serializers.CharField())


class NodeCreateInput(serializers.Serializer):
    parent = serializers.IntegerField()
    name = serializers.CharField(max_length=100)
    weight = serializers.CharField(required=False, default="1")
    kind = serializers.ChoiceField(
        choices=["program", "project"], required=False, default="project"
    )
    reason = serializers.CharField(allow_blank=True, max_length=5000)


class NodeUpdateInput(serializers.Serializer):
    name = serializers.CharField(max_length=100, required=False)
    parent = serializers.IntegerField(required=False)
    reason = serializers.CharField(allow_blank=True, max_length=5000)
    base_version = serializers.IntegerField(required=False, allow_null=True, min_value=0)


class WeightChangeInput(serializers.Serializer):
    node = serializers.JSONField()
    weight = serializers.JSONField()


class BudgetChangeInput(serializers.Serializer):
    reason = serializers.CharField(allow_blank=True, trim_whitespace=False, max_length=100000)
    effective_at = serializers.DateTimeField(required=False, allow_null=True, default=None)
    base_version = serializers.IntegerField(
        required=False, allow_null=True, min_value=0, default=None
    )
    changes = WeightChangeInput(many=True, allow_empty=True)


class BudgetCancelInput(serializers.Serializer):
    reason = serializers.CharField(allow_blank=True, max_length=100000)


class EventItemOutput(serializers.ModelSerializer):
    node = serializers.IntegerField(source="node_id")

    class Meta:
        model = BudgetEventItem
        fields = [
            "node",
            "node_path",
            "old_weight",
            "new_weight",
            "old_entitled_share",
            "new_entitled_share",
        ]


class BudgetEventOutput(serializers.ModelSerializer):
    actor = serializers.CharField(source="actor_name")
    items = EventItemOutput(many=True)
    kind = serializers.ChoiceField(choices=EventKind.choices)
    scheduled_event = serializers.IntegerField(source="scheduled_event_id", allow_null=True)

    class Meta:
        model = BudgetEvent
        fields = [
            "id",
            "kind",
            "actor",
            "reason",
            "created_at",
            "effective_at",
            "base_version",
            "tree_version",
            "scheduled_event",
            "items",
        ]


class MembershipOutput(serializers.ModelSerializer):
    user = serializers.CharField(source="user.username")

    class Meta:
        model = Membership
        fields = ["id", "user", "node", "role"]


class MembershipInput(serializers.Serializer):
    user = serializers.CharField()
    node = serializers.IntegerField()
    role = serializers.ChoiceField(choices=Role.choices)
