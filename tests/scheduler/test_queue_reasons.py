"""Queue reasons speak the glossary's language (docs/concepts.md): the figure a reason
quotes has the name of its glossary entry, never the name of another figure."""

from __future__ import annotations

import datetime as dt

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone
from rest_framework.test import APIClient

from allot_cli import render
from allot_common.figures import usage_window_text
from budgets import services
from budgets.models import BudgetEvent
from scheduler.core.engine.explain import FOR_GPUS, STANDING
from scheduler.selectors.jobs import job_blockers, job_queue_info, queue_page
from scheduler.selectors.queue import iter_entries, queue_snapshot
from scheduler.selectors.standing import job_standings

pytestmark = pytest.mark.django_db


def queue_page_factor(live, job) -> str:
    """The FS column `allot queue` shows for a job (render.factor of the API's field)."""
    client = APIClient()
    client.force_authenticate(live.tree.user("ceo"))
    rows = client.get("/api/v1/queue/", {"cluster": live.cluster.name}).json()["results"]
    return render.factor(next(r for r in rows if r["job"] == job.pk)["fairshare_factor"])


def _fill_and_wait(live, project: str = "a1"):
    """Four 8-GPU jobs fill the cluster; a fifth of `project` waits for them."""
    for _ in range(4):
        live.submit("a2", gpus=8, min_runtime_s=3600)
    live.cycle()
    waiting = live.submit(project, gpus=8, min_runtime_s=3600)
    live.cycle(advance_s=60)
    return live.job(waiting)


def test_the_reason_quotes_usage_relative_to_entitled_share_not_entitlement(live):
    """The reason's percentage is usage / entitled share of the healthy GPUs: named
    "of its entitled share", not "entitlement" (the delivery dashboard's delivery
    ratio divides delivered by the demand-capped entitlement, a different figure)."""
    job = _fill_and_wait(live)
    budget = [b for b in job_blockers(job) if b["kind"] == "budget"]
    assert len(budget) == 1
    text = budget[0]["text"]
    assert "project org/prog-a/a1 is at 0% of its entitled share over 7 days" in text
    assert "entitlement" not in text


def test_a_project_without_entitlement_has_no_rank_and_is_not_counted(live):
    """b1 at weight 0: its jobs' reasons say "no entitlement" (no rank, no factor), and
    the ranks of the others count only the projects with an entitlement (a1, a2)."""
    waiting = _fill_and_wait(live, "a1")
    budget_b1 = live.submit("b1", gpus=8, min_runtime_s=3600)  # while b1 still had a weight
    services.budget_change_create(
        actor=live.tree.user("ceo"),
        reason="b1 pauses",
        changes=[{"node": live.tree.node("b1").pk, "weight": 0}],
    )
    free_b1 = live.submit("b1", gpus=8, min_runtime_s=0)
    live.cycle(advance_s=60)
    a1 = job_queue_info(live.job(waiting))
    assert "(fair-share rank 1 of 2)" in a1["reason"]
    entries = {
        e["job"]: e for e in iter_entries(queue_snapshot(cluster_id=live.cluster.pk).entries)
    }
    client = APIClient()
    client.force_authenticate(live.tree.user("ceo"))
    queue = client.get("/api/v1/queue/", {"cluster": live.cluster.name}).json()["results"]
    rows = {row["job"]: row for row in queue}
    fairshare = client.get("/api/v1/fairshare/", {"cluster": live.cluster.name}).json()
    b1 = next(n for n in fairshare["nodes"] if n["path"] == "org/prog-b/b1")
    assert b1["fairshare"] is None and b1["rank"] is None
    for job in (free_b1, budget_b1):
        info = job_queue_info(live.job(job))
        assert "no entitlement" in info["reason"]
        assert "rank" not in info["reason"]
        # no factor and no rank, as API `fairshare/` says (not a factor 0 and a rank 3)
        assert info["fairshare_factor"] is None
        assert entries[job.pk]["project_rank"] is None and entries[job.pk]["metric"] is None
        assert rows[job.pk]["project_rank"] is None and rows[job.pk]["fairshare_factor"] is None
        assert queue_page_factor(live, job) == "–"
    assert entries[waiting.pk]["project_rank"] == 1
    assert rows[waiting.pk]["project_rank"] == 1 and rows[waiting.pk]["fairshare_factor"] >= 0


def test_a_weight_change_in_the_window_is_told_in_the_reason(live):
    """lead-a cuts a1 70 -> 30: the waiting a1 job's reason names the change, when and
    by whom, on the job page, the queue (API and page) and the jobs list alike."""
    waiting = _fill_and_wait(live, "a1")
    services.budget_change_create(
        actor=live.tree.user("lead-a"),
        reason="a2 needs more",
        changes=[{"node": live.tree.node("a1").pk, "weight": 30}],
    )
    live.cycle(advance_s=60)
    note = (
        "a1's weight changed 70 -> 30 at "
        f"{timezone.now().astimezone(dt.UTC):%Y-%m-%d} "  # the date; the minute may turn
    )
    reason = job_queue_info(live.job(waiting))["reason"]
    assert STANDING in reason and note in reason
    assert "by lead-a (entitled share of org/prog-a/a1 35.00% -> 25.00%)" in reason
    row = next(
        r
        for r in queue_page(cluster=live.cluster, offset=0, limit=50).rows
        if r["job"] == waiting.pk
    )
    assert row["reason"] == reason
    assert job_standings([live.job(waiting)])[waiting.pk]["reason"] == reason
    # the jobs that run are not told; a2's waiting job would be (its share moved too)
    b1 = live.submit("b1", gpus=8, min_runtime_s=3600)
    live.cycle(advance_s=60)
    assert "weight changed" not in job_queue_info(live.job(b1))["reason"]


