"""Django admin for accounts: API tokens (revoke only) and users, whose roles change only
through the budget services and whose staff or superuser status only a superuser changes.

Django's own user admin deleted a user's memberships by cascade, with no `role_removed`
event and no check of the actor's right to remove them, and their API tokens with no
`TokenEvent` (issue 30's rule: every admin
change to roles goes through the services, or does not exist)."""

from django.contrib import admin
from django.contrib.auth import get_user_model
from django.contrib.auth.admin import UserAdmin
from django.db import transaction

from accounts import services as token_services
from accounts.models import ApiToken, TokenEvent, TokenEventKind
from budgets import services as budget_services
from budgets.admin import ReadOnlyAdmin
from config.admin_refusals import ServiceAdmin
from config.errors import ApplicationError


@admin.register(ApiToken)
class ApiTokenAdmin(admin.ModelAdmin):
    """Staff may see and revoke tokens (never their secrets: only digests are stored)."""

    list_display = ["token_key", "user", "name", "created", "expiry"]
    search_fields = ["user__username", "name", "token_key"]
    readonly_fields = ["token_key", "user", "name", "created", "expiry"]
    exclude = ["digest"]

    def has_add_permission(self, request, obj=None):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def delete_model(self, request, obj):
        self.delete_queryset(request, ApiToken.objects.filter(pk=obj.pk))

    def delete_queryset(self, request, queryset):
        """Through `tokens_revoke`: each revoked token is a `TokenEvent` by the admin user."""
        token_services.tokens_revoke(
            queryset,
            kind=TokenEventKind.REVOKED_BY_STAFF,
            actor=request.user,
            reason=f"revoked in the admin by {request.user.get_username()}",
        )


@admin.register(TokenEvent)
class TokenEventAdmin(ReadOnlyAdmin):
    """The tokens made and ended (append-only): staff read it, nobody changes it."""

    list_display = ["at", "username", "token_key", "token_name", "kind", "actor_name", "reason"]
    list_filter = ["kind"]
    search_fields = ["username", "token_key", "actor_name"]

    def has_view_permission(self, request, obj=None):
        return request.user.is_active and request.user.is_staff


User = get_user_model()
admin.site.unregister(User)

# The fields that give authority over everything (recorded by `accounts.models.TrackedUser`).
AUTHORITY_FIELDS = ("is_staff", "is_superuser", "groups", "user_permissions")


def _beyond_reach(request, user) -> bool:
    """A superuser, for anyone who is not one."""
    return user is not None and user.is_superuser and not request.user.is_superuser


@admin.register(User)
class AuditedUserAdmin(ServiceAdmin, UserAdmin):
    """Deleting a user (its page or "delete selected") first removes each of their roles
    through `membership_remove`: audited as `role_removed`, by the actor's rules. A user
    one of whose roles the actor may not remove is not deleted at all."""

    def get_readonly_fields(self, request, obj=None):
        """Only a superuser grants staff or superuser status, groups or permissions: with
        Django's user admin as it comes, any staff user allowed to change users could make
        themselves superuser."""
        fields = tuple(super().get_readonly_fields(request, obj))
        return fields if request.user.is_superuser else (*fields, *AUTHORITY_FIELDS)

    def has_change_permission(self, request, obj=None):
        """Nobody but a superuser changes a superuser (their password included)."""
        return not _beyond_reach(request, obj) and super().has_change_permission(request, obj)

    def has_delete_permission(self, request, obj=None):
        return not _beyond_reach(request, obj) and super().has_delete_permission(request, obj)

    def delete_model(self, request, obj):
        reason = f"removed in the admin by {request.user.get_username()} with the user"
        try:
            with transaction.atomic():
                token_services.tokens_revoke(
                    ApiToken.objects.filter(user=obj),
                    kind=TokenEventKind.USER_DELETED,
                    actor=request.user,
                    reason=reason,
                )
                for membership_id in obj.memberships.values_list("pk", flat=True):
                    budget_services.membership_remove(
                        actor=request.user, membership_id=membership_id, reason=reason
                    )
                super().delete_model(request, obj)
        except ApplicationError as exc:
            self.refuse(request, f"{obj.get_username()} was not deleted: {exc.message}")

    def delete_queryset(self, request, queryset):
        for user in queryset:
            self.delete_model(request, user)
