"""API token authentication: knox tokens sent as `Authorization: Token <token>` (knox's
own prefix) or `Authorization: Bearer <token>` (what OpenAPI's bearer scheme makes a
generated client send).

A request reads its token once: one plain statement for the token row and its user
(`authenticate_credentials`; `config.plainsql`: compiling the ORM query cost more than
the lookup). knox's own check also loads every other token of the user
on each request to delete the expired ones; here the hourly prune
(`accounts.prune_expired_tokens`) does that, and an expired token is refused (and
deleted) when it is tried. Nothing is cached between requests, so a revoked token, or
one of a deactivated user, stops working at once."""

from __future__ import annotations

import binascii
import functools
from hmac import compare_digest

from django.contrib.auth import get_user_model
from django.utils import timezone
from drf_spectacular.extensions import OpenApiAuthenticationExtension
from knox.auth import TokenAuthentication
from knox.crypto import hash_token
from knox.settings import CONSTANTS
from knox.signals import token_expired
from rest_framework import exceptions
from rest_framework.authentication import get_authorization_header

from accounts.models import ApiToken
from config.plainsql import columns, fetch_all, instance

INVALID = "Invalid token."


@functools.cache
def _token_sql() -> str:
    user, fk = get_user_model(), ApiToken._meta.get_field("user").column
    return (
        f"SELECT {columns(ApiToken, 't')}, {columns(user, 'u')} "
        f'FROM "{ApiToken._meta.db_table}" t INNER JOIN "{user._meta.db_table}" u '
        f'ON u."{user._meta.pk.column}" = t."{fk}" WHERE t."token_key" = %s'
    )


def tokens_with_users(token_key: str) -> list[ApiToken]:
    """The token rows with `token_key`, each with its user, read in one statement."""
    found = []
    for row in fetch_all(_token_sql(), [token_key]):
        token, at = instance(ApiToken, row)
        token.user, _ = instance(get_user_model(), row, at)
        found.append(token)
    return found


class BearerOrTokenAuthentication(TokenAuthentication):
    def authenticate(self, request):
        parts = get_authorization_header(request).split()
        if parts and parts[0].lower() == b"bearer":
            if len(parts) != 2:
                raise exceptions.AuthenticationFailed(
                    "Invalid token header: send `Authorization: Bearer <token>`."
                )
            return self.authenticate_credentials(parts[1])
        return super().authenticate(request)

    def authenticate_credentials(self, token: bytes):
        """(user, token row) for a live token of an active user, in one query."""
        try:
            text = token.decode("utf-8")
            digest = hash_token(text)
        except (UnicodeDecodeError, TypeError, ValueError, binascii.Error):
            raise exceptions.AuthenticationFailed(INVALID) from None
        for row in tokens_with_users(text[: CONSTANTS.TOKEN_KEY_LENGTH]):
            if not compare_digest(digest, row.digest):
                continue
            if row.expiry is not None and row.expiry < timezone.now():
                username = row.user.get_username()
                row.delete()
                token_expired.send(sender=type(self), username=username, source="auth_token")
                break
            return self.validate_user(row)
        raise exceptions.AuthenticationFailed(INVALID)


class BearerOrTokenScheme(OpenApiAuthenticationExtension):
    target_class = BearerOrTokenAuthentication
    name = "tokenAuth"

    def get_security_definition(self, auto_schema):
        return {
            "type": "http",
            "scheme": "bearer",
            "description": "An API token from `POST /api/v1/auth/token/`, sent as "
            "`Authorization: Bearer <token>` (`Authorization: Token <token>` works too)",
        }
