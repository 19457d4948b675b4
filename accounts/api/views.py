"""Sign in for a token; list and revoke your own tokens."""

from __future__ import annotations

from django.contrib.auth import authenticate
from drf_spectacular.utils import extend_schema
from rest_framework import status
from rest_framework.permissions import AllowAny, IsAuthenticated
from rest_framework.response import Response

from accounts import selectors, services
from accounts.api import serializers as s
from accounts.lockout import cooloff_seconds, lockout_message
from accounts.models import ApiToken
from config.api_fields import refuse_any_field
from config.api_views import ApiView
from config.errors import Throttled, ValidationFailed
from config.query import read_api_query


class TokenCreateApi(ApiView):
    """Exchange a user name and password for a new token (rate-limited by django-axes)."""

    authentication_classes: list = []
    permission_classes = [AllowAny]
    documents_throttling = True  # config.api_schema adds the 429

    @extend_schema(
        request=s.TokenCreateInput,
        responses={200: s.TokenCreatedOutput},
        summary="Sign in: a new API token (send it as `Authorization: Token <token>`)",
    )
    def post(self, request):
        serializer = s.TokenCreateInput(data=request.data)
        serializer.is_valid(raise_exception=True)
        data = serializer.validated_data
        user = authenticate(request._request, username=data["username"], password=data["password"])
        if getattr(request._request, "axes_locked_out", False):
            error = Throttled(lockout_message())
            error.headers["Retry-After"] = str(cooloff_seconds())
            raise error
        if user is None or not user.is_active:
            raise ValidationFailed("Unable to sign in with this user name and password.")
        token, secret = services.token_create(user=user, name=data.get("name", ""))
        body = s.TokenCreatedOutput({**s.TokenOutput(token).data, "token": secret}).data
        return Response(body, status=status.HTTP_200_OK)


def _token_in_use(request) -> ApiToken | None:
    """The token row the request was authenticated with (None: a session's request)."""
    return request.auth if isinstance(request.auth, ApiToken) else None


class TokenListApi(ApiView):
    permission_classes = [IsAuthenticated]  # a user without a role manages their tokens too

    @extend_schema(
        responses=s.TokenListOutput(many=True),
        summary="Your live API tokens, newest first (never their secrets)",
    )
    def get(self, request):
        in_use = _token_in_use(request)
        rows = [
            {**s.TokenOutput(token).data, "current": in_use is not None and token.pk == in_use.pk}
            for token in selectors.tokens_of(user=request.user)
        ]
        return Response(s.TokenListOutput(rows, many=True).data)

    @extend_schema(
        parameters=[s.TokenRevokeAllQuery],
        responses={204: None},
        summary="Revoke all your API tokens (`keep_current=true`: all but the one in use)",
        operation_id="v1_auth_tokens_destroy_all",
    )
    def delete(self, request):
        query = read_api_query(s.TokenRevokeAllQuery, request).validated_data
        refuse_any_field(request.data)
        keep = _token_in_use(request) if query["keep_current"] else None
        services.token_revoke_all(user=request.user, keep=keep)
        return Response(status=status.HTTP_204_NO_CONTENT)


class TokenDetailApi(ApiView):
    permission_classes = [IsAuthenticated]

    @extend_schema(responses={204: None}, summary="Revoke one of your API tokens")
    def delete(self, request, token_key: str):
        refuse_any_field(request.data)
        services.token_revoke(user=request.user, token_key=token_key)
        return Response(status=status.HTTP_204_NO_CONTENT)
