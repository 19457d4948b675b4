from django.contrib import admin

from accounts.models import ApiToken


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
