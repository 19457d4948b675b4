"""Django admin: clusters, nodes and memberships editable through the services' rules;
the audit history is read-only."""

from django.contrib import admin, messages

from budgets import services
from budgets.models import BudgetEvent, BudgetEventItem, BudgetNode, Membership, ScheduledChange
from config.admin_refusals import ServiceAdmin
from config.errors import ApplicationError


class ReadOnlyAdmin(admin.ModelAdmin):
    def has_add_permission(self, request, obj=None):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False


class BudgetEventItemInline(admin.TabularInline):
    model = BudgetEventItem
    extra = 0
    can_delete = False
    readonly_fields = [
        "node_path",
        "old_weight",
        "new_weight",
        "old_entitled_share",
        "new_entitled_share",
    ]
    fields = readonly_fields

    def has_add_permission(self, request, obj=None):
        return False

    def has_change_permission(self, request, obj=None):
        return False


@admin.register(BudgetEvent)
class BudgetEventAdmin(ReadOnlyAdmin):
    list_display = ["created_at", "kind", "actor_name", "effective_at", "tree_version", "reason"]
    list_filter = ["kind"]
    search_fields = ["actor_name", "reason", "items__node_path"]
    inlines = [BudgetEventItemInline]

    def has_view_permission(self, request, obj=None):
        return request.user.is_active and request.user.is_staff


@admin.register(ScheduledChange)
class ScheduledChangeAdmin(ReadOnlyAdmin):
    list_display = ["effective_at", "status", "event"]

    def has_view_permission(self, request, obj=None):
        return request.user.is_active and request.user.is_staff


@admin.register(BudgetNode)
class BudgetNodeAdmin(ServiceAdmin):
    """Weights are changed through budget changes (audited), so they are read-only here.
    Structure edits (name, parent) go through `node_update` and its rules; no service
    changes a description, so it is read-only too (an edit of it was refused as "nothing
    to change" under a "changed successfully")."""

    list_display = ["name", "kind", "parent", "weight"]
    list_filter = ["kind"]
    search_fields = ["name"]
    readonly_fields = ["slug", "weight", "kind", "description"]
    fields = ["name", "parent", "kind", "slug", "weight", "description"]

    def has_delete_permission(self, request, obj=None):
        return False

    def save_model(self, request, obj, form, change):
        try:
            if change:
                services.node_update(
                    actor=request.user,
                    node_id=obj.pk,
                    name=obj.name,
                    parent_id=obj.parent_id,
                    reason="Edited in the admin",
                )
            elif obj.parent_id is None:
                self.refuse(request, "Create new organisations with `manage.py budget_import`.")
            else:
                created = services.node_create(
                    actor=request.user,
                    parent_id=obj.parent_id,
                    name=obj.name,
                    reason="Created in the admin",
                )
                obj.pk = created.pk
        except ApplicationError as exc:
            self.refuse(request, exc.message)


def _admin_reason(request, verb: str) -> str:
    return f"{verb} in the admin by {request.user.get_username()}"


@admin.action(description="Remove the selected roles (audited, by the rules of your role)")
def remove_roles(modeladmin, request, queryset):
    done = 0
    for membership in queryset:
        try:
            services.membership_remove(
                actor=request.user,
                membership_id=membership.pk,
                reason=_admin_reason(request, "removed"),
            )
            done += 1
        except ApplicationError as exc:
            modeladmin.message_user(request, f"{membership}: {exc.message}", messages.ERROR)
    if done:
        modeladmin.message_user(request, f"{done} role(s) removed.", messages.SUCCESS)


@admin.register(Membership)
class MembershipAdmin(ServiceAdmin):
    """Roles are granted and removed through `membership_add` / `membership_remove`
    (audited, the actor's rules checked), one by one or with the bulk action; Django's
    own bulk delete, which would skip both, is not offered."""

    list_display = ["user", "role", "node"]
    list_filter = ["role"]
    search_fields = ["user__username", "node__name"]
    autocomplete_fields = ["node"]
    actions = [remove_roles]

    def get_actions(self, request):
        actions = super().get_actions(request)
        actions.pop("delete_selected", None)
        return actions

    def has_change_permission(self, request, obj=None):
        return False  # remove and add instead, both audited

    def save_model(self, request, obj, form, change):
        try:
            created = services.membership_add(
                actor=request.user,
                node_id=obj.node_id,
                username=obj.user.username,
                role=obj.role,
                reason=_admin_reason(request, "granted"),
            )
            obj.pk = created.pk
        except ApplicationError as exc:
            self.refuse(request, exc.message)

    def delete_model(self, request, obj):
        try:
            services.membership_remove(
                actor=request.user, membership_id=obj.pk, reason=_admin_reason(request, "removed")
            )
        except ApplicationError as exc:
            self.refuse(request, exc.message)

    def delete_queryset(self, request, queryset):
        remove_roles(self, request, queryset)
