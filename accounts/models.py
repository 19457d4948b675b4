"""API tokens: several per user, each named, hashed at rest, listable and revocable.

django-rest-knox stores only a SHA-512 digest of each token (the secret is shown once,
when it is made) and the first characters (`token_key`) to name it in lists."""

import pghistory
import pgtrigger
from django.contrib.auth.models import User
from django.db import models
from knox.models import AbstractAuthToken


class ApiToken(AbstractAuthToken):
    name = models.CharField(max_length=100, blank=True)

    class Meta:
        ordering = ["-created"]

    def __str__(self) -> str:
        return f"{self.token_key}… of {self.user} ({self.name or 'unnamed'})"


@pghistory.track(
    pghistory.InsertEvent("user_created"),
    pghistory.UpdateEvent(
        "authority_changed",
        condition=pgtrigger.AnyChange("is_staff", "is_superuser", "is_active"),
    ),
    fields=["username", "is_staff", "is_superuser", "is_active"],
    model_name="UserAuthorityEvent",
)
class TrackedUser(User):
    """Who may act as staff or superuser, and who may sign in at all, is authority over
    every budget: each change of those flags (the admin, a shell, raw SQL) is recorded by a
    PostgreSQL trigger on the users' table in an append-only table, with the request's user
    as context (pghistory's middleware). Issue 30: no change of authority without a record.
    A proxy, so that the triggers' migrations live in this app, not in Django's."""

    class Meta:
        proxy = True
