"""A job's estimated start moves only with a cause, and the cause is said (issue 25):
`steady` keeps the shown start while the new range holds it; a move beyond the range
shown before carries why (a host down, a budget change, jobs submitted since)."""

import datetime as dt
import time

import pytest
from django.core.cache import cache
from django.utils import timezone

from budgets.services import budget_change_create
from scheduler.selectors import eta as eta_selectors
from scheduler.selectors.budget_changes import standing_change_notes
from scheduler.selectors.eta import job_eta
from scheduler.services.eta import cluster_etas
from tests.factories import AttemptFactory, ClusterFactory, HostFactory
from tests.support.live import submit_job

pytestmark = pytest.mark.django_db


def _submit(cluster, tree, gpus=4):
    return submit_job(
        cluster=cluster,
        project=tree.node("a1"),
        user=tree.user("ann"),
        at=timezone.now(),
        gpus=gpus,
    )


def _iso(t: float) -> str:
    return dt.datetime.fromtimestamp(t, tz=dt.UTC).isoformat()


def _epoch(text: str) -> float:
    return dt.datetime.fromisoformat(text).timestamp()


def _pretend_shown_before(cluster, job, days_ahead: float, **facts) -> float:
    """Rewrite the cached answer as if it had shown `job` starting `days_ahead` days
    from now (a two-hour range) and had seen the cluster `facts`; its start (epoch s)."""
    cycle_id, at, out, seen = cache.get(f"eta:{cluster.pk}")
    start = time.time() + days_ahead * 86400
    out[str(job.pk)] = {
        **out[str(job.pk)],
        "start": _iso(start),
        "earliest": _iso(start - 3600),
        "latest": _iso(start + 3600),
    }
    cache.set(f"eta:{cluster.pk}", (cycle_id, at, out, {**seen, **facts}), 600)
    return start


def test_a_first_estimate_has_no_move(cluster, tree):
    job = _submit(cluster, tree)
    shown = cluster_etas(cluster=cluster, fresh=True)[str(job.pk)]
    assert shown["method"] == "forward-simulation" and shown["moved"] is None
    assert job_eta(job=job)["moved"] is None


def test_a_move_after_a_budget_change_names_the_change_and_who_made_it(cluster, tree):
    job = _submit(cluster, tree)
    cluster_etas(cluster=cluster, fresh=True)
    before = time.time()
    seen = cache.get(f"eta:{cluster.pk}")[3]
    previous = _pretend_shown_before(cluster, job, 5, at=before)
    budget_change_create(
        actor=tree.user("ceo"),
        reason="Q4 review",
        changes=[{"node": tree.node("a1").pk, "weight": 40}],
    )
    shown = cluster_etas(cluster=cluster, fresh=True)[str(job.pk)]
    moved = shown["moved"]
    assert moved["previous_start"] == _iso(previous)
    # in the queue reasons' words, from the same function
    note = standing_change_notes(
        project_ids=[job.project_id],
        since=dt.datetime.fromtimestamp(before, tz=dt.UTC),
        until=timezone.now(),
    )[job.project_id]
    assert moved["because"] == note
    assert note.startswith("a1's weight changed 70 -> 40 at ") and " by ceo " in note
    assert cache.get(f"eta:{cluster.pk}")[3]["tree_version"] == seen["tree_version"] + 1
    # the next answer, with nothing new, keeps the explanation: a start of "now" follows
    # the clock by seconds, which is no move to explain
    again = cluster_etas(cluster=cluster, fresh=True)[str(job.pk)]
    assert again["moved"] == moved
    assert _epoch(again["start"]) - _epoch(shown["start"]) < 60


def test_a_budget_change_that_leaves_the_jobs_share_alone_is_not_its_cause(cluster, tree):
    """b1 (prog-b's only child) changes weight: the tree's version moves, a1's entitled
    share does not, so the a1 job's move is not explained by that change."""
    job = _submit(cluster, tree)
    cluster_etas(cluster=cluster, fresh=True)
    _pretend_shown_before(cluster, job, 5, at=time.time())
    budget_change_create(
        actor=tree.user("ceo"),
        reason="b1 grows alone",
        changes=[{"node": tree.node("b1").pk, "weight": 5}],
    )
    moved = cluster_etas(cluster=cluster, fresh=True)[str(job.pk)]["moved"]
    assert moved is not None
    assert "weight changed" not in moved["because"] and "b1" not in moved["because"]


