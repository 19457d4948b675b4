"""Reads on API tokens."""

from django.db.models import QuerySet
from django.utils import timezone

from accounts.models import ApiToken


def tokens_of(*, user) -> QuerySet[ApiToken]:
    """`user`'s tokens that have not expired, newest first."""
    now = timezone.now()
    return ApiToken.objects.filter(user=user).exclude(expiry__lt=now).order_by("-created")
