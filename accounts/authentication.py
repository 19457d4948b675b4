"""API token authentication: knox tokens sent as `Authorization: Token <token>` (knox's
own prefix) or `Authorization: Bearer <token>` (what OpenAPI's bearer scheme makes a
generated client send)."""

from __future__ import annotations

from drf_spectacular.extensions import OpenApiAuthenticationExtension
from knox.auth import TokenAuthentication
from rest_framework import exceptions
from rest_framework.authentication import get_authorization_header


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
