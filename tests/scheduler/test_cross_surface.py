"""One figure, one value: after live cycles on the simulated cluster (real PostgreSQL),
every surface that shows a figure of a project or a job shows the same value: the
dashboard selectors, the API (`usage`, `fairshare`, `queue`, `jobs/{id}`), the job page,
the what-if preview's recorded column and the CLI (`allot show`, `allot usage`,
`allot shares`, run as a user runs it against a live server)."""

from __future__ import annotations

import datetime as dt
import html

import pytest
from django.utils import timezone
from rest_framework.test import APIClient

from allot_cli import render
from allot_cli.main import SHARE_COLUMNS, SHARE_FRACTIONS
from budgets.selectors import tree_index
from budgets.shares import share_text
from dashboards.charts import rule_label
from dashboards.selectors import delivery
from ledger.selectors import Period, fairshare, floor_hour, recorded_delivery
from ledger.services import rollups_refresh
from scheduler.core.engine import RULE_LABELS, StopReason, stop_rule
from scheduler.models import JobEvent
from scheduler.selectors.jobs import job_page
from tests.cli.test_cli import Cli
from tests.factories import SuperUserFactory
from tests.live.conftest import live  # noqa: F401  (the live fixture)
from tests.roles import token_for

pytestmark = pytest.mark.django_db


@pytest.fixture
def world(live):  # noqa: F811
    """a2 fills the cluster for two hours; an a1 job and a b1 job wait behind it."""
    for _ in range(4):
        live.submit("a2", gpus=8, min_runtime_s=3 * 3600, duration_s=6 * 3600)
    live.cycle()
    waiting = [live.submit("a1", gpus=8, min_runtime_s=3600), live.submit("b1", gpus=4)]
    for _ in range(4):
        live.cycle(advance_s=1800)
    root = SuperUserFactory(username="root")
    client = APIClient()
    client.force_authenticate(root)
    return live, waiting, root, client


def test_a_waiting_job_reads_the_same_on_the_queue_job_api_and_job_page(world):
    lv, waiting, root, client = world
    queue = client.get("/api/v1/queue/", {"cluster": lv.cluster.name}).json()["results"]
    by_job = {row["job"]: row for row in queue}
    for job in waiting:
        row = by_job[job.pk]
        detail = client.get(f"/api/v1/jobs/{job.pk}/").json()["queue"]
        page = job_page(actor=root, job_id=job.pk)["queue"]
        for name, value in (
            ("position", row["position"]),
            ("fairshare_factor", row["fairshare_factor"]),
            ("reason", row["reason"]),
        ):
            assert detail[name] == value, (name, detail[name], value)
            assert page[name] == value, (name, page[name], value)
        client.force_login(root)
        text = html.unescape(client.get(f"/jobs/{job.pk}/").content.decode())
        assert row["reason"].removeprefix("waiting: ") in text


def test_a_project_reads_the_same_on_the_fairshare_api_and_dashboard(world):
    lv, _waiting, root, client = world
    api = {
        n["path"]: n
        for n in client.get("/api/v1/fairshare/", {"cluster": lv.cluster.name}).json()["nodes"]
    }
    board = {n["path"]: n for n in fairshare(viewer=root, cluster=lv.cluster)["nodes"]}
    assert set(api) == set(board)
    for path, node in api.items():
        for name in ("entitled_share", "norm_shares", "rank", "fairshare"):
            assert (
                node[name] == pytest.approx(board[path][name])
                if node[name] is not None
                else board[path][name] is None
            ), (path, name)


