"""The dashboards and /me/: who may open them, empty states, and the figures they show
computed from hand-built ledger rows and events."""

from __future__ import annotations

import csv
import datetime as dt
import io

import pytest
from django.db import connection
from django.template import Context, Template
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone

from dashboards import selectors
from ledger import selectors as ledger_selectors
from scheduler.models import JobState, QueueSnapshot
from tests.dashboards import data
from tests.factories import ClusterFactory, HostFactory

pytestmark = pytest.mark.django_db

PARTIALS = ["occupancy", "efficiency", "delivery", "fairshare", "waits"]


def read_csv(response) -> list[dict[str, str]]:
    assert response["Content-Type"].startswith("text/csv")
    return list(csv.DictReader(io.StringIO(response.content.decode())))


@pytest.mark.parametrize("name", ["dashboard", "me", *PARTIALS])
def test_anonymous_is_sent_to_sign_in(client, name):
    response = client.get(reverse(f"dashboards:{name}"))
    assert response.status_code == 302
    assert response["Location"].startswith("/accounts/login/")


@pytest.mark.parametrize("username", ["ann", "lead-b", "lead-a"])
def test_everyone_signed_in_opens_the_dashboards(client, tree, username):
    cluster = ClusterFactory(name="h100")
    client.force_login(tree.user(username))
    page = client.get(reverse("dashboards:dashboard"))
    assert page.status_code == 200
    text = page.content.decode()
    assert 'hx-trigger="load"' not in text  # the charts are in the page: one request
    for name in PARTIALS:
        url = reverse(f"dashboards:{name}")
        assert f'<section class="card dash" id="{name}">' in text
        assert f'href="{url}?cluster={cluster.pk}&amp;' in text  # its CSV, at its own URL
        assert client.get(url, {"cluster": cluster.pk}).status_code == 200


def test_the_page_holds_each_section_as_its_own_url_renders_it(client, tree, monkeypatch):
    """One request shows every chart: each section of the page is, byte for byte, what
    the chart's own URL (its tables' pager, its CSV links) answers for the same period."""
    cluster = ClusterFactory(name="h100", host_count=8, gpus_per_host=8)
    data.history(tree, cluster)  # every section with data: charts, tables, a drain
    now = timezone.now()
    monkeypatch.setattr(timezone, "now", lambda: now)  # one clock for every answer
    client.force_login(tree.user("lead-a"))
    query = {"cluster": cluster.pk, "days": 7, "step": "hour"}
    page = client.get(reverse("dashboards:dashboard"), query).content.decode()
    for name in PARTIALS:
        part = client.get(
            reverse(f"dashboards:{name}"), query, HTTP_HX_REQUEST="true"
        ).content.decode()  # as the pager asks for it (a browser gets the whole page)
        assert 'class="chart"' in part or name == "fairshare"
        assert f'<section class="card dash" id="{name}">{part}</section>' in page


def test_no_clusters_says_so(client, tree):
    client.force_login(tree.user("ann"))
    response = client.get(reverse("dashboards:dashboard"))
    assert response.status_code == 200
    assert "There are no clusters yet" in response.content.decode()
    assert client.get(reverse("dashboards:occupancy")).status_code == 404


def test_a_cluster_without_history_shows_clear_messages(client, tree):
    cluster = ClusterFactory(name="empty")
    client.force_login(tree.user("ann"))
    texts = {
        name: client.get(reverse(f"dashboards:{name}"), {"cluster": cluster.pk}).content.decode()
        for name in PARTIALS
    }
    assert "No history for empty" in texts["occupancy"]
    assert "No project has ledger rows on empty" in texts["delivery"]
    assert "No job started on empty" in texts["waits"]
    assert "a1" in texts["fairshare"]  # the tree is there, with no usage yet
    rows = read_csv(
        client.get(reverse("dashboards:occupancy"), {"cluster": "empty", "format": "csv"})
    )
    assert len(rows) == 7 * 24 and all(float(r["capacity_gpu_h"]) == 0 for r in rows)


@pytest.mark.parametrize(
    ("params", "field"),
    [({"days": "8"}, "days"), ({"step": "week"}, "step"), ({"cluster": "nope"}, "cluster")],
)
def test_bad_parameters_are_explained(client, tree, params, field):
    ClusterFactory(name="h100")
    client.force_login(tree.user("ann"))
    response = client.get(reverse("dashboards:dashboard"), params)
    # a query parameter naming no cluster is bad input, as in the API (it was a 404)
    assert response.status_code == 400
    assert field in response.content.decode()
    section = client.get(reverse("dashboards:delivery"), params)
    assert section.status_code == 400 and field in section.content.decode()


