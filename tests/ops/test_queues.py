"""Long tasks go to the "background" queue, cycles to "celery" (config/settings/base.py),
and every production worker command consumes the queues an operator expects
(docs/operations.md#queues)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from django.conf import settings

from config.celery import app

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"
LONG = ["scheduler.preview_run", "scheduler.refresh_etas", "scheduler.collect_utilization"]
CYCLES = ["scheduler.run_cycle", "scheduler.enqueue_due_cycles"]


def _queue(task_name: str) -> str:
    return app.amqp.router.route({}, task_name, args=(1,))["queue"].name


@pytest.mark.parametrize("task_name", LONG)
def test_a_long_task_goes_to_the_background_queue(task_name):
    assert _queue(task_name) == settings.BACKGROUND_QUEUE == "background"


@pytest.mark.parametrize("task_name", CYCLES)
def test_cycles_stay_on_the_default_queue(task_name):
    assert _queue(task_name) == "celery"


def test_the_worker_roles_consume_both_queues_or_the_background_one():
    script = (DEPLOY / "allot-run").read_text()
    roles = dict(re.findall(r"^(\w+)\)\n((?:\s+.*\n)+?)\s+;;", script, re.M))
    assert '--queues "${ALLOT_WORKER_QUEUES:-celery,background}"' in roles["worker"]
    assert "--queues background" in roles["background"]
    unit = (DEPLOY / "systemd" / "allot-background@.service").read_text()
    assert "ExecStart=/opt/allot/app/deploy/allot-run background" in unit
