"""Writes on API tokens. Only a token's owner may list or revoke it."""

from __future__ import annotations

import datetime as dt

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from accounts.models import ApiToken
from config.errors import NotFound, ValidationFailed
from config.text import refuse_control_characters

TOKEN_NAME_MAX_LENGTH = 100


def token_create(*, user, name: str = "") -> tuple[ApiToken, str]:
    """A new token for `user`; returns the row and the secret (shown this once only)."""
    name = (name or "").strip()
    if len(name) > TOKEN_NAME_MAX_LENGTH:
        raise ValidationFailed(
            f"A token name has at most {TOKEN_NAME_MAX_LENGTH} characters.", field="name"
        )
    refuse_control_characters(name, field="name", multiline=False)
    ttl: dt.timedelta | None = settings.REST_KNOX["TOKEN_TTL"]
    return ApiToken.objects.create(user=user, expiry=ttl, name=name)


def token_revoke(*, user, token_key: str) -> None:
    """Revoke one of `user`'s own tokens by its key (the first characters of the token)."""
    with transaction.atomic():
        deleted, _ = ApiToken.objects.filter(user=user, token_key=token_key).delete()
    if not deleted:
        raise NotFound(f"You have no token with key '{token_key}'.")


def token_revoke_all(*, user) -> int:
    """Revoke every token of `user`; returns how many there were."""
    deleted, _ = ApiToken.objects.filter(user=user).delete()
    return deleted


def tokens_revoke_on_password_change(sender, instance, created: bool = False, **kwargs) -> None:
    """post_save of the user model: a password changed on purpose (`set_password` and a
    save: the admin's password form, `manage.py changepassword`) revokes every API token
    of the user, as it ends their other sessions. The tokens were got with the old
    password: after a reset of a stolen one they kept working for up to
    ALLOT_TOKEN_TTL_DAYS. Django's rehash of a password at sign-in is not a change (it
    clears `_password` before saving) and revokes nothing; neither does a new user."""
    if not created and getattr(instance, "_password", None) is not None:
        token_revoke_all(user=instance)


def tokens_prune_expired(*, now: dt.datetime | None = None) -> int:
    """Delete every token past its expiry (knox removes an expired token only when
    someone tries it); returns how many. Tokens without an expiry are kept."""
    deleted, _ = ApiToken.objects.filter(expiry__lt=now or timezone.now()).delete()
    return deleted
