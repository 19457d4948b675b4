"""The cluster queue page (like `squeue`) and My jobs' order: pending jobs in start order
with the API's positions and reasons, running jobs with their start and protection end,
the filters, the pages, the empty states and the links to it."""

from __future__ import annotations

import datetime as dt
import re
from html import unescape

import pytest

from scheduler.models import Attempt, Job, JobState
from scheduler.selectors import cluster_queue as cq
from scheduler.selectors.jobs import job_queue_info
from tests.support.live import submit_job

pytestmark = pytest.mark.django_db


def _busy(live):
    """Four 8-GPU jobs of b1 running (1 h protected), then a1 and bob's jobs waiting."""
    for _ in range(4):
        live.submit("b1", gpus=8, min_runtime_s=3600, name="holder")
    live.cycle()
    waiting = [live.submit("a1", gpus=8, min_runtime_s=600, name=f"ann-wait-{i}") for i in range(3)]
    bob = live.tree.user("bob")
    theirs = submit_job(cluster=live.cluster, project=live.tree.node("b1"), user=bob,
                        at=live.now, gpus=4, min_runtime_s=0, name="bob-sweep")  # fmt: skip
    live.cycle(advance_s=1)
    return waiting, theirs


def _rows(html: str, section: str) -> list[str]:
    part = html[html.index(f'id="{section}"') :]
    part = part[: part.index("</section>")]
    return re.findall(r"<tr class=\"state-[^\"]*\">(.*?)</tr>", part, re.S)


def _job_ids(rows: list[str]) -> list[str]:
    return [re.search(r'href="/jobs/(\d+)/"', r).group(1) for r in rows]


def test_the_queue_page_shows_the_apis_order_and_reasons(live, client):
    waiting, theirs = _busy(live)
    client.force_login(live.tree.user("ann"))
    api = client.get(f"/api/v1/queue/?cluster={live.cluster.pk}").json()
    html = client.get(f"/clusters/{live.cluster.pk}/queue/").content.decode()
    rows = _rows(html, "pending")
    assert len(rows) == api["count"] == 4
    for row, entry in zip(rows, api["results"], strict=True):
        assert f'<a href="/jobs/{entry["job"]}/">{entry["job"]}</a>' in row
        assert f"{entry['position']} of {api['count']}" in row
        assert entry["reason"].split(" UTC")[0][:40] in row.replace("&#x27;", "'")
        assert 'data-label="Estimated start"><time' in row or "being computed" in row
    first = Job.objects.get(pk=api["results"][0]["job"])
    assert job_queue_info(first)["reason"] == api["results"][0]["reason"]  # the job page's
    running = _rows(html, "running")
    assert len(running) == 4 and all("holder" in r for r in running)
    attempt = Attempt.objects.filter(job__name="holder").order_by("started_at", "pk").first()
    until = attempt.started_at + dt.timedelta(hours=1)
    assert until.strftime("%Y-%m-%d %H:%M") in running[0]  # protected for its min runtime
    assert "Queue of live" in html and 'href="/queue/"' in html  # linked from the header


def test_the_filters_narrow_both_tables(live, client):
    waiting, theirs = _busy(live)
    ann = live.tree.user("ann")
    client.force_login(ann)
    url = f"/clusters/{live.cluster.pk}/queue/"
    mine = _rows(client.get(url + "?mine=1").content.decode(), "pending")
    assert [f"ann-wait-{i}" in r for i, r in enumerate(mine)] == [True] * 3
    html = client.get(url + "?user=bob").content.decode()
    assert len(_rows(html, "pending")) == 1 and "bob-sweep" in html
    assert "No running job matches these filters." in html
    by_project = client.get(url + "?project=org/prog-a&state=pending").content.decode()
    assert len(_rows(by_project, "pending")) == 3 and 'id="running"' not in by_project
    running_only = client.get(url + "?state=running").content.decode()
    assert 'id="pending"' not in running_only and len(_rows(running_only, "running")) == 4
    bad = client.get(url + "?state=done")
    assert (
        bad.status_code == 400
        and "<code>state</code>: &quot;done&quot; is not a valid choice; choose one of: all, "
        "pending, running."
        in bad.content.decode()
    )
    unknown = client.get(url + "?user=nobody")
    assert (
        unknown.status_code == 400
        and "There is no user &#x27;nobody&#x27;" in unknown.content.decode()
    )
    assert client.get(url + "?project=nowhere").status_code == 400  # as the API's filters


