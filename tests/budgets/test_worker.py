"""A real Celery worker (a thread of the test process, on the real Redis broker)
applies a scheduled budget change once its time has come."""

import datetime as dt

import pytest
from django.utils import timezone

from budgets import services
from budgets.models import BudgetNode, ScheduledChange, ScheduledStatus
from budgets.tasks import apply_due_budget_changes
from config.celery import app


@pytest.fixture
def celery_worker_thread(settings):
    from celery.contrib.testing.worker import start_worker

    app.conf.task_always_eager = False
    try:
        with start_worker(app, pool="solo", perform_ping_check=False, shutdown_timeout=10):
            yield
    finally:
        app.conf.task_always_eager = True


@pytest.mark.django_db(transaction=True)
def test_worker_applies_due_scheduled_change(tree, celery_worker_thread):
    a1 = tree.node("a1")
    event = services.budget_change_create(
        actor=tree.user("lead-a"),
        reason="in a moment",
        changes=[{"node": a1.pk, "weight": 5}],
        effective_at=timezone.now() + dt.timedelta(hours=1),
    )
    assert apply_due_budget_changes.delay().get(timeout=30) == 0  # not due yet
    assert BudgetNode.objects.get(pk=a1.pk).weight != 5
    # its time comes (moved, not waited for: no wall-clock margin on the round trip)
    ScheduledChange.objects.filter(event=event).update(
        effective_at=timezone.now() - dt.timedelta(seconds=1)
    )
    assert apply_due_budget_changes.delay().get(timeout=30) == 1
    assert BudgetNode.objects.get(pk=a1.pk).weight == 5
    assert ScheduledChange.objects.get(event=event).status == ScheduledStatus.APPLIED
