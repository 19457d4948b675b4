"""The daily pages without a browser: the operators' now page, My jobs' standing
columns, the demo logins on the sign-in page, the favicon, Swagger's way back, and how
times and durations are worded."""

from __future__ import annotations

import datetime as dt
import io
import re
from pathlib import Path

import pytest
from django.core.management import call_command
from django.utils import timezone
from rest_framework.test import APIClient

from allot_cli import render
from budgets.demo import DEMO_PASSWORD, DEMO_ROOT
from budgets.permissions import is_operator
from budgets.services import budget_tree_import
from config.clock import NOW_S, NOW_SECONDS_S, relative_text, span_text
from scheduler.models import CycleRecord, Host
from scheduler.selectors.now import cluster_now, policy_now, short_reserve_now
from scheduler.selectors.translate import policy_for_cluster
from tests.factories import SuperUserFactory
from tests.roles import token_for
from tests.support.cli import Cli

pytestmark = pytest.mark.django_db
ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(
    ("seconds", "text"),
    [(40, "40 s"), (600, "10 min"), (3 * 3600 + 600, "3 h 10 min"), (7200, "2 h"),
     (86400 + 4 * 3600, "1 d 4 h"), (-720, "12 min")],
)  # fmt: skip
def test_durations_read_like_people_say_them(seconds, text):
    assert span_text(seconds) == text
    assert render.span(seconds) == text  # the CLI (a REST client, its own copy) alike


def test_times_relative_to_now():
    now = dt.datetime(2026, 12, 5, 12, 0, tzinfo=dt.UTC)
    assert relative_text(now + dt.timedelta(hours=3, minutes=10), now) == "in 3 h 10 min"
    assert relative_text(now - dt.timedelta(minutes=12), now) == "12 min ago"
    assert relative_text(now + dt.timedelta(seconds=20), now) == "now"


def test_the_now_page_shows_each_cluster_as_it_is(
    live,
    client,
    django_assert_num_queries,
):
    live.cluster.short_reserve_hosts = 1
    live.cluster.save(update_fields=["short_reserve_hosts"])
    for _ in range(3):
        live.submit("b1", gpus=8, min_runtime_s=3600)
    live.cycle()
    for _ in range(2):
        live.submit("a1", gpus=8, min_runtime_s=3600)
    live.submit("a1", gpus=1, min_runtime_s=600)
    live.cycle(advance_s=1)
    Host.objects.filter(cluster=live.cluster, name="node02").update(
        health="draining", health_reason="ECC errors", health_changed_at=timezone.now()
    )
    # the next cycle, one period (cycle_s = 10 s) after the second: the reserve's cost
    # counts each cycle's unused GPUs until the next cycle, at most a period
    second = CycleRecord.objects.filter(cluster=live.cluster).latest("started_at")
    CycleRecord.objects.create(
        cluster=live.cluster, started_at=second.started_at + dt.timedelta(seconds=10),
        duration_ms=5.0, errors=["adapter unreachable: refused"],
    )  # fmt: skip
    now = cluster_now(cluster=live.cluster, actor=None)
    assert now["running_gpus"] == 25 and now["running_jobs"] == 4  # the short job started
    assert (now["pending_jobs"], now["pending_gpus"]) == (2, 16)
    assert now["cycle"]["duration_ms"] == 5.0 and not now["cycle"]["late"]
    assert now["errors"][0]["text"] == "adapter unreachable: refused"
    assert [h["name"] for h in now["unhealthy_hosts"]] == ["node02"]
    assert now["unhealthy_hosts"][0]["gpus_in_use"] == 8
    with django_assert_num_queries(3):
        reserve = short_reserve_now(cluster=live.cluster)
    assert reserve["enabled"] and reserve["held_hosts"] == ["node03"]  # by the last cycle
    assert reserve["adaptive"]  # on by default (Cluster.short_reserve_auto)
    assert reserve["running_jobs"] == 1 and reserve["running_gpus"] == 1
    # the second cycle held node03's 8 GPUs while a1's 16 GPUs of longer work waited:
    # the short job used 1 of them (one wait saved), 7 GPUs for one 10 s cycle went unused
    assert reserve["held_gpus"] == 8 and reserve["short_waits_saved"] == 1
    assert reserve["reserve_cost_gpu_h"] == round(7 * 10 / 3600, 2)

    client.force_login(live.tree.user("ann"))
    html = client.get("/now/").content.decode()
    assert "ECC errors" in html and "adapter unreachable: refused" in html
    assert "node03</strong>" in html
    assert "Reserve cost (GPU-h, 7 days)</dt><dd>0.02 " in html
    assert "Short-job waits saved (7 days)</dt><dd>1 " in html
    part = client.get("/now/", HTTP_HX_REQUEST="true").content.decode()
    assert part.lstrip().startswith('<div id="now-clusters"') and "<html" not in part


