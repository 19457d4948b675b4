"""API token authentication: knox tokens sent as `Authorization: Token <token>` (knox's
own prefix) or `Authorization: Bearer <token>` (what OpenAPI's bearer scheme makes a
generated client send).

A request reads its token once: one query for the token row and its user
(`authenticate_credentials`). knox's own check also loads every other token of the user
on each request to delete the expired ones; here the hourly prune
(`accounts.prune_expired_tokens`) does that, and an expired token is refused (and
deleted) when it is tried. Nothing is cached between requests, so a revoked token, or
one of a deactivated user, stops working at once."""

from __future__ import annotations

import binascii
from hmac import compare_digest

from django.utils import timezone
from drf_spectacular.extensions import OpenApiAuthenticationExtension
from knox.auth import TokenAuthentication
from knox.crypto import hash_token
from knox.settings import CONSTANTS
from knox.signals import token_expired
from rest_framework import exceptions
from rest_framework.authentication import get_authorization_header

from accounts.models import ApiToken

INVALID = "Invalid token."


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
        rows = ApiToken.objects.select_related("user").filter(
            token_key=text[: CONSTANTS.TOKEN_KEY_LENGTH]
        )
        for row in rows:
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