def test_occupancy_buckets_sum_to_capacity_per_day_and_headline(client, tree):
    cluster = ClusterFactory(name="h100", host_count=2, gpus_per_host=8)
    data.cluster_hours(
        cluster,
        48,
        within_entitlement_gpu_h=6,
        borrowed_gpu_h=2,
        unallocated_gpu_h=4,
        idle_demand_gpu_h=1,
        down_gpu_h=1,
    )
    client.force_login(tree.user("ann"))
    response = client.get(
        reverse("dashboards:occupancy"), {"cluster": "h100", "step": "day", "format": "csv"}
    )
    rows = [r for r in read_csv(response) if float(r["capacity_gpu_h"]) > 0]
    assert sum(float(r["capacity_gpu_h"]) for r in rows) == pytest.approx(48 * 16)
    for row in rows:
        buckets = sum(float(row[b]) for b in selectors.BUCKET_LABELS)
        assert buckets == pytest.approx(float(row["capacity_gpu_h"]))
    period = ledger_selectors.resolve_period(cluster="h100", days=7)
    headline = ledger_selectors.occupancy(period, viewer=tree.user("ann"))["headline"]
    # docs/concepts.md: occupancy of the healthy capacity (15 of 16 GPU-h per hour, one
    # down), availability beside it, the unallocated share of all runs
    assert headline["occupancy"] == pytest.approx(12 / 15)
    assert headline["availability"] == pytest.approx(15 / 16)
    assert headline["unallocated_share"] == pytest.approx(4 / 12)
    assert headline["idle_with_demand_share"] == pytest.approx(1 / 16)
    page = client.get(reverse("dashboards:occupancy"), {"cluster": "h100"}).content.decode()
    assert "80.0%" in page and "93.8%" in page and 'id="fig-occupancy"' in page


def test_delivery_table_ratio_count_and_subtree_first(client, tree):
    cluster = ClusterFactory(name="h100")
    a1, a2, b1 = tree.node("a1"), tree.node("a2"), tree.node("b1")
    data.project_hours(cluster, a1, 10, entitled_gpu_h=4, allocated_gpu_h=4, demand_gpu_h=8)
    data.project_hours(cluster, a2, 10, entitled_gpu_h=4, allocated_gpu_h=2, demand_gpu_h=4)
    data.project_hours(cluster, b1, 10, entitled_gpu_h=2, allocated_gpu_h=3, demand_gpu_h=3)
    client.force_login(tree.user("lead-b"))
    response = client.get(reverse("dashboards:delivery"), {"cluster": "h100", "format": "csv"})
    rows = {r["project"]: r for r in read_csv(response)}
    assert float(rows["org/prog-a/a1"]["ratio"]) == pytest.approx(1.0)
    assert float(rows["org/prog-a/a2"]["ratio"]) == pytest.approx(0.5)
    assert float(rows["org/prog-b/b1"]["delivered_gpu_h"]) == pytest.approx(30)
    assert list(rows)[0] == "org/prog-b/b1"  # lead-b governs b1: first
    page = client.get(reverse("dashboards:delivery"), {"cluster": "h100"}).content.decode()
    assert "2 of 3" in page
    # b1's row is bold, and the table says why (it bolded rows without a word)
    assert '<tr class="mine"><td class="name" data-label="Project">org/prog-b/b1' in page
    assert "Your projects (those you are a member or a manager of) are in bold." in page
    over_time = read_csv(
        client.get(reverse("dashboards:delivery"), {"cluster": "h100", "format": "csv-time"})
    )
    assert float(over_time[-1]["cumulative_gpu_h"]) == pytest.approx((9 - 10) * 10)
    by_day = read_csv(
        client.get(
            reverse("dashboards:delivery"), {"cluster": "h100", "format": "csv-time", "step": "day"}
        )
    )
    assert len(by_day) in (7, 8)
    assert sum(float(r["capped_entitled_gpu_h"]) for r in by_day) == pytest.approx(100)
    assert float(by_day[-1]["cumulative_gpu_h"]) == pytest.approx(-10)