def test_delivery_reads_the_same_on_the_usage_api_dashboard_and_preview_record(world):
    lv, _waiting, root, client = world
    until = floor_hour(lv.now.astimezone(dt.UTC))
    since = until - dt.timedelta(days=7)
    rollups_refresh(cluster_id=lv.cluster.pk, since=since, until=until, now=lv.now)
    index = tree_index()
    api: dict[str, dict[str, float]] = {}
    rows = client.get(
        "/api/v1/usage/",
        {
            "cluster": lv.cluster.name,
            "since": since.isoformat(),
            "until": until.isoformat(),
            "step": "day",
            "limit": 500,
        },
    ).json()["results"]
    for row in rows:
        sums = api.setdefault(row["project_path"], {"delivered_gpu_h": 0.0, "entitled_gpu_h": 0.0})
        sums["delivered_gpu_h"] += row["delivered_gpu_h"]
        sums["entitled_gpu_h"] += row["entitled_gpu_h"]
    board = {
        p["path"]: p
        for p in delivery(
            Period(since=since, until=until, step="day", cluster=lv.cluster), user=root
        )["projects"]
    }
    record = {
        index.path(pid): figures
        for pid, figures in recorded_delivery(cluster=lv.cluster, since=since, until=until).items()
    }
    a2 = "org/prog-a/a2"
    assert api[a2]["delivered_gpu_h"] > 0
    for path, sums in api.items():
        for name in ("delivered_gpu_h", "entitled_gpu_h"):
            assert board[path][name] == pytest.approx(sums[name]), (path, name)
            assert record[path][name] == pytest.approx(sums[name]), (path, name)
        assert (
            board[path]["ratio"] == pytest.approx(record[path]["ratio"])
            if record[path]["ratio"] is not None
            else board[path]["ratio"] is None
        )


def _words(text: str) -> str:
    return " ".join(text.split())


@pytest.mark.django_db(transaction=True)  # the live server's thread reads the committed rows
def test_the_cli_shows_the_figures_the_api_and_pages_show(
    world, live_server, tmp_path, monkeypatch
):
    """`allot show`, `allot usage` and `allot shares` (their human output, not --json)
    against the job page selector, the delivery dashboard and the fair-share dashboard."""
    lv, waiting, root, _client = world
    # one moment for every surface: the server (a thread of this process) and the
    # selectors read the clock of the cluster's last cycle, so usage that grows while
    # jobs run reads the same on each
    monkeypatch.setattr(timezone, "now", lambda: lv.now)
    cli = Cli(live_server.url, tmp_path, token_for(root))
    cli.env["COLUMNS"] = "1000"  # one line per value: nothing folded

    # allot show <job>: position, fair-share factor, reason and blockers of the job page
    for job in waiting:
        shown = cli("show", str(job.pk))
        assert shown.returncode == 0, shown.stderr
        page = job_page(actor=root, job_id=job.pk)
        queue = page["queue"]
        lines = {
            line.split("  ", 1)[0].strip(): _words(line.split("  ", 1)[1])
            for line in shown.stdout.splitlines()
            if "  " in line.strip()
        }
        assert lines["position"].startswith(f"{queue['position']} of {queue['queue_length']} ")
        assert lines["fair-share factor"] == render.number(queue["fairshare_factor"])
        assert lines["reason"] == _words(queue["reason"])
        text = _words(shown.stdout)
        for blocker in page["blockers"]:
            assert _words(blocker["text"]) in text, blocker

    # allot usage: per project, the delivered and entitled GPU-hours of the dashboard
    until = floor_hour(lv.now.astimezone(dt.UTC))
    since = until - dt.timedelta(days=7)
    rollups_refresh(cluster_id=lv.cluster.pk, since=since, until=until, now=lv.now)
    board = {
        p["path"]: p
        for p in delivery(
            Period(since=since, until=until, step="day", cluster=lv.cluster), user=root
        )["projects"]
    }
    used = cli(
        "usage", "--cluster", lv.cluster.name, "--since", since.isoformat(),
        "--until", until.isoformat(), "--step", "day",
    )  # fmt: skip
    assert used.returncode == 0, used.stderr
    header = next(line for line in used.stdout.splitlines() if "DELIVERED" in line).split()
    assert header[-6:] == ["DELIVERED", "UNALLOC", "DEMAND", "ENTITLED", "GPU", "UTIL"]
    sums: dict[str, dict[str, float]] = {}
    for line in used.stdout.splitlines():
        cells = line.split()
        if lv.cluster.name not in cells:
            continue
        path = cells[cells.index(lv.cluster.name) + 1]
        figures = sums.setdefault(path, {"delivered_gpu_h": 0.0, "entitled_gpu_h": 0.0})
        figures["delivered_gpu_h"] += float(cells[-5])
        figures["entitled_gpu_h"] += float(cells[-2])
        assert cells[-1] == "unknown" or cells[-1].endswith("%"), cells  # never a bare 0
    assert sums["org/prog-a/a2"]["delivered_gpu_h"] > 0
    assert set(sums) == set(board)
    for path, figures in sums.items():
        for name, value in figures.items():
            # the CLI shows four significant digits
            assert value == pytest.approx(board[path][name], rel=2e-3, abs=1e-3), (path, name)

    # allot shares: every node's figures of the fair-share dashboard, in its format
    shares = cli("shares", "--cluster", lv.cluster.name)
    assert shares.returncode == 0, shares.stderr
    nodes = fairshare(viewer=root, cluster=lv.cluster)["nodes"]
    rows = [
        line.split()
        for line in shares.stdout.splitlines()
        if line.split() and line.split()[0] in {n["name"] for n in nodes}
    ]
    assert [r[0] for r in rows] == [n["name"] for n in nodes]
    for row, node in zip(rows, nodes, strict=True):
        expected = [
            share_text(node[c]) if c in SHARE_FRACTIONS and node[c] is not None
            else render.number(node[c])
            for c in SHARE_COLUMNS
        ]  # fmt: skip
        assert row[1:] == expected, (node["path"], row, expected)


