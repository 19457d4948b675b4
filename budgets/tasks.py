"""Celery tasks: thin wrappers around services."""

from celery import shared_task

from budgets.services import budget_apply_due_changes


@shared_task(autoretry_for=(ConnectionError,), retry_backoff=True, max_retries=5)
def apply_due_budget_changes() -> int:
    """Apply scheduled budget changes whose effective time has come."""
    return len(budget_apply_due_changes())
