"""API token authentication: knox tokens sent as `Authorization: Token <token>` (knox's
own prefix) or `Authorization: Bearer <token>` (what OpenAPI's bearer scheme makes a
generated client send).

A request reads its token once: one plain statement for the token row and its user,
and in a read (GET, HEAD, OPTIONS) the user's roles, which the permission check then
takes from `budgets.permissions`' per-request memo (`authenticate_credentials`; `config.plainsql`: compiling the ORM query cost more than
the lookup). knox's own check also loads every other token of the user
on each request to delete the expired ones; here the hourly prune
(`accounts.prune_expired_tokens`) does that, and an expired token is refused (and
deleted, recorded as a `TokenEvent`) when it is tried. Nothing is cached between requests, so a revoked token, or
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

from accounts import services
from accounts.models import ApiToken, TokenEventKind
from budgets import permissions
from config.plainsql import columns, fetch_all, instance

INVALID = "Invalid token."


@functools.cache
def _token_sql(with_roles: bool) -> str:
    user, fk = get_user_model(), ApiToken._meta.get_field("user").column
    pk = f'u."{user._meta.pk.column}"'
    roles = f", {permissions.roles_select(pk)}" if with_roles else ""
    return (
        f"SELECT {columns(ApiToken, 't')}, {columns(user, 'u')}{roles} "
        f'FROM "{ApiToken._meta.db_table}" t INNER JOIN "{user._meta.db_table}" u '
        f'ON {pk} = t."{fk}" WHERE t."token_key" = %s'
    )


def tokens_with_users(token_key: str) -> list[ApiToken]:
    """The token rows with `token_key`, each with its user, read in one statement; in a
    request that reads roles once (a read), each user's roles come with it
    (`budgets.permissions.remember_roles`), so the permission check reads nothing."""
    with_roles = permissions.roles_reading_once()
    found = []
    for row in fetch_all(_token_sql(with_roles), [token_key], native_times=True, prepared=True):
        token, at = instance(ApiToken, row)
        token.user, at = instance(get_user_model(), row, at)
        if with_roles:
            token.user_roles = (row[at], row[at + 1])
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
                services.tokens_revoke(
                    ApiToken.objects.filter(pk=row.pk),
                    kind=TokenEventKind.EXPIRED,
                    actor=None,
                    reason="expired (refused when tried)",
                )
                token_expired.send(sender=type(self), username=username, source="auth_token")
                break
            found = self.validate_user(row)
            if hasattr(row, "user_roles"):  # read with the token (`tokens_with_users`)
                permissions.remember_roles(row.user.pk, *row.user_roles)
            return found
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
