"""The job page: who sees the spec, and a pending job's ranked blockers."""

import datetime as dt
import re
import time

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from scheduler.models import Attempt, Cluster, Host, HostHealth, JobState
from scheduler.selectors import room as room_selectors
from scheduler.selectors.jobs import BLOCKER_ORDER, job_blockers
from tests.factories import AttemptFactory, ClusterFactory, HostFactory
from tests.support.live import submit_job

pytestmark = pytest.mark.django_db

SPEC = {
    "image": "registry/train:7",
    "command": "python train.py --secret-flag",
    "env": {"SEED": "41"},
}


@pytest.fixture
def job(tree):
    cluster = ClusterFactory(name="h100", host_count=2, gpus_per_host=8)
    HostFactory.create_batch(2, cluster=cluster, gpus=8)
    job = submit_job(
        cluster=cluster, project=tree.node("a1"), user=tree.user("ann"), at=timezone.now(), gpus=4
    )
    job.spec = SPEC
    job.save(update_fields=["spec"])
    return job


def test_anonymous_users_are_sent_to_sign_in(job, client):
    response = client.get(f"/jobs/{job.pk}/")
    assert response.status_code == 302 and response.url.startswith("/accounts/login/")


@pytest.mark.parametrize(
    ("user", "sees_spec"),
    [("ann", True), ("pi-a1", True), ("lead-a", True), ("bob", False), ("lead-b", False)],
)
def test_spec_only_for_submitter_managers_and_staff(job, tree, client, user, sees_spec):
    client.force_login(tree.user(user))
    response = client.get(f"/jobs/{job.pk}/")
    assert response.status_code == 200
    html = response.content.decode()
    assert f"Job {job.pk}" in html and "Pending" in html and "Events" in html
    assert ("--secret-flag" in html) is sees_spec
    assert ("SEED=41" in html) is sees_spec


def test_unknown_job_is_404(tree, client):
    """A 404 page in the site's layout (it was Django's bare "Not Found"), naming the path
    and where to go; an unknown URL the same."""
    client.force_login(tree.user("bob"))
    for path in ("/jobs/999999/", "/no-such-page/"):
        response = client.get(path)
        assert response.status_code == 404
        html = response.content.decode()
        assert "<h1>Not found</h1>" in html and f"There is nothing at <code>{path}</code>." in html
        assert 'href="/me/">My jobs</a>' in html and "Sign out" in html  # the site's layout
        assert "Resolver404" not in html


def test_user_text_is_escaped(job, tree, client):
    job.name = "<script>alert(1)</script>"
    job.save(update_fields=["name"])
    client.force_login(tree.user("bob"))
    html = client.get(f"/jobs/{job.pk}/").content.decode()
    assert "<script>alert(1)" not in html and "&lt;script&gt;" in html


def test_blockers_ranked_misconfiguration_first(tree):
    # submitted while it fitted; then the cluster lost a host and b1 its budget
    cluster = ClusterFactory(name="small", host_count=2, gpus_per_host=8)
    gone, _ = HostFactory.create_batch(2, cluster=cluster, gpus=8)
    b1 = tree.node("b1")
    job = submit_job(
        cluster=cluster, project=b1, user=tree.user("lead-b"), at=timezone.now(), gpus=16
    )
    gone.delete()
    cluster.host_count = 1
    cluster.save(update_fields=["host_count"])
    b1.weight = 0
    b1.save(update_fields=["weight"])
    blockers = job_blockers(job)
    kinds = [b["kind"] for b in blockers]
    assert kinds == sorted(kinds, key=BLOCKER_ORDER.index)
    assert kinds[:2] == ["misconfiguration", "misconfiguration"]
    assert kinds[-1] == "capacity"
    assert blockers[0]["numbers"] == {"gpus": 16, "healthy_gpus": 8}


def test_a_job_that_fits_has_only_capacity_numbers(job):
    blockers = job_blockers(job)
    assert [b["kind"] for b in blockers] == ["capacity"]
    assert blockers[0]["numbers"]["hosts_that_fit"] == 2
    assert blockers[0]["numbers"]["free_gpus_on_them"] == 16


def test_a_long_job_is_told_about_the_short_job_reserve(job):
    job.min_runtime_s = 3600
    job.save(update_fields=["min_runtime_s"])
    assert job_blockers(job)[0]["numbers"]["hosts_held_for_short_jobs"] == 0
    cluster = job.cluster
    cluster.short_reserve_hosts, cluster.short_job_max_s = 1, 600
    cluster.save(update_fields=["short_reserve_hosts", "short_job_max_s"])
    job.refresh_from_db()
    capacity = job_blockers(job)[0]
    assert capacity["numbers"]["hosts_held_for_short_jobs"] == 1
    assert (
        "up to 1 host is held for jobs with a min runtime of at most 10 min (short-job "
        "reserve), and this job's is 1 h" in capacity["text"]
    )
    job.min_runtime_s = 600
    job.save(update_fields=["min_runtime_s"])
    assert job_blockers(job)[0]["numbers"]["hosts_held_for_short_jobs"] == 0