def test_the_job_page_protection_end_is_the_engines(live):  # noqa: F811
    """The engine protects a run for min(min runtime, the cluster's cap) from its start
    (glossary: protection); the job page's capacity blocker says the same end, also
    after the cap was lowered below what running jobs asked for."""
    holders = [live.submit("a2", gpus=8, min_runtime_s=3 * 3600) for _ in range(4)]
    live.cycle()
    live.cluster.max_min_runtime_s = 3600  # lowered after the jobs asked for 3 h
    live.cluster.save()
    waiting = live.submit("a1", gpus=8, min_runtime_s=600)
    live.cycle(advance_s=600)
    root = SuperUserFactory(username="root")
    attempts = [live.job(h).attempts.get() for h in holders]
    first_end = min(a.started_at for a in attempts) + dt.timedelta(hours=1)
    blocker = next(
        b for b in job_page(actor=root, job_id=waiting.pk)["blockers"] if b["kind"] == "capacity"
    )
    assert blocker["numbers"]["protected_until"] == first_end.isoformat()
    assert f"ends at {first_end:%Y-%m-%d %H:%M} UTC" in blocker["text"]


@pytest.mark.django_db(transaction=True)  # the live server's thread reads the committed rows
def test_a_preemption_rule_has_one_name_and_one_label_everywhere(live, live_server, tmp_path):  # noqa: F811
    """The rule a live stop records is the simulator report's name for it, and the job
    page, the API (`rule`, `rule_label`) and the waits chart's legend say it in the same
    words."""
    free = [live.submit("a2", gpus=8, min_runtime_s=0) for _ in range(4)]
    live.cycle()
    live.submit("a1", gpus=8, min_runtime_s=600)
    live.cycle(advance_s=60)
    stopped = JobEvent.objects.get(job__in=free, rule__gt="")
    assert stopped.rule == stop_rule(StopReason.UNALLOCATED) == "unallocated_work"
    label = RULE_LABELS[stopped.rule]
    root = SuperUserFactory(username="root")
    client = APIClient()
    client.force_authenticate(root)
    events = client.get(f"/api/v1/jobs/{stopped.job_id}/").json()["events"]
    assert [(e["rule"], e["rule_label"]) for e in events if e["rule"]] == [(stopped.rule, label)]
    client.force_login(root)
    page = html.unescape(client.get(f"/jobs/{stopped.job_id}/").content.decode())
    assert f"{label}: {stopped.reason}" in page
    assert rule_label(stopped.rule) == label  # the charts' legends and CSV
    cli = Cli(live_server.url, tmp_path, token_for(root))
    cli.env["COLUMNS"] = "1000"
    shown = cli("show", str(stopped.job_id))
    assert shown.returncode == 0, shown.stderr
    assert f"{label}: {_words(stopped.reason)}" in _words(shown.stdout)
