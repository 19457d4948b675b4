"""API tokens: several per user, each named, hashed at rest, listable and revocable.

django-rest-knox stores only a SHA-512 digest of each token (the secret is shown once,
when it is made) and the first characters (`token_key`) to name it in lists."""

import pghistory
import pgtrigger
from django.conf import settings
from django.contrib.auth.models import User
from django.db import models
from knox.models import AbstractAuthToken
from knox.settings import CONSTANTS

from budgets.models import APPEND_ONLY


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


class TokenEventKind(models.TextChoices):
    CREATED = "created", "Created (sign-in)"
    REVOKED = "revoked", "Revoked by its owner"
    REVOKED_BY_STAFF = "revoked_by_staff", "Revoked by staff (admin)"
    REVOKED_OLDEST = "revoked_oldest", "Revoked: the oldest beyond the limit at a sign-in"
    PASSWORD_CHANGED = "password_changed", "Revoked: password changed"
    USER_DELETED = "user_deleted", "Revoked: user deleted"
    EXPIRED = "expired", "Expired"


class TokenEvent(models.Model):
    """An API token made or ended: whose (`user`), which (`token_key`, its first
    characters, never the secret), by whom (`actor`; none: the system), when and why
    (`kind`, `reason`). Append-only, like every audit table.

    The users are kept by name too and referenced without a database constraint: with
    the PROTECT of the other audit tables, every user who ever signed in for a token
    could no longer be deleted."""

    at = models.DateTimeField()
    kind = models.CharField(max_length=20, choices=TokenEventKind.choices)
    reason = models.CharField(max_length=500, blank=True)
    actor = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.DO_NOTHING,
        db_constraint=False,
        related_name="+",
    )
    actor_name = models.CharField(max_length=150, blank=True)
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.DO_NOTHING, db_constraint=False, related_name="+"
    )
    username = models.CharField(max_length=150)
    token_key = models.CharField(max_length=CONSTANTS.TOKEN_KEY_LENGTH)
    token_name = models.CharField(max_length=100, blank=True)

    class Meta:
        ordering = ["-at", "-id"]
        triggers = [APPEND_ONLY]
        indexes = [models.Index(fields=["user", "-at"], name="token_event_user")]

    def __str__(self) -> str:
        return f"{self.token_key}… of {self.username}: {self.kind}"