def test_the_now_page_shows_the_policy_the_engine_and_the_api_read(
    live, client, django_assert_num_queries
):
    """One setting, one value: the Now page's share floor, consolidation, reservation
    admission and idle-GPU reclaim are the cluster's policy as the engine reads it and as
    API clusters/{id}/ gives it, before and after a change, with that change's author and
    reason."""
    root = SuperUserFactory(username="root")
    api = APIClient()
    api.force_authenticate(root)
    client.force_login(root)

    def shown(label: str, field: str) -> tuple[tuple[str, str], bool, bool]:
        html = client.get("/now/").content.decode()
        (value,) = re.findall(rf"<dt>{label}</dt><dd>(\w+) <small>(.*?)</small>", html, re.S)
        live.cluster.refresh_from_db()
        policy = api.get(f"/api/v1/clusters/{live.cluster.pk}/").json()["policy"]
        engine = {"reservation_admit_min": "reservation_admit_s"}.get(field, field)
        return value, policy[field], getattr(policy_for_cluster(live.cluster), engine)

    assert shown("Share floor", "share_floor") == (("On", "as the cluster was added"), True, True)
    assert shown("Consolidation", "consolidate") == (("On", "as the cluster was added"), True, True)
    assert shown("Reservation admission", "reservation_admit_min") == (
        ("On", "protection ending within 1 h; as the cluster was added"), 60, 3600.0
    )  # fmt: skip
    assert shown("Idle-GPU reclaim", "idle_reclaim") == (
        ("Off", "as the cluster was added"), False, False
    )  # fmt: skip
    call_command(
        "cluster_set", live.cluster.name, "--reason", "rank alone", "--share-floor", "off",
        stdout=io.StringIO(),
    )  # fmt: skip
    call_command(
        "cluster_set", live.cluster.name, "--reason", "idle notebooks", "--idle-reclaim", "on",
        stdout=io.StringIO(),
    )  # fmt: skip
    (state, note), api_on, engine_on = shown("Share floor", "share_floor")
    assert (state, api_on, engine_on) == ("Off", False, False)
    assert note.startswith("since ") and note.endswith("by system: rank alone")
    (state, note), api_on, engine_on = shown("Idle-GPU reclaim", "idle_reclaim")
    assert (state, api_on, engine_on) == ("On", True, True)
    assert note.startswith("below 5% for 30 min; since ")
    assert note.endswith("by system: idle notebooks")
    call_command(
        "cluster_set", live.cluster.name, "--reason", "no moves", "--consolidate", "off",
        stdout=io.StringIO(),
    )  # fmt: skip
    (state, note), api_on, engine_on = shown("Consolidation", "consolidate")
    assert (state, api_on, engine_on) == ("Off", False, False)
    assert note.endswith("by system: no moves")
    call_command(
        "cluster_set", live.cluster.name, "--reason", "backfill only",
        "--reservation-admit-min", "0", stdout=io.StringIO(),
    )  # fmt: skip
    (state, note), api_min, engine_s = shown("Reservation admission", "reservation_admit_min")
    assert (state, api_min, engine_s) == ("Off", 0, 0.0)
    assert note.startswith("since ") and note.endswith("by system: backfill only")
    with django_assert_num_queries(1):
        policy = policy_now(cluster=live.cluster)
    assert not policy["share_floor"]["on"] and policy["idle_reclaim"]["on"]
    assert not policy["consolidate"]["on"]
    assert policy["reservation_admit_min"] == {
        "on": False, "within_s": 0.0, "changed_at": policy["reservation_admit_min"]["changed_at"],
        "changed_by": "system", "reason": "backfill only",
    }  # fmt: skip