def test_no_blockers_once_ended(job):
    job.state = "succeeded"
    job.save(update_fields=["state"])
    assert job_blockers(job) == []


def test_a_pending_job_shows_its_estimated_start_and_range(job, tree, client):
    client.force_login(tree.user("bob"))
    html = client.get(f"/jobs/{job.pk}/").content.decode()
    # 4 GPUs on two empty 8-GPU hosts: it starts with the next cycle, i.e. now
    now = timezone.now()
    assert "Estimated start:" in html and f"{now:%Y-%m-%d}" in html
    assert "Reservation-only estimate" in html
    assert "likely between" not in html  # every runtime forecast gives the same start


def test_a_range_is_shown_only_when_its_ends_differ(job, tree, client, monkeypatch):
    from scheduler.selectors import eta as eta_selectors

    eta = {
        "start": "2099-12-02T17:30:00+00:00",
        "earliest": "2099-12-02T17:01:00+00:00",
        "latest": "2099-12-02T19:45:00+00:00",
        "method": "forward-simulation",
        "baseline_start": None,
        "moved": None,
    }
    monkeypatch.setattr(eta_selectors, "job_eta", lambda job, current=None: eta)
    client.force_login(tree.user("bob"))
    html = client.get(f"/jobs/{job.pk}/").content.decode()
    # in UTC for the page's text (a script shows each <time> in the reader's zone)
    assert '<time datetime="2099-12-02T17:30:00Z"' in html
    assert "(likely between 2099-12-02 17:01 UTC and 2099-12-02 19:45 UTC)" in page_text(html)
    eta["latest"] = None  # the slow forecast's run passed its horizon
    html = client.get(f"/jobs/{job.pk}/").content.decode()
    assert "(not before 2099-12-02 17:01 UTC)" in page_text(html)


def test_an_estimate_that_passed_without_a_start_reads_due_now(job, tree, client, monkeypatch):
    from scheduler.selectors import eta as eta_selectors

    passed = timezone.now() - dt.timedelta(minutes=3)
    eta = {
        "start": passed.isoformat(),
        "earliest": (passed - dt.timedelta(minutes=5)).isoformat(),
        "latest": (passed + dt.timedelta(hours=1)).isoformat(),
        "method": "forward-simulation",
        "baseline_start": None,
        "moved": None,
    }
    # the answer as a worker stored it; whether it is overdue is read at request time
    monkeypatch.setattr(
        eta_selectors, "cached_job_etas", lambda cluster_id, ids: (0, time.time(), {job.pk: eta})
    )
    client.force_login(tree.user("bob"))
    text = " ".join(page_text(client.get(f"/jobs/{job.pk}/").content.decode()).split())
    assert f"Estimated start: due now (it was expected by {passed:%Y-%m-%d %H:%M} UTC" in text
    assert "ago" not in text.split("Estimated start:")[1].split(".")[0]
    assert "likely between" not in text  # a range around a passed time says nothing
    assert client.get(f"/api/v1/jobs/{job.pk}/").json()["eta"]["overdue"] is True
    # half a minute late is still the estimate: cycles come every few seconds
    eta["start"] = (timezone.now() - dt.timedelta(seconds=30)).isoformat()
    text = page_text(client.get(f"/jobs/{job.pk}/").content.decode())
    assert "due now" not in text and "likely between" in text
    api = client.get(f"/api/v1/jobs/{job.pk}/").json()["eta"]
    assert api["overdue"] is False and api["start"] == eta["start"]


def page_text(html: str) -> str:
    """The page without its tags, as a reader sees it without the time script."""
    return re.sub(r"<[^>]+>", "", html)


def test_the_waiting_part_refreshes_itself_and_reloads_the_page_once_started(job, tree, client):
    client.force_login(tree.user("bob"))
    page = client.get(f"/jobs/{job.pk}/").content.decode()
    assert f'hx-get="/jobs/{job.pk}/waiting/"' in page and 'hx-trigger="every ' in page
    part = client.get(f"/jobs/{job.pk}/waiting/", HTTP_HX_REQUEST="true")
    assert part.status_code == 200 and "Estimated start:" in part.content.decode()
    assert "<html" not in part.content.decode()
    job.state = "running"
    job.save(update_fields=["state"])
    started = client.get(f"/jobs/{job.pk}/waiting/", HTTP_HX_REQUEST="true")
    assert started.status_code == 204 and started["HX-Refresh"] == "true"


def test_an_ended_job_shows_no_estimate(job, tree, client):
    job.state = "succeeded"
    job.save(update_fields=["state"])
    client.force_login(tree.user("bob"))
    assert "Estimated start" not in client.get(f"/jobs/{job.pk}/").content.decode()


