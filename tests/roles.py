"""Helpers to act as a role in tests: API tokens for users."""

from accounts.services import token_create


def token_for(user) -> str:
    """A fresh API token (its secret) for `user`."""
    return token_create(user=user, name="test")[1]
