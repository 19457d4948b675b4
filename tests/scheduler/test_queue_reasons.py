"""Queue reasons speak the glossary's language (docs/concepts.md): the figure a reason
quotes has the name of its glossary entry, never the name of another figure."""

from __future__ import annotations

import pytest

from scheduler.selectors.jobs import job_blockers
from tests.live.conftest import live  # noqa: F401  (the live fixture)

pytestmark = pytest.mark.django_db


def _fill_and_wait(live, project: str = "a1"):  # noqa: F811
    """Four 8-GPU jobs fill the cluster; a fifth of `project` waits for them."""
    for _ in range(4):
        live.submit("a2", gpus=8, min_runtime_s=3600)
    live.cycle()
    waiting = live.submit(project, gpus=8, min_runtime_s=3600)
    live.cycle(advance_s=60)
    return live.job(waiting)


def test_the_reason_quotes_usage_relative_to_entitled_share_not_entitlement(live):  # noqa: F811
    """The reason's percentage is usage / entitled share of the healthy GPUs: named
    "of its entitled share", not "entitlement" (the delivery dashboard's delivery
    ratio divides delivered by the demand-capped entitlement, a different figure)."""
    job = _fill_and_wait(live)
    budget = [b for b in job_blockers(job) if b["kind"] == "budget"]
    assert len(budget) == 1
    text = budget[0]["text"]
    assert "project org/prog-a/a1 is at 0% of its entitled share over 7 days" in text
    assert "entitlement" not in text
