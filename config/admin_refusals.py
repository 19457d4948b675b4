"""Admin saves and deletions that go through a service: when the service refuses, the
refusal is the page's only word on it.

The admin's views call `save_model` / `delete_model` and then, whatever happened there,
say "... was added (changed, deleted) successfully" and write a `django_admin_log` entry
for the change. Allot's admins call the services there (audited, the actor's rules
checked) and show a refusal as an error; the success message and the log entry of the
change that did not happen used to follow it (a refused grant logged as an addition of
an object without an id). `ServiceAdmin.refuse` marks the request; the admin's success
messages and log entries are then left out."""

from __future__ import annotations

from django.contrib import admin, messages
from django.http import HttpRequest

REFUSED = "_allot_admin_refused"


def refused(request: HttpRequest) -> bool:
    """Whether a service refused a save or deletion of this admin request."""
    return getattr(request, REFUSED, False)


class ServiceAdmin(admin.ModelAdmin):
    """A ModelAdmin whose writes are services' (see the module's docstring)."""

    def refuse(self, request: HttpRequest, message: str) -> None:
        """Show a service's refusal; nothing of this request is then logged or announced
        as done."""
        setattr(request, REFUSED, True)
        self.message_user(request, message, messages.ERROR)

    def message_user(self, request, message, level=messages.INFO, *args, **kwargs):
        if refused(request) and level == messages.SUCCESS:
            return
        super().message_user(request, message, level, *args, **kwargs)

    def log_addition(self, request, obj, message):
        if not refused(request):
            return super().log_addition(request, obj, message)
        return None

    def log_change(self, request, obj, message):
        if not refused(request):
            return super().log_change(request, obj, message)
        return None

    def log_deletions(self, request, queryset):
        if not refused(request):
            return super().log_deletions(request, queryset)
        return None
