"""The budget tree, memberships and the append-only audit trail of budget changes."""

from __future__ import annotations

from decimal import Decimal

import pghistory
import pgtrigger
from django.conf import settings
from django.core.validators import MinValueValidator
from django.db import models
from tree_queries.models import TreeNode

APPEND_ONLY = pgtrigger.Protect(name="append_only", operation=pgtrigger.Update | pgtrigger.Delete)


class NodeKind(models.TextChoices):
    ORGANISATION = "organisation", "Organisation"
    PROGRAM = "program", "Program"
    PROJECT = "project", "Project"


class Role(models.TextChoices):
    MANAGER = "manager", "Manager"
    MEMBER = "member", "Member"


@pghistory.track(pghistory.InsertEvent(), pghistory.UpdateEvent(), pghistory.DeleteEvent())
class BudgetNode(TreeNode):
    """A node of the org -> program -> project tree. Only projects (leaves) own work.

    `weight` is set by the manager of the parent; share among siblings is
    weight / sum of sibling weights.
    """

    name = models.CharField(max_length=100)
    slug = models.SlugField(max_length=100)
    kind = models.CharField(max_length=20, choices=NodeKind.choices, default=NodeKind.PROJECT)
    weight = models.DecimalField(
        max_digits=14,
        decimal_places=4,
        default=Decimal("1"),
        validators=[MinValueValidator(Decimal("0"))],
    )
    description = models.TextField(blank=True)

    class Meta:
        ordering = ["name"]
        constraints = [
            models.UniqueConstraint(
                fields=["parent", "name"], name="node_name_unique_among_siblings"
            ),
            models.UniqueConstraint(
                fields=["parent", "slug"], name="node_slug_unique_among_siblings"
            ),
            models.UniqueConstraint(
                fields=["name"], condition=models.Q(parent__isnull=True), name="root_name_unique"
            ),
            models.CheckConstraint(
                condition=models.Q(weight__gte=0), name="node_weight_not_negative"
            ),
        ]

    def __str__(self) -> str:
        return self.name

    @property
    def own_weight(self) -> Decimal | None:
        """The weight every surface shows and the history records: none for the root,
        which has no siblings to be weighed against (docs/concepts.md#weight)."""
        return None if self.parent_id is None else self.weight


@pghistory.track(pghistory.InsertEvent(), pghistory.UpdateEvent(), pghistory.DeleteEvent())
class Membership(models.Model):
    """A user's role on a node: managers govern the subtree below, members use a project."""

    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="memberships"
    )
    node = models.ForeignKey(BudgetNode, on_delete=models.CASCADE, related_name="memberships")
    role = models.CharField(max_length=20, choices=Role.choices)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["user", "node", "role"], name="membership_unique"),
        ]

    def __str__(self) -> str:
        return f"{self.user} {self.role} of {self.node}"


class TreeState(models.Model):
    """One row: the tree version, incremented by every applied change (optimistic locking)."""

    version = models.PositiveIntegerField(default=0)

    def __str__(self) -> str:
        return f"tree version {self.version}"


class EventKind(models.TextChoices):
    APPLIED = "applied", "Weights changed"
    SCHEDULED = "scheduled", "Change scheduled"
    CANCELLED = "cancelled", "Scheduled change cancelled"
    IMPORTED = "imported", "Tree imported"
    STRUCTURE = "structure", "Tree structure changed"
    ROLE_GRANTED = "role_granted", "Role granted"
    ROLE_REMOVED = "role_removed", "Role removed"


class BudgetEvent(models.Model):
    """An audited budget decision. Rows are append-only, enforced by a PostgreSQL trigger."""

    kind = models.CharField(max_length=20, choices=EventKind.choices)
    actor = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    actor_name = models.CharField(max_length=150, blank=True)
    reason = models.TextField(max_length=2000)
    created_at = models.DateTimeField(auto_now_add=True)
    effective_at = models.DateTimeField()
    base_version = models.PositiveIntegerField(null=True, blank=True)
    tree_version = models.PositiveIntegerField()
    scheduled_event = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.PROTECT, related_name="outcomes"
    )

    class Meta:
        ordering = ["-created_at", "-id"]
        triggers = [APPEND_ONLY]

    def __str__(self) -> str:
        return f"{self.get_kind_display()} by {self.actor_name or 'system'} at {self.created_at:%Y-%m-%d %H:%M}"


class BudgetEventItem(models.Model):
    """One node's old and new weight and entitled share within an event (append-only)."""

    event = models.ForeignKey(BudgetEvent, on_delete=models.PROTECT, related_name="items")
    node = models.ForeignKey(BudgetNode, on_delete=models.PROTECT, related_name="+")
    node_path = models.CharField(max_length=1000)
    old_weight = models.DecimalField(max_digits=14, decimal_places=4, null=True, blank=True)
    new_weight = models.DecimalField(max_digits=14, decimal_places=4, null=True, blank=True)
    old_entitled_share = models.FloatField(null=True, blank=True)
    new_entitled_share = models.FloatField(null=True, blank=True)

    class Meta:
        ordering = ["node_path"]
        triggers = [APPEND_ONLY]

    def __str__(self) -> str:
        return f"{self.node_path}: {self.old_weight} -> {self.new_weight}"


class ScheduledStatus(models.TextChoices):
    PENDING = "pending", "Pending"
    APPLIED = "applied", "Applied"
    CANCELLED = "cancelled", "Cancelled"


class ScheduledChange(models.Model):
    """A budget change waiting for its effective time. Its outcome is audited as events."""

    event = models.OneToOneField(BudgetEvent, on_delete=models.PROTECT, related_name="scheduled")
    effective_at = models.DateTimeField(db_index=True)
    status = models.CharField(
        max_length=20, choices=ScheduledStatus.choices, default=ScheduledStatus.PENDING
    )
    changes = models.JSONField()  # [{"node": id, "weight": "60"}]

    class Meta:
        ordering = ["effective_at"]

    def __str__(self) -> str:
        return f"{self.status} change at {self.effective_at:%Y-%m-%d %H:%M}"
