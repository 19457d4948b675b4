"""Writes on API tokens. Only a token's owner may list or revoke it (staff too, in the
admin). Every token made or ended leaves a `TokenEvent` (who, which, when, why) in the
transaction of the change; a refused request leaves none."""

from __future__ import annotations

import datetime as dt

import pghistory
from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import transaction
from django.db.models import Q, QuerySet
from django.utils import timezone

from accounts.models import ApiToken, TokenEvent, TokenEventKind
from config.access import lock_user_row
from config.errors import NotFound, ValidationFailed
from config.text import refuse_control_characters

TOKEN_NAME_MAX_LENGTH = 100
# Live (unexpired) tokens one user may hold: a sign-in beyond it revokes the oldest, as
# GitHub does past ten OAuth tokens of one user and app. Refusing the sign-in instead
# locked out every client that signs in again on a 401 (schemathesis did, at the 21st).
MAX_LIVE_TOKENS_PER_USER = 20


def _live(now: dt.datetime) -> Q:
    return Q(expiry__isnull=True) | Q(expiry__gte=now)


def _event(token: ApiToken, *, kind: str, actor, reason: str, at: dt.datetime) -> TokenEvent:
    return TokenEvent(
        at=at,
        kind=kind,
        reason=reason[:500],
        actor=actor,
        actor_name=actor.get_username() if actor is not None else "",
        user_id=token.user_id,
        username=token.user.get_username(),
        token_key=token.token_key,
        token_name=token.name,
    )


def token_create(*, user, name: str = "", reason: str = "signed in") -> tuple[ApiToken, str]:
    """A new token for `user` (who is its actor: only the owner signs in for one);
    returns the row and the secret (shown this once only). When `user` already holds
    MAX_LIVE_TOKENS_PER_USER live tokens, the oldest are revoked to make room (each with
    its `TokenEvent`)."""
    name = (name or "").strip()
    if len(name) > TOKEN_NAME_MAX_LENGTH:
        raise ValidationFailed(
            f"A token name has at most {TOKEN_NAME_MAX_LENGTH} characters.", field="name"
        )
    refuse_control_characters(name, field="name", multiline=False)
    ttl: dt.timedelta | None = settings.REST_KNOX["TOKEN_TTL"]
    with transaction.atomic():
        lock_user_row(user)  # two sign-ins at once cannot both pass the limit
        now = timezone.now()
        live = ApiToken.objects.filter(_live(now), user=user).order_by("-created", "-pk")
        oldest = list(live.values_list("pk", flat=True)[MAX_LIVE_TOKENS_PER_USER - 1 :])
        if oldest:
            tokens_revoke(
                ApiToken.objects.filter(pk__in=oldest),
                kind=TokenEventKind.REVOKED_OLDEST,
                actor=user,
                reason=f"the oldest beyond {MAX_LIVE_TOKENS_PER_USER} live tokens at a sign-in",
            )
        token, secret = ApiToken.objects.create(user=user, expiry=ttl, name=name)
        _event(token, kind=TokenEventKind.CREATED, actor=user, reason=reason, at=now).save()
    return token, secret


def tokens_revoke(tokens: QuerySet[ApiToken], *, kind: str, actor, reason: str) -> int:
    """Delete `tokens`, each with its `TokenEvent` of `kind` by `actor` (None: the
    system); returns how many there were. The one way a token ends."""
    with transaction.atomic():
        rows = list(tokens.select_related("user").select_for_update(of=("self",)))
        if not rows:
            return 0
        now = timezone.now()
        TokenEvent.objects.bulk_create(
            [_event(row, kind=kind, actor=actor, reason=reason, at=now) for row in rows]
        )
        ApiToken.objects.filter(pk__in=[row.pk for row in rows]).delete()
    return len(rows)


def token_revoke(*, user, token_key: str) -> None:
    """Revoke one of `user`'s own tokens by its key (the first characters of the token)."""
    found = ApiToken.objects.filter(user=user, token_key=token_key)
    if not tokens_revoke(found, kind=TokenEventKind.REVOKED, actor=user, reason="revoked by owner"):
        raise NotFound(f"You have no token with key '{token_key}'.")


def token_revoke_all(*, user, keep: ApiToken | None = None) -> int:
    """Revoke every token of `user` (by `user`) but `keep` (the token the request came
    with, when the owner keeps it: "sign out everywhere else"); returns how many there
    were."""
    found = ApiToken.objects.filter(user=user)
    reason = "revoked all"
    if keep is not None:
        found = found.exclude(pk=keep.pk)
        reason = "revoked all but the token in use"
    return tokens_revoke(found, kind=TokenEventKind.REVOKED, actor=user, reason=reason)


def _request_actor():
    """The user of the request being served (pghistory's context, entered by the
    middleware for writes), or None (a shell, a command)."""
    with pghistory.context() as context:
        user_id = context.metadata.get("user")
    return get_user_model().objects.filter(pk=user_id).first() if user_id else None


def tokens_revoke_on_password_change(sender, instance, created: bool = False, **kwargs) -> None:
    """post_save of the user model: a password changed on purpose (`set_password` and a
    save: the admin's password form, `manage.py changepassword`) revokes every API token
    of the user, as it ends their other sessions. The tokens were got with the old
    password: after a reset of a stolen one they kept working for up to
    ALLOT_TOKEN_TTL_DAYS. Django's rehash of a password at sign-in is not a change (it
    clears `_password` before saving) and revokes nothing; neither does a new user."""
    if created or getattr(instance, "_password", None) is None:
        return
    found = ApiToken.objects.filter(user=instance)
    if found.exists():
        tokens_revoke(
            found,
            kind=TokenEventKind.PASSWORD_CHANGED,
            actor=_request_actor(),
            reason="the password changed",
        )


def tokens_prune_expired(*, now: dt.datetime | None = None) -> int:
    """Delete every token past its expiry (knox removes an expired token only when
    someone tries it); returns how many. Tokens without an expiry are kept."""
    found = ApiToken.objects.filter(expiry__lt=now or timezone.now())
    return tokens_revoke(found, kind=TokenEventKind.EXPIRED, actor=None, reason="expired")