def _capacity(job) -> tuple[list[dict], int]:
    """The job's blockers and how many times the room statement ran for them."""
    with CaptureQueriesContext(connection) as captured:
        blockers = job_blockers(job)
    return blockers, sum("WITH h AS" in q["sql"] for q in captured.captured_queries)


@pytest.fixture
def waiting(live):
    """A 32-GPU job waiting on the live 4 x 8-GPU cluster behind an 8-GPU one that runs
    (protected for an hour), after two cycles; the cluster's cycle period an hour."""
    Cluster.objects.filter(pk=live.cluster.pk).update(cycle_s=3600)
    live.submit("a2", gpus=8, min_runtime_s=3600, duration_s=7200)
    live.cycle()
    job = live.submit("a1", gpus=32, min_runtime_s=600)
    live.cycle(advance_s=10)
    job = live.job(job)
    assert job.state == JobState.PENDING
    return job


def _drain_an_idle_host(live) -> None:
    busy = {p["host"] for a in Attempt.objects.filter(cluster=live.cluster) for p in a.placements}
    host = Host.objects.filter(cluster=live.cluster).exclude(name__in=busy).order_by("name")[0]
    Host.objects.filter(pk=host.pk).update(health=HostHealth.DRAINING)


def test_the_room_is_read_once_per_cycle_and_the_next_cycle_refreshes_it(live, waiting):
    """A pending job's room (healthy GPUs, the hosts that fit, their free GPUs) is the
    cluster's as of its last cycle, like its place in the queue: a process reads it once
    per cycle and job size, and the next cycle's stored queue brings the change."""
    first, reads = _capacity(waiting)
    assert reads == 1
    assert first[-1]["numbers"]["hosts_that_fit"] == 4
    assert first[-1]["numbers"]["free_gpus_on_them"] == 24
    _drain_an_idle_host(live)
    again, reads = _capacity(waiting)
    assert (again, reads) == (first, 0)  # kept: the same cycle
    live.cycle(advance_s=10)
    after, reads = _capacity(waiting)
    assert reads == 1
    assert after[0]["numbers"] == {"gpus": 32, "healthy_gpus": 24}
    assert after[-1]["numbers"]["hosts_that_fit"] == 3
    assert after[-1]["numbers"]["free_gpus_on_them"] == 16


def test_a_kept_room_lives_at_most_a_cycle_period(live, waiting, monkeypatch):
    """Cycles that store no queue (scheduling paused, a cluster that did not answer)
    leave the stored queue as it was: the room is read again after the cluster's cycle
    period all the same."""
    first, _ = _capacity(waiting)
    _drain_an_idle_host(live)
    later = time.monotonic() + 3600
    monkeypatch.setattr(room_selectors.time, "monotonic", lambda: later)
    after, reads = _capacity(waiting)
    assert reads == 1
    assert after[0]["numbers"] == {"gpus": 32, "healthy_gpus": 24}
    assert after[-1]["numbers"]["free_gpus_on_them"] == 16


def test_an_open_attempts_end_reads_a_dash_like_its_ended_time(job, tree, client):
    """A running attempt's End cell was empty: on a phone its card showed the label
    "End" with nothing beside it, while Ended, just above, read "–"."""
    job.state = JobState.RUNNING
    job.save(update_fields=["state"])
    AttemptFactory(
        job=job,
        placements=[{"host": "h100-00", "gpu_indices": [0, 1, 2, 3]}],
        started_at=timezone.now(),
    )
    client.force_login(tree.user("ann"))
    html = client.get(f"/jobs/{job.pk}/").content.decode()
    cells = dict(re.findall(r'<td[^>]*data-label="(Ended|End)">(.*?)</td>', html, re.S))
    assert page_text(cells["End"]).strip() == "–"
    assert page_text(cells["Ended"]).strip() == "–"


def test_a_stopping_attempts_end_reads_as_the_apis_end_label(job, tree, client, api_client):
    """A run being moved (stop_intent "migrated", not ended yet): the API and `allot
    show` said "Moved to other hosts" while the job page's End, which read only the
    end reason, said nothing."""
    job.state = JobState.RUNNING
    job.save(update_fields=["state"])
    AttemptFactory(
        job=job,
        state="stopping",
        stop_intent="migrated",
        placements=[{"host": "h100-00", "gpu_indices": [0, 1, 2, 3]}],
        started_at=timezone.now(),
    )
    client.force_login(tree.user("ann"))
    html = client.get(f"/jobs/{job.pk}/").content.decode()
    end = re.search(r'<td[^>]*data-label="End">(.*?)</td>', html, re.S)[1]
    api_client.force_authenticate(tree.user("ann"))
    label = api_client.get(f"/api/v1/jobs/{job.pk}/").json()["attempts"][0]["end_label"]
    assert label == "Moved to other hosts"
    assert page_text(end).strip() == label