# A start shown a day ago that is now "now" moved later; one shown days ahead that is now
# "now" moved sooner (the job fits at once on the test cluster).
LATER, SOONER = -1, 3


def test_a_move_after_a_host_went_down_says_so(cluster, tree):
    job = _submit(cluster, tree)
    cluster_etas(cluster=cluster, fresh=True)
    _pretend_shown_before(cluster, job, LATER, hosts_healthy=3, hosts=3)
    moved = cluster_etas(cluster=cluster, fresh=True)[str(job.pk)]["moved"]
    assert moved["because"] == "a host went down (2 of 2 hosts healthy, 3 before)"


def test_a_move_after_new_submissions_counts_those_that_start_first(cluster, tree):
    job = _submit(cluster, tree)
    cluster_etas(cluster=cluster, fresh=True)
    newer = _submit(cluster, tree)
    _pretend_shown_before(cluster, job, LATER, pending=[str(job.pk)])
    shown = cluster_etas(cluster=cluster, fresh=True)
    assert shown[str(job.pk)]["moved"]["because"] == "1 job submitted since start before it"
    assert shown[str(newer.pk)]["moved"] is None  # new: nothing shown before


def test_a_sooner_start_is_never_put_on_what_can_only_delay_it(cluster, tree):
    """A job page said "moved from 13:02 ...: 2 jobs submitted since start before it" of
    an estimate that had moved to 12:04: new jobs ahead and a host down delay a job, they
    do not bring its start closer."""
    job = _submit(cluster, tree)
    cluster_etas(cluster=cluster, fresh=True)
    _submit(cluster, tree)
    _pretend_shown_before(cluster, job, SOONER, pending=[str(job.pk)], hosts_healthy=3, hosts=3)
    moved = cluster_etas(cluster=cluster, fresh=True)[str(job.pk)]["moved"]
    assert _epoch(moved["previous_start"]) > time.time() + 86400  # it came closer
    assert moved["because"] == (
        "jobs ahead of it left the queue or running jobs are ending sooner than forecast"
    )


def test_a_sooner_start_after_a_host_came_back_says_so(cluster, tree):
    job = _submit(cluster, tree)
    cluster_etas(cluster=cluster, fresh=True)
    _pretend_shown_before(cluster, job, SOONER, hosts_healthy=1, hosts=2)
    moved = cluster_etas(cluster=cluster, fresh=True)[str(job.pk)]["moved"]
    assert moved["because"] == "a host came back (2 of 2 hosts healthy)"


def test_without_a_known_cause_the_move_is_put_on_the_runtimes(cluster, tree):
    job = _submit(cluster, tree)
    cluster_etas(cluster=cluster, fresh=True)
    _pretend_shown_before(cluster, job, LATER)
    moved = cluster_etas(cluster=cluster, fresh=True)[str(job.pk)]["moved"]
    assert moved["because"] == "running jobs are ending later than forecast"


def test_the_job_page_and_api_say_why_the_estimate_moved(cluster, tree, client, monkeypatch):
    job = _submit(cluster, tree)
    eta = {
        "start": "2026-12-02T17:30:00+00:00",
        "earliest": "2026-12-02T17:01:00+00:00",
        "latest": "2026-12-02T19:45:00+00:00",
        "method": "forward-simulation",
        "baseline_start": None,
        "moved": {
            "at": "2026-12-02T15:04:00+00:00",
            "previous_start": "2026-12-02T20:56:00+00:00",
            "because": "a host went down (15 of 16 hosts healthy, 16 before)",
        },
    }
    monkeypatch.setattr(eta_selectors, "job_eta", lambda job, current=None: eta)
    client.force_login(tree.user("bob"))
    html = client.get(f"/jobs/{job.pk}/waiting/", HTTP_HX_REQUEST="true").content.decode()
    assert 'id="eta-moved"' in html and '<time datetime="2026-12-02T20:56:00Z"' in html
    assert "a host went down (15 of 16 hosts healthy, 16 before)" in html