def test_delivery_table_is_paginated_and_keeps_long_names(client, tree):
    from budgets.models import BudgetNode, NodeKind

    cluster = ClusterFactory(name="h100")
    parent = tree.node("prog-b")
    long_name = "x" * 100
    nodes = BudgetNode.objects.bulk_create(
        [
            BudgetNode(
                parent=parent, name=f"{long_name[:94]}{i:04d}", slug=f"p{i}", kind=NodeKind.PROJECT
            )
            for i in range(1000)
        ]
    )
    for node in nodes:
        data.project_hours(cluster, node, 1, entitled_gpu_h=1, allocated_gpu_h=1)
    client.force_login(tree.user("ann"))
    page = client.get(reverse("dashboards:delivery"), {"cluster": "h100", "delivery_page": 3})
    text = page.content.decode()
    assert "page 3 of 20 (1000 projects)" in text
    assert text.count('<td class="name" data-label="Project">') == 50
    assert 'class="mine"' not in text and "are in bold" not in text  # none of ann's here
    assert "1000 of 1000" in text
    # on the dashboards page the parameter pages the delivery table only, and its links work
    # without scripts (the whole page at the next page, scrolled to the table)
    whole = client.get(reverse("dashboards:dashboard"), {"cluster": "h100", "delivery_page": 3})
    text = whole.content.decode()
    assert text.count("page 3 of ") == 1 and "page 3 of 20 (1000 projects)" in text
    assert "delivery_page=4#delivery" in text and "efficiency_page=" not in text
    assert "page 1 of 20 (1000 projects)" not in text  # no other table moved


def test_waits_are_computed_from_attempts(client, api_client, tree):
    cluster = ClusterFactory(name="h100")
    ann, a1 = tree.user("ann"), tree.node("a1")
    start = data.hour_ago(3) + dt.timedelta(minutes=5)
    waits_min = [1, 2, 3, 4, 10]
    for minutes in waits_min:
        j = data.job(
            cluster,
            a1,
            ann,
            submitted_at=start - dt.timedelta(minutes=minutes),
            kind="debug",
            state=JobState.RUNNING,
        )
        data.attempt(j, started_at=start)
    retried = data.job(
        cluster,
        a1,
        ann,
        submitted_at=start - dt.timedelta(minutes=30),
        kind="training",
        state=JobState.RUNNING,
    )
    data.attempt(retried, started_at=start, ended_at=start + dt.timedelta(minutes=1))
    data.attempt(retried, started_at=start + dt.timedelta(minutes=20), number=2)
    data.job(cluster, a1, ann, submitted_at=start)  # never started: no wait yet
    api_client.force_authenticate(ann)
    body = api_client.get("/api/v1/waits/", {"cluster": "h100"}).json()
    by_kind = {r["kind"]: r for r in body["results"]}
    assert body["count"] == 2
    assert by_kind["debug"]["jobs"] == 5
    assert by_kind["debug"]["p50_wait_s"] == pytest.approx(180)
    assert by_kind["debug"]["p90_wait_s"] == pytest.approx(4 * 60 + 0.6 * 6 * 60)
    assert by_kind["training"]["p50_wait_s"] == pytest.approx(30 * 60)  # first start counts
    client.force_login(ann)
    rows = read_csv(client.get(reverse("dashboards:waits"), {"cluster": "h100", "format": "csv"}))
    assert {r["kind"] for r in rows} == {"debug", "training"}


def test_waits_api_refuses_bad_input_and_anonymous(api_client, tree):
    ClusterFactory(name="h100")
    assert api_client.get("/api/v1/waits/", {"cluster": "h100"}).status_code == 401
    api_client.force_authenticate(tree.user("ann"))
    assert api_client.get("/api/v1/waits/").json()["errors"][0]["field"] == "cluster"
    missing = api_client.get("/api/v1/waits/", {"cluster": "nope"})
    assert missing.status_code == 400 and missing.json()["field"] == "cluster"  # as usage/
    backwards = api_client.get(
        "/api/v1/waits/",
        {"cluster": "h100", "since": "2026-01-02T00:00:00Z", "until": "2026-01-01T00:00:00Z"},
    )
    assert backwards.status_code == 400 and backwards.json()["field"] == "since"


