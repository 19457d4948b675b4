from rest_framework import serializers

from config.api_fields import InputSerializer, StrictInput, TextField


class TokenCreateInput(StrictInput):
    username = TextField(max_length=150)
    password = TextField(max_length=4096, trim_whitespace=False)
    name = TextField(
        max_length=100, required=False, allow_blank=True, help_text="e.g. 'laptop' or 'CI'"
    )


class TokenOutput(serializers.Serializer):
    token_key = serializers.CharField(help_text="The token's first characters; names it")
    name = serializers.CharField()
    created = serializers.DateTimeField()
    expiry = serializers.DateTimeField(allow_null=True, help_text="null: never expires")


class TokenCreatedOutput(TokenOutput):
    token = serializers.CharField(help_text="The secret; shown this once, stored only hashed")


class TokenListOutput(TokenOutput):
    current = serializers.BooleanField(
        help_text="The token this request was sent with (false for every token on a "
        "session's request)"
    )


class TokenRevokeAllQuery(InputSerializer):
    keep_current = serializers.BooleanField(
        required=False,
        default=False,
        help_text="Keep the token this request was sent with: revoke every other one "
        "(on a session's request, which sends none, every token is revoked)",
    )