def test_every_refused_filter_is_named_with_its_field_at_once(live, client):
    """Four bad filters: each is listed with its field, as the history page lists its
    own, read the same way (one query serializer, `read_page_query`: the page showed only
    the first refusal, and without its field's name, and `mine=perhaps` was taken as
    false), and no job is listed."""
    _busy(live)
    client.force_login(live.tree.user("ann"))
    url = f"/clusters/{live.cluster.pk}/queue/"
    response = client.get(url + "?state=done&project=nowhere&user=nobody&mine=perhaps")
    page = unescape(response.content.decode())
    refused = re.findall(r"<li><code>(\w+)</code>: ([^<]*)</li>", page)
    assert response.status_code == 400
    assert [field for field, _ in refused] == ["state", "project", "user", "mine"]
    assert refused[0][1] == '"done" is not a valid choice; choose one of: all, pending, running.'
    assert "'nowhere'" in refused[1][1] and "There is no user 'nobody'" in refused[2][1]
    assert refused[3][1] == "Must be a valid boolean."
    assert 'value="nowhere"' in page  # the form keeps what was typed
    assert 'id="pending"' not in page and "ann-wait" not in page


def test_pages_of_the_queue_and_the_way_there(live, client, monkeypatch):
    monkeypatch.setattr(cq, "PAGE_SIZE", 2)
    _busy(live)
    client.force_login(live.tree.user("ann"))
    url = f"/clusters/{live.cluster.pk}/queue/"
    second = client.get(url + "?page=2&state=pending").content.decode()
    rows = _rows(second, "pending")
    assert len(rows) == 2 and "3 of 4" in rows[0] and "4 of 4" in rows[1]
    assert "3–4 of 4 (page 2 of 2)" in second
    # a page past the end is the last page: the same jobs (their "in 59 min" texts may
    # have moved on between the two requests)
    beyond = _rows(client.get(url + "?page=99&state=pending").content.decode(), "pending")
    assert _job_ids(beyond) == _job_ids(rows) and len(_job_ids(rows)) == 2
    # /queue/ picks the cluster (by name too) and keeps the filters
    assert client.get("/queue/")["Location"] == url
    assert client.get("/queue/?cluster=live&mine=1")["Location"] == url + "?mine=1"
    nope = client.get("/queue/?cluster=nope")
    assert nope.status_code == 400  # named as the API's 400 names it (it said only why)
    assert "<li><code>cluster</code>: There is no cluster" in unescape(nope.content.decode())
    job = Job.objects.filter(state=JobState.PENDING).order_by("pk").last()
    page = client.get(f"/jobs/{job.pk}/").content.decode()
    assert f'href="{url}' in page and "See the whole queue" in page


def test_empty_states_say_so(live, client, tree):
    client.force_login(tree.user("ann"))
    url = f"/clusters/{live.cluster.pk}/queue/"
    html = client.get(url).content.decode()
    assert "No scheduling cycle has run on live yet" in html
    live.cycle()
    html = client.get(url).content.decode()
    assert "No job waits on live" in html and "No job runs on live now." in html
    part = client.get(url, HTTP_HX_REQUEST="true").content.decode()
    assert part.lstrip().startswith('<div id="queue-tables"') and "<html" not in part


def test_the_queue_page_needs_a_role_like_the_api(live, client, django_user_model):
    live.cycle()
    url = f"/clusters/{live.cluster.pk}/queue/"
    assert client.get(url).status_code == 302  # sign in first
    client.force_login(django_user_model.objects.create_user("stranger"))
    assert client.get(url).status_code == 403
    assert client.get(f"/api/v1/queue/?cluster={live.cluster.pk}").status_code == 403


def test_my_jobs_list_pending_jobs_in_start_order_then_running_by_start(live, client):
    for _ in range(3):
        live.submit("b1", gpus=8, min_runtime_s=3600, name="holder")
    live.cycle()
    live.submit("b1", gpus=8, min_runtime_s=3600, name="late-holder")
    live.cycle(advance_s=5)
    # a1 ranks above b1 (which holds the cluster): a1's later jobs start first
    b_wait = live.submit("b1", gpus=8, min_runtime_s=600, name="b-wait")
    a_wait = live.submit("a1", gpus=8, min_runtime_s=600, name="a-wait")
    live.cycle(advance_s=1)
    info = {j.pk: job_queue_info(j)["position"] for j in (b_wait, live.job(a_wait))}
    assert info[a_wait.pk] < info[b_wait.pk]  # the ids' order is not the queue's
    client.force_login(live.tree.user("ann"))
    html = client.get("/me/").content.decode()
    names = re.findall(r'class="name" data-label="Name">([^<]+)<', html)
    assert names[:2] == ["a-wait", "b-wait"]
    assert names[2:] == ["holder", "holder", "holder", "late-holder"]
    row = html[html.index("a-wait") :]
    assert f"{info[a_wait.pk]} of 2" in row[: row.index("</tr>")]