def test_preemptions_by_rule_and_drains_with_durations(client, tree):
    cluster = ClusterFactory(name="h100")
    ann, a1 = tree.user("ann"), tree.node("a1")
    j = data.job(cluster, a1, ann, submitted_at=data.hour_ago(5), state=JobState.RUNNING)
    for rule in ["fair_share", "fair_share", "unallocated"]:
        data.preemption(j, at=data.hour_ago(2), rule=rule)
    host, other = HostFactory(cluster=cluster, name="n1"), HostFactory(cluster=cluster, name="n2")
    data.health_change(host, at=data.hour_ago(10), to="draining", reason="fan <b>noise</b>")
    data.health_change(host, at=data.hour_ago(7), to="healthy")
    data.health_change(other, at=data.hour_ago(1), to="draining")
    period = ledger_selectors.resolve_period(cluster="h100", days=7)
    counts = {r["rule"]: r["count"] for r in selectors.preemption_rows(period)}
    assert counts == {"fair_share": 2, "unallocated": 1}
    drains = {d["host"]: d for d in selectors.drain_rows(period)}
    assert drains["n1"]["duration_h"] == pytest.approx(3)
    assert drains["n2"]["ended_at"] is None
    client.force_login(ann)
    page = client.get(reverse("dashboards:waits"), {"cluster": "h100"}).content.decode()
    assert "still draining" in page and "fan &lt;b&gt;noise&lt;/b&gt;" in page
    rows = read_csv(
        client.get(reverse("dashboards:waits"), {"cluster": "h100", "format": "csv-drains"})
    )
    assert {r["host"] for r in rows} == {"n1", "n2"}


def test_fair_share_now_reads_the_window_usage(client, tree):
    cluster = ClusterFactory(name="h100")
    ann = tree.user("ann")
    j = data.job(
        cluster, tree.node("a1"), ann, submitted_at=data.hour_ago(3), state=JobState.RUNNING
    )
    data.attempt(j, started_at=timezone.now() - dt.timedelta(hours=2))
    rows = {r["path"]: r for r in selectors.fairshare_now(viewer=ann, cluster=cluster)["rows"]}
    assert rows["org/prog-a/a1"]["usage_gpu_h"] == pytest.approx(2, rel=0.05)
    assert rows["org/prog-a/a1"]["level_fs"] < 1
    assert rows["org/prog-a/a2"]["level_fs"] is None  # no usage: infinite
    assert rows["org/prog-a/a2"]["level_fs_text"] == "∞"
    assert rows["org/prog-a/a2"]["factor"] > rows["org/prog-a/a1"]["factor"]
    assert "wait behind" in rows["org/prog-a/a1"]["sentence"]
    client.force_login(ann)
    csv_rows = read_csv(
        client.get(reverse("dashboards:fairshare"), {"cluster": "h100", "format": "csv"})
    )
    assert {r["node"] for r in csv_rows} >= {"org/prog-a", "org/prog-a/a1", "org/prog-b/b1"}
    by_node = {r["node"]: r for r in csv_rows}
    # no usage: "∞" as the page and the glossary write it (it was Python's "inf"); a
    # used node's level FS at full precision, as the API gives it (the two requests read
    # usage a moment apart, and it decays: equal to far more places than the page shows)
    assert by_node["org/prog-a/a2"]["level_fs"] == "∞"
    level = rows["org/prog-a/a1"]["level_fs"]
    assert float(by_node["org/prog-a/a1"]["level_fs"]) == pytest.approx(level, rel=1e-9)
    assert not any(r["level_fs"] == "inf" for r in csv_rows)


@pytest.mark.parametrize(
    ("level_fs", "words"),
    [
        (0.9988, "Used about its share (level FS 1.00)"),  # the demo's post-training
        (1.004, "Used about its share (level FS 1.00)"),
        (1.005, "Used less than its share (level FS 1.01)"),  # half up, as the column
        (1.35, "Used less than its share (level FS 1.35)"),
        (0.79, "Used more than its share (level FS 0.79)"),
    ],
)
def test_the_fair_share_sentence_agrees_with_the_level_fs_shown_beside_it(level_fs, words):
    """The demo's post-training (level FS 0.9988) read "Used more than its share (level FS
    1.00)" beside a column saying 1.00, and a project at 1.02 "(1.02x under)": the
    sentence names the figure as the column writes it (`fixed`, two decimals)."""
    sentence = selectors.fairshare_sentence(
        is_project=True, level_fs=level_fs, factor=0.775, no_entitlement=False
    )
    column = Template("{% load dashboards %}{{ v|fixed:2 }}").render(Context({"v": level_fs}))
    assert sentence.startswith(words) and f"level FS {column})" in sentence
    assert "x under" not in sentence


