"""API input/output shapes. Input serializers only check shapes; rules live in services."""

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from budgets.models import BudgetEvent, BudgetEventItem, EventKind, Membership, Role
from budgets.services import MAX_REASON_LENGTH, MAX_SCHEDULE_AHEAD
from config.api_fields import (
    ChoiceField,
    InputSerializer,
    NumberOrTextField,
    StrictInput,
    TextField,
    TimeField,
)

MAX_ID = 2**63 - 1  # PostgreSQL bigint
MAX_VERSION = 2**31 - 1  # TreeState.version, BudgetEvent.base_version: PostgreSQL integer
REASON_HELP = (
    "Why, for the audit trail: 1-2000 characters, no control characters except newlines and tabs"
)


def reason_field() -> serializers.CharField:
    return TextField(max_length=MAX_REASON_LENGTH, help_text=REASON_HELP)


class NodeOutput(serializers.Serializer):
    id = serializers.IntegerField()
    name = serializers.CharField()
    kind = serializers.CharField()
    parent = serializers.IntegerField(allow_null=True)
    path = serializers.CharField()
    weight = serializers.DecimalField(
        max_digits=14,
        decimal_places=4,
        allow_null=True,
        help_text="Weight among its siblings; null for the root, which has none",
    )
    share = serializers.FloatField(help_text="Share among siblings: weight / siblings' weights")
    entitled_share = serializers.FloatField(help_text="Entitled share: its share of every cluster")
    managers = serializers.ListField(child=serializers.CharField())
    members = serializers.ListField(child=serializers.CharField())


class NodeCreateInput(StrictInput):
    parent = serializers.IntegerField(min_value=1, max_value=MAX_ID)
    name = TextField(max_length=100)
    weight = NumberOrTextField(
        required=False,
        default="1",
        help_text="Weight: a number >= 0 (or numeric text), up to 4 decimals",
    )
    kind = ChoiceField(choices=["program", "project"], required=False, default="project")
    reason = reason_field()


class NodeUpdateInput(StrictInput):
    name = TextField(max_length=100, required=False)
    parent = serializers.IntegerField(required=False, min_value=1, max_value=MAX_ID)
    reason = reason_field()
    base_version = serializers.IntegerField(
        required=False, allow_null=True, min_value=0, max_value=MAX_VERSION
    )


class WeightChangeInput(StrictInput):
    node = serializers.IntegerField(min_value=1, max_value=MAX_ID, help_text="The node's id")
    weight = NumberOrTextField(
        help_text="Weight: a number >= 0 (or numeric text), up to 4 decimals"
    )


class BudgetChangeInput(StrictInput):
    reason = reason_field()
    effective_at = TimeField(
        required=False,
        allow_null=True,
        default=None,
        help_text="When the change takes effect: absent, null or now (a minute of clock "
        "skew allowed) applies it now; a later time schedules it, at most "
        f"{MAX_SCHEDULE_AHEAD.days} days ahead (400 naming `effective_at` otherwise)",
    )
    base_version = serializers.IntegerField(
        required=False, allow_null=True, min_value=0, max_value=MAX_VERSION, default=None
    )
    changes = WeightChangeInput(many=True, allow_empty=True)


class BudgetCancelInput(StrictInput):
    reason = reason_field()


class EventItemOutput(serializers.ModelSerializer):
    """One node's change: the node as every representation names it (`node`,
    `node_path`, `node_name`, as a preview's `weights` do) and its weights and shares."""

    serializer_choice_field = ChoiceField
    node = serializers.IntegerField(source="node_id", help_text="The node's id")
    node_path = serializers.CharField(
        help_text="The node's slug path when the event was recorded (history is never "
        "rewritten: a later move or rename does not change it)"
    )
    node_name = serializers.CharField(help_text="The node's name (now)")

    class Meta:
        model = BudgetEventItem
        fields = [
            "node",
            "node_path",
            "node_name",
            "old_weight",
            "new_weight",
            "old_entitled_share",
            "new_entitled_share",
        ]


class BudgetEventOutput(serializers.ModelSerializer):
    serializer_choice_field = ChoiceField
    actor = serializers.CharField(source="actor_name")
    items = EventItemOutput(many=True)
    kind = ChoiceField(choices=EventKind.choices)
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
    serializer_choice_field = ChoiceField
    user = serializers.CharField(source="user.username")

    class Meta:
        model = Membership
        fields = ["id", "user", "node", "role"]


@extend_schema_field(
    {"type": "array", "items": {"$ref": "#/components/schemas/TreeNode"}},
    component_name=None,
)
class TreeChildrenField(serializers.ListField):
    """A node's children: tree nodes again (the schema's recursive `TreeNode`)."""


class TreeNodeOutput(serializers.Serializer):
    """A node of `GET /api/v1/tree/`: the import format with ids and shares."""

    id = serializers.IntegerField()
    name = serializers.CharField()
    kind = ChoiceField(choices=["organisation", "program", "project"])
    weight = serializers.CharField(required=False, help_text="Weight; absent on the root")
    share = serializers.FloatField(help_text="Its share among its siblings")
    entitled_share = serializers.FloatField(help_text="Entitled share: its share of every cluster")
    managers = serializers.ListField(child=serializers.CharField(), required=False)
    members = serializers.ListField(child=serializers.CharField(), required=False)
    children = TreeChildrenField(required=False, help_text="Absent on a project")

    class Meta:
        ref_name = "TreeNode"


class TreeOutput(serializers.Serializer):
    version = serializers.IntegerField(help_text="The tree's version (`base_version`)")
    tree = TreeNodeOutput(allow_null=True, help_text="The root; null before any import")


class BudgetChangeFilter(InputSerializer):
    """Query parameters of the history list."""

    node = serializers.IntegerField(
        required=False,
        min_value=1,
        max_value=MAX_ID,
        help_text="events that touched this node (an unknown one: 400)",
    )
    actor = serializers.CharField(
        required=False,
        max_length=150,
        help_text="user name of the actor, as the history recorded it (text, not a "
        "reference: a name that acted on nothing matches no event)",
    )
    since = TimeField(required=False, help_text="events recorded at or after this time")
    kind = ChoiceField(required=False, choices=EventKind.choices)


class MembershipFilter(InputSerializer):
    node = serializers.IntegerField(
        required=False,
        min_value=1,
        max_value=MAX_ID,
        help_text="memberships on this node (an unknown one: 400)",
    )


class MembershipInput(StrictInput):
    user = TextField(max_length=150)
    node = serializers.IntegerField(min_value=1, max_value=MAX_ID)
    role = ChoiceField(choices=Role.choices)
    reason = TextField(
        max_length=MAX_REASON_LENGTH,
        required=False,
        help_text="Why, for the audit trail (a description of the grant by default)",
    )