# ---------------------------------------------------------------- a calibrated range


def test_a_started_job_adds_its_first_estimate_and_real_start_to_the_calibration(cluster, tree):
    job = _submit(cluster, tree)
    cluster_etas(cluster=cluster, fresh=True)
    first = cache.get(f"eta:{cluster.pk}")[3]["first"][str(job.pk)]
    started = timezone.now()
    AttemptFactory(
        job=job,
        number=1,
        attempt_id=f"{job.pk}-1",
        cluster=cluster,
        project=job.project,
        gpus=job.gpus,
        placements=[],
        allocated=True,
        state="running",
        created_at=started,
        started_at=started,
    )
    job.state = "running"
    job.save(update_fields=["state"])
    cluster_etas(cluster=cluster, fresh=True)
    assert cache.get(f"eta-calibration:{cluster.pk}") == [(*first, started.timestamp())]


def test_ranges_widen_by_how_far_recent_real_starts_fell_outside(cluster, tree):
    job = _submit(cluster, tree)
    narrow = cluster_etas(cluster=cluster, fresh=True)[str(job.pk)]
    assert narrow["earliest"] == narrow["latest"]  # it starts with the next cycle
    # 30 recent jobs started one expected wait (100 s) after their stated latest start
    cache.set(f"eta-calibration:{cluster.pk}", [(0.0, 100.0, 50.0, 150.0, 250.0)] * 30, None)
    wide = cluster_etas(cluster=cluster, fresh=True)[str(job.pk)]
    # widened by 1 x the expected wait (at least a minute) on each side, never before now
    assert _epoch(wide["latest"]) - _epoch(wide["start"]) == pytest.approx(60.0, abs=1)
    assert wide["earliest"] == wide["start"]


# ---------------------------------------------------------- a job that runs and is requeued


def _attempt(job, number: int, started: dt.datetime, state: str = "running"):
    return AttemptFactory(
        job=job,
        number=number,
        attempt_id=f"{job.pk}-{number}",
        placements=[],
        state=state,
        created_at=started,
        started_at=started,
    )


def _set_state(job, state: str, queued_at: dt.datetime | None = None) -> None:
    job.state = state
    fields = ["state"]
    if queued_at is not None:
        job.queued_at = queued_at
        fields.append("queued_at")
    job.save(update_fields=fields)


def test_a_job_requeued_after_the_last_answer_is_being_estimated_not_beyond_the_horizon(
    cluster, tree
):
    """Two consecutive answers around a preemption: the job runs when the first one is
    computed, is requeued, then the second one dates it. In between it read "over 30
    days" (an answer newer than its submission that did not know it), then "now"."""
    job = _submit(cluster, tree)
    _attempt(job, 1, timezone.now())
    _set_state(job, "running")
    cluster_etas(cluster=cluster, fresh=True)  # the job runs: not in this answer
    job.attempts.update(state="ended", ended_at=timezone.now())
    _set_state(job, "pending", queued_at=timezone.now())  # preempted and requeued
    job.refresh_from_db()
    waiting = job_eta(job=job)
    assert waiting["method"] == "estimating" and waiting["start"] is None
    # the queue page reads the same answer the same way
    row = eta_selectors.etas_for_page(cluster_id=cluster.pk, queued={job.pk: job.queued_at})
    assert row[job.pk]["method"] == "estimating"
    cluster_etas(cluster=cluster, fresh=True)  # the next answer knows it
    dated = job_eta(job=job)
    assert dated["method"] == "forward-simulation" and dated["start"] is not None


def test_an_answer_computed_after_the_job_queued_without_it_still_says_no_estimate(
    cluster, tree, monkeypatch
):
    job = _submit(cluster, tree)
    cluster_etas(cluster=cluster, fresh=True)
    # the answer did not see the job (its project left the engine's view)
    cache.delete(f"eta:{cluster.pk}:job:{job.pk}")
    eta = job_eta(job=job)
    assert eta["method"] == "forward-simulation" and eta["start"] is None