def test_fair_share_as_of_a_cycle_reads_the_runs_once_per_cycle(tree):
    """The window usage as of a cycle is computed by the first read after it and kept:
    a second read does not scan the runs again; the next cycle reads them anew."""
    cluster = ClusterFactory(name="h100")
    ann = tree.user("ann")
    j = data.job(
        cluster, tree.node("a1"), ann, submitted_at=data.hour_ago(3), state=JobState.RUNNING
    )
    data.attempt(j, started_at=timezone.now() - dt.timedelta(hours=2))
    at = timezone.now().replace(microsecond=0)
    snapshot = QueueSnapshot.objects.create(cluster=cluster, computed_at=at)

    def usage() -> float:
        rows = selectors.fairshare_now(viewer=ann, cluster=cluster)["rows"]
        return {r["path"]: r for r in rows}["org/prog-a/a1"]["usage_gpu_h"]

    first = usage()
    assert first == pytest.approx(2, rel=0.05)
    with CaptureQueriesContext(connection) as queries:
        assert usage() == first
    assert queries and not any("scheduler_attempt" in q["sql"] for q in queries)
    snapshot.computed_at = at + dt.timedelta(hours=1)
    snapshot.save()
    assert usage() == pytest.approx(3, rel=0.05)


def test_csv_cells_that_look_like_formulas_are_quoted(client, tree):
    cluster = ClusterFactory(name="h100")
    host = HostFactory(cluster=cluster, name="n1")
    data.health_change(host, at=data.hour_ago(3), to="draining", reason="=HYPERLINK(1)")
    client.force_login(tree.user("ann"))
    response = client.get(reverse("dashboards:waits"), {"cluster": "h100", "format": "csv-drains"})
    assert read_csv(response)[0]["reason"] == "'=HYPERLINK(1)"


def test_me_lists_my_jobs_pending_first_with_links(client, tree):
    cluster = ClusterFactory(name="h100")
    ann, a1 = tree.user("ann"), tree.node("a1")
    done = data.job(
        cluster, a1, ann, submitted_at=data.hour_ago(2), state=JobState.SUCCEEDED, name="done-job"
    )
    waiting = data.job(cluster, a1, ann, submitted_at=data.hour_ago(5), name="waiting-job")
    data.job(cluster, a1, tree.user("bob"), submitted_at=data.hour_ago(1), name="bobs-job")
    data.project_hours(cluster, a1, 24, entitled_gpu_h=2, allocated_gpu_h=1, demand_gpu_h=3)
    client.force_login(ann)
    text = client.get(reverse("dashboards:me")).content.decode()
    assert text.index("waiting-job") < text.index("done-job")
    assert "bobs-job" not in text
    assert f'href="/jobs/{waiting.pk}/"' in text and f'href="/jobs/{done.pk}/"' in text
    assert "org/prog-a/a1" in text and "50.0%" in text  # delivered 24 of entitled 48
    rows = read_csv(client.get(reverse("dashboards:me"), {"format": "csv"}))
    assert rows == [
        {
            "project": "org/prog-a/a1",
            "cluster": "h100",
            "capped_entitled_gpu_h": "48.0",
            "delivered_gpu_h": "24.0",
            "ratio": "0.5",
            "demand_gpu_h": "72.0",
        }
    ]


def test_my_jobs_refresh_themselves_with_a_new_estimate(client, tree):
    """/me/ said "due now (it was expected by 16:24; a new estimate follows)" at 16:33
    and nothing followed until a reload: its jobs' section asks for itself again (htmx,
    as the queue page's tables), and that request answers the section alone, read
    afresh (a job's new state and estimate), without the projects' ledger figures."""
    cluster = ClusterFactory(name="h100")
    ann, a1 = tree.user("ann"), tree.node("a1")
    job = data.job(cluster, a1, ann, submitted_at=data.hour_ago(1), name="waiting-job")
    client.force_login(ann)
    page = client.get(reverse("dashboards:me"), {"page": 1}).content.decode()
    section = page[page.index('id="my-jobs"') :]
    assert 'hx-get="/me/?page=1"' in section[:200] and 'hx-trigger="every 20s"' in section[:200]
    job.state = JobState.SUCCEEDED
    job.save(update_fields=["state"])
    part = client.get(reverse("dashboards:me"), {"page": 1}, HTTP_HX_REQUEST="true")
    text = part.content.decode()
    assert text.lstrip().startswith('<section class="card" id="my-jobs"')
    assert "waiting-job" in text and "Succeeded" in text and "My projects" not in text


