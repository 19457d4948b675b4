"""Celery tasks of accounts: `prune_expired_tokens()` (beat, hourly)."""

from celery import shared_task

from accounts.services import tokens_prune_expired


@shared_task(name="accounts.prune_expired_tokens", ignore_result=True)
def prune_expired_tokens() -> int:
    """Delete API tokens past their expiry."""
    return tokens_prune_expired()