def test_the_now_page_counts_are_the_apis_and_the_clis(live, client, live_server, tmp_path):
    """One count, one value: the Now page's GPUs, hosts and jobs of a cluster are what
    API clusters/ and hosts/ and `allot clusters` / `allot hosts` give for it."""
    for _ in range(3):
        live.submit("b1", gpus=8, min_runtime_s=3600)
    live.cycle()
    for _ in range(2):
        live.submit("a1", gpus=8, min_runtime_s=3600)
    live.cycle(advance_s=1)
    Host.objects.filter(cluster=live.cluster, name="node02").update(
        health="draining", health_reason="ECC errors", health_changed_at=timezone.now()
    )
    root = SuperUserFactory(username="root")
    api = APIClient()
    api.force_authenticate(root)
    client.force_login(root)
    html = client.get("/now/").content.decode()

    def shown(label: str) -> str:
        (value,) = re.findall(rf"<dt>{re.escape(label)}</dt><dd>(.*?)</dd>", html, re.S)
        return " ".join(re.sub(r"<[^>]+>", " ", value).split())

    row = api.get(f"/api/v1/clusters/{live.cluster.pk}/").json()
    hosts = api.get("/api/v1/hosts/", {"cluster": live.cluster.name}).json()["results"]
    in_use = sum(h["gpus_in_use"] for h in hosts)
    assert in_use > 0 and row["pending_jobs"] > 0 and row["draining_hosts"] == 1  # not all 0
    assert shown("Running GPUs") == f"{in_use} of {row['gpus']}; {row['healthy_gpus']} healthy"
    assert shown("Pending").split()[0] == str(row["pending_jobs"])
    assert shown("Running jobs") == str(row["running_jobs"])
    (drained,) = [h for h in hosts if h["health"] == "draining"]
    assert f"{drained['gpus_in_use']} of {drained['gpus']}" in html
    cli = Cli(live_server.url, tmp_path, token_for(root))
    (line,) = [r for r in cli("clusters").stdout.splitlines() if r.startswith(live.cluster.name)]
    assert line.split()[4:9] == [
        str(row["healthy_gpus"]), "1", "0", str(row["pending_jobs"]), str(row["running_jobs"])
    ]  # fmt: skip
    cli_in_use = [r.split()[3] for r in cli("hosts").stdout.splitlines()[1:]]
    assert sum(map(int, cli_in_use)) == in_use


def test_only_staff_and_operators_get_the_now_link(live, client):
    ann, bob = live.tree.user("ann"), live.tree.user("bob")
    assert not is_operator(ann)
    client.force_login(ann)
    assert 'href="/now/"' not in client.get("/me/").content.decode()
    live.cluster.operators.add(ann)
    assert is_operator(ann)
    assert 'href="/now/"' in client.get("/me/").content.decode()
    bob.is_staff = True
    bob.save()
    assert is_operator(bob)


def test_my_jobs_say_where_each_pending_job_stands(live, client):
    for _ in range(4):
        live.submit("b1", gpus=8, min_runtime_s=3600)
    live.cycle()
    waiting = live.submit("a1", gpus=8, min_runtime_s=600, name="my-waiting-job")
    live.cycle(advance_s=1)
    client.force_login(live.tree.user("ann"))
    html = client.get("/me/").content.decode()
    row = html[html.index("my-waiting-job") :]
    row = row[: row.index("</tr>")]
    assert "1 of 1" in row  # its position in the queue
    assert "waiting:" in row and "submitted" not in row  # the queue's reason, not the event
    assert 'data-label="Estimated start"><time datetime=' in row or "being computed" in row
    assert waiting.pk


@pytest.mark.parametrize(("demo", "seeded", "shown"), [(True, True, True), (True, False, False),
                                                     (False, True, False)])  # fmt: skip
def test_demo_logins_only_on_a_demo_install(client, settings, demo, seeded, shown):
    settings.ALLOT_DEMO = demo
    if seeded:
        budget_tree_import(data={"name": DEMO_ROOT, "children": [{"name": "p", "weight": 1}]})
    html = client.get("/accounts/login/").content.decode()
    assert ("Demo logins" in html) is shown
    assert (DEMO_PASSWORD in html) is shown


def test_favicon_and_the_way_back_from_swagger(client):
    icon = client.get("/favicon.ico")
    assert icon.status_code == 301 and icon["Location"].endswith("favicon.svg")
    docs = client.get("/api/docs/").content.decode()
    assert "Back to the app" in docs and 'href="/dashboards/"' in docs
    assert "favicon.svg" in docs


def test_a_cycle_time_the_banner_calls_stalled_never_reads_now():
    """A page showed "as of the cycle at 01:39:34 UTC (now)" under the banner "no cycle
    for more than 15 s": a time written to the second reads "now" only within
    NOW_SECONDS_S, in the page's text and in static/js/time.js alike."""
    now = dt.datetime(2026, 12, 5, 12, 0, tzinfo=dt.UTC)
    forty = now - dt.timedelta(seconds=40)
    assert relative_text(forty, now, seconds=True) == "40 s ago"
    assert relative_text(forty, now) == "now"  # a time to the minute keeps its 45 s
    assert relative_text(now - dt.timedelta(seconds=3), now, seconds=True) == "now"
    script = (ROOT / "static" / "js" / "time.js").read_text()
    assert re.search(rf"toTheSecond \? {NOW_SECONDS_S} : {NOW_S}\b", script)
    # the shortest stale limit (three cycle periods of a 5 s demo cycle) is past it
    assert NOW_SECONDS_S < 3 * 5