def test_me_is_paginated(client, tree):
    cluster = ClusterFactory(name="h100")
    ann, a1 = tree.user("ann"), tree.node("a1")
    for i in range(60):
        data.job(cluster, a1, ann, submitted_at=data.hour_ago(1), name=f"job-{i}")
    client.force_login(ann)
    text = client.get(reverse("dashboards:me"), {"page": 3}).content.decode()
    # pending jobs no cycle has placed yet: in submission order (the next cycle's)
    assert "page 3 of 3 (60 jobs)" in text and "job-59<" in text and "job-0<" not in text
    first = client.get(reverse("dashboards:me")).content.decode()
    assert "job-0<" in first and "job-59<" not in first


def test_me_empty_states(client, tree):
    client.force_login(tree.user("lead-b"))  # manages prog-b, so b1 is "mine"; no jobs
    text = client.get(reverse("dashboards:me")).content.decode()
    assert "You have no jobs yet" in text
    assert "org/prog-b/b1" in text and "No usage or demand" in text
    from tests.factories import UserFactory

    client.force_login(UserFactory(username="loner"))
    assert (
        "not a member or manager of any project"
        in client.get(reverse("dashboards:me")).content.decode()
    )


def test_each_window_shows_where_it_ends(client, tree):
    """docs/concepts.md#windows: every reporting page ends at the last complete hour and
    says so in the same words ("days of complete hours, to <end>"); the current, partial
    hour is not counted. The fair-share dashboard is as of the last cycle ("as of the
    cycle at <the queue's computed_at>")."""
    cluster = ClusterFactory(name="h100")
    a1 = tree.node("a1")
    data.project_hours(cluster, a1, 3, entitled_gpu_h=2, allocated_gpu_h=1, demand_gpu_h=3)
    data.project_hours(cluster, a1, 1, first=0, entitled_gpu_h=50, allocated_gpu_h=50)
    data.cluster_hours(cluster, 3)
    client.force_login(tree.user("ann"))
    end = ledger_selectors.report_end()
    assert end == ledger_selectors.floor_hour(timezone.now())
    stamp = end.astimezone(dt.UTC).isoformat().replace("+00:00", "Z")
    pages = {
        name: client.get(reverse(f"dashboards:{name}"), {"cluster": "h100"}).content.decode()
        for name in ("delivery", "occupancy", "efficiency", "waits")
    }
    pages["me"] = client.get(reverse("dashboards:me")).content.decode()
    for name, page in pages.items():
        assert "7 days of complete hours, to " in page, name
        shown = page[page.index('class="window-end"') :]
        assert f'<time datetime="{stamp}"' in shown[:120], name
    rows = read_csv(
        client.get(reverse("dashboards:delivery"), {"cluster": "h100", "format": "csv"})
    )
    assert [float(r["delivered_gpu_h"]) for r in rows] == [3.0]  # not the partial hour's 50

    fairshare = client.get(reverse("dashboards:fairshare"), {"cluster": "h100"}).content.decode()
    assert "(no cycle has run yet)" in fairshare
    at = timezone.now().replace(microsecond=0) - dt.timedelta(minutes=7)
    QueueSnapshot.objects.create(cluster=cluster, computed_at=at)
    fairshare = client.get(reverse("dashboards:fairshare"), {"cluster": "h100"}).content.decode()
    shown = fairshare[fairshare.index('class="cycle-at"') :]
    assert "as of the cycle at " in fairshare
    assert f'<time datetime="{at.astimezone(dt.UTC).isoformat().replace("+00:00", "Z")}"' in shown


@pytest.mark.parametrize("name", ["fairshare", "occupancy", "waits"])
def test_a_section_opened_at_its_own_url_is_a_whole_page(client, tree, name):
    """A section's URL opened in the browser (a link, a new tab) answers the site's page
    with the section in it, styled and with times in the viewer's zone (time.js), and a
    link to every section; htmx asks the same URL for the section alone."""
    cluster = ClusterFactory(name="h100")
    QueueSnapshot.objects.create(cluster=cluster, computed_at=timezone.now())
    client.force_login(tree.user("ceo"))
    url = reverse(f"dashboards:{name}")
    page = client.get(url, {"cluster": "h100", "days": 7}).content.decode()
    assert page.lstrip().lower().startswith("<!doctype html>") and "css/allot.css" in page
    assert "js/time.js" in page and f'<section class="card dash" id="{name}">' in page
    assert f'href="/dashboards/?cluster={cluster.pk}&amp;days=7&amp;step=' in page
    assert f"#{name}" in page
    part = client.get(url, {"cluster": "h100"}, HTTP_HX_REQUEST="true").content.decode()
    assert "<html" not in part and "css/allot.css" not in part
    assert part.lstrip().startswith("<h2>")