def test_a_change_that_made_a_project_first_is_told_in_its_reason_too(live):
    """On the demo, manager moved post-training 25 -> 45 and it went from rank 3 to
    rank 1; its jobs' reason, "waiting for GPUs: no project ranks above project
    post-training (fair-share rank 1 of 9)", quotes its rank but did not say why it
    changed (only a reason quoting the standing's percentage was told)."""

    waiting = _fill_and_wait(live, "b1")  # prog-b has used nothing: b1 ranks first
    assert job_queue_info(live.job(waiting))["reason"].startswith(FOR_GPUS)
    services.budget_change_create(
        actor=live.tree.user("ceo"),
        reason="more for b",
        changes=[{"node": live.tree.node("prog-b").pk, "weight": 70}],
    )
    live.cycle(advance_s=60)
    reason = job_queue_info(live.job(waiting))["reason"]
    assert reason.startswith(FOR_GPUS) and "prog-b's weight changed 50 -> 70 at " in reason
    assert "by ceo (entitled share of org/prog-b/b1 50.00% -> 58.33%)" in reason
    assert job_standings([live.job(waiting)])[waiting.pk]["reason"] == reason


def test_a_change_applied_after_the_queue_was_read_is_told_at_once(live):
    """The queue's copy this process keeps says whether a change falls in its window as
    of each read, not as of the first: the reason read before the change has no note and
    skips the notes' statement; the one read after it (same queue, no cycle between) has
    the note."""
    waiting = _fill_and_wait(live, "a1")
    with CaptureQueriesContext(connection) as before:
        reason = job_queue_info(live.job(waiting))["reason"]
    assert STANDING in reason and "weight changed" not in reason
    assert not any("budgets_budgeteventitem" in q["sql"] for q in before.captured_queries)
    services.budget_change_create(
        actor=live.tree.user("lead-a"),
        reason="a2 needs more",
        changes=[{"node": live.tree.node("a1").pk, "weight": 30}],
    )
    after = job_queue_info(live.job(waiting))["reason"]
    assert after.startswith(reason) and "a1's weight changed 70 -> 30 at " in after
    row = next(
        r
        for r in queue_page(cluster=live.cluster, offset=0, limit=50).rows
        if r["job"] == waiting.pk
    )
    assert row["reason"] == after


def test_a_change_before_the_window_is_not_told(live):
    services.budget_change_create(
        actor=live.tree.user("lead-a"),
        reason="long ago",
        changes=[{"node": live.tree.node("a1").pk, "weight": 30}],
        now=timezone.now() - dt.timedelta(days=8),
    )
    assert BudgetEvent.objects.get(reason="long ago").effective_at < live.now - dt.timedelta(days=7)
    waiting = _fill_and_wait(live, "a1")
    assert "weight changed" not in job_queue_info(live.job(waiting))["reason"]


def test_a_decayed_window_is_named_alike_on_every_surface(live):
    """With a half-life, usage is decayed usage: the queue reason, API `fairshare/`
    (`usage_window`, beside `raw_usage`) and the fair-share dashboard say so in the same
    words, from one function (`allot_common.figures.usage_window_text`); the dashboard
    once said "usage over its 7-day window"."""
    live.cluster.half_life_s = 7200
    live.cluster.save(update_fields=["half_life_s"])
    job = _fill_and_wait(live)
    said = usage_window_text(live.cluster.lookback_s, 7200)
    assert said == "over a decayed window (half-life 2.0 h)"
    assert f"{STANDING} {said}" in job_queue_info(job)["reason"]
    client = APIClient()
    client.force_login(live.tree.user("ceo"))
    answer = client.get("/api/v1/fairshare/", {"cluster": live.cluster.name}).json()
    assert answer["usage_window"] == said
    page = client.get(
        "/dashboards/fairshare/", {"cluster": live.cluster.pk, "days": 7}
    ).content.decode()
    assert f"usage {said}," in page and "-day window" not in page


def test_a_first_ranked_project_first_in_line_waits_for_capacity_not_its_budget(live):
    """b1 ranks first (no usage; a2 used the cluster) and its job is first in line:
    no better-ranked project's jobs are ahead of it, so its budget holds nothing back.
    Its reason does not quote its standing as the cause and the job page lists capacity
    alone; a1's job behind it (rank 2) is held back by its budget, listed first."""
    first = _fill_and_wait(live, "b1")
    reason = job_queue_info(first)["reason"]
    assert reason.startswith("waiting for GPUs: no project ranks above project org/prog-b/b1")
    assert "(fair-share rank 1 of 3)" in reason and STANDING not in reason
    blockers = job_blockers(first)
    assert [b["kind"] for b in blockers] == ["capacity"]
    # the capacity blocker leads with the cycle's words (the job page shows them there)
    assert blockers[0]["text"].startswith(
        "no project ranks above project org/prog-b/b1 (fair-share rank 1 of 3); no free GPUs; "
        "0 jobs ahead of it in the queue; "
    )
    behind = live.submit("a1", gpus=8, min_runtime_s=3600)
    live.cycle(advance_s=60)
    blockers = job_blockers(live.job(behind))
    assert [b["kind"] for b in blockers] == ["budget", "capacity"]
    assert "(fair-share rank 2 of 3); 1 project ranks above it" in blockers[0]["text"]