def test_a_requeued_job_calibrates_with_the_start_that_ended_its_wait(cluster, tree):
    """The calibration record of a requeued job's wait: its first estimate of that wait
    and the attempt that started after it, not the first attempt (which started before
    the estimate: a miss of many waits that widened every range)."""
    job = _submit(cluster, tree)
    first_run = timezone.now() - dt.timedelta(minutes=10)
    _attempt(job, 1, first_run, state="ended")
    _set_state(job, "pending", queued_at=timezone.now())
    cluster_etas(cluster=cluster, fresh=True)
    first = cache.get(f"eta:{cluster.pk}")[3]["first"][str(job.pk)]
    assert first[0] > first_run.timestamp()
    started = timezone.now()
    _attempt(job, 2, started)
    _set_state(job, "running")
    cluster_etas(cluster=cluster, fresh=True)
    assert cache.get(f"eta-calibration:{cluster.pk}") == [(*first, started.timestamp())]


def test_a_job_that_left_the_queue_without_starting_adds_no_calibration(cluster, tree):
    job = _submit(cluster, tree)
    _attempt(job, 1, timezone.now() - dt.timedelta(minutes=10), state="ended")
    _set_state(job, "pending", queued_at=timezone.now())
    cluster_etas(cluster=cluster, fresh=True)
    _set_state(job, "cancelled")
    cluster_etas(cluster=cluster, fresh=True)
    assert not cache.get(f"eta-calibration:{cluster.pk}")


# ------------------------------------------------------------ a faster simulated cluster


def test_a_faster_simulated_cluster_forecasts_from_the_runs_it_ran_itself(tree):
    """The demo's cluster runs 60x; its back-filled history (stored before the cluster
    was added, replayed at the wall clock's speed) ran 60x longer than the same jobs
    live. Mixed in, a running job's forecast end jumped between seconds and an hour as
    it aged, and the starts behind it with it."""
    fast = ClusterFactory(name="fast", host_count=1, adapter_options={"speed": 60})
    HostFactory(cluster=fast, gpus=8)
    job = _submit(fast, tree)
    added = fast.created_at
    for k in range(25):  # back-filled: an hour each, before the cluster was added
        started = added - dt.timedelta(hours=3, minutes=k)
        _ended(job, 100 + k, started, dt.timedelta(hours=1))
    for k in range(25):  # live: a minute each
        started = added + dt.timedelta(seconds=1 + k)
        _ended(job, 200 + k, started, dt.timedelta(minutes=1))
    runtimes = {
        r[4]
        for r in eta_selectors.runtime_history(
            cluster_id=fast.pk,
            now=timezone.now() + dt.timedelta(hours=1),
            speed=fast.clock_speed,
            ran_since=eta_selectors.clock_since(fast),
        )
    }
    assert runtimes == {60.0}
    # a cluster at the wall clock's speed keeps all of its history
    assert eta_selectors.clock_since(ClusterFactory(name="real")) is None


def _ended(job, number: int, started: dt.datetime, ran: dt.timedelta) -> None:
    attempt = _attempt(job, number, started, state="ended")
    attempt.ended_at = started + ran
    attempt.end_reason = "succeeded"
    attempt.save(update_fields=["ended_at", "end_reason"])


def test_the_runtime_history_comes_in_the_order_the_attempts_finished(cluster, tree):
    """The forecast counts a key's most recently finished runtimes (`RECENT`): the
    history must say which those are, whatever order the database returns."""
    job = _submit(cluster, tree)
    start = timezone.now() - dt.timedelta(hours=5)
    # started in this order, finished in the reverse one: 4 h, 3 h, 2 h, 1 h long
    for k, hours in enumerate((4, 3, 2, 1)):
        _ended(job, 10 + k, start + dt.timedelta(minutes=k), dt.timedelta(hours=hours))
    runtimes = [
        r[4] for r in eta_selectors.runtime_history(cluster_id=cluster.pk, now=timezone.now())
    ]
    assert runtimes == [3600.0, 7200.0, 10800.0, 14400.0]
