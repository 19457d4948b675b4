"""One figure, one value: after live cycles on the simulated cluster (real PostgreSQL),
every surface that shows a figure of a project or a job shows the same value: the
dashboard selectors, the API (`usage`, `fairshare`, `queue`, `jobs/{id}`), the job page,
the what-if preview's recorded column and the CLI (`allot show`, `allot usage`,
`allot shares`, run as a user runs it against a live server)."""

from __future__ import annotations

import datetime as dt
import html
import re

import pytest
from django.template.defaultfilters import floatformat
from django.utils import timezone
from rest_framework.test import APIClient

from allot_cli import render
from allot_cli.usage import SHARE_COLUMNS, SHARE_FRACTIONS
from budgets.selectors import tree_index
from budgets.shares import share_text
from dashboards.charts import rule_label
from dashboards.selectors import delivery, fairshare_now, my_projects
from dashboards.templatetags.dashboards import percent
from ledger.models import ProjectHour
from ledger.selectors import (
    entitlement_ratios,
    fairshare,
    occupancy,
    recorded_delivery,
    report_end,
    resolve_period,
    resolve_span,
    window_usage,
)
from ledger.services import rollups_refresh
from scheduler.core.engine import RULE_LABELS, StopReason, stop_rule
from scheduler.core.engine.explain import FOR_GPUS
from scheduler.models import JobEvent, QueueSnapshot, UtilizationSample
from scheduler.selectors.jobs import job_page
from scheduler.selectors.queue import last_cycle
from scheduler.services.previews import preview_window
from tests.factories import SuperUserFactory
from tests.roles import token_for
from tests.support.cli import Cli

pytestmark = pytest.mark.django_db


@pytest.fixture
def world(live):
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
    # a1 (no usage: 0% of its entitled share) ranks behind b1 because its program used
    # more relative to its share: the reason names that level (glossary: deciding level),
    # and every surface below shows the reason whole
    assert by_job[waiting[0].pk]["reason"].endswith(
        "(fair-share rank 2 of 3); 1 project ranks above it; behind project org/prog-b/b1 at "
        "the deciding level: prog-a used more relative to its share than prog-b (level FS "
        "0.50 vs ∞); no free GPUs"
    )
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
        # the reason's words, in the blocker they name (budget, or capacity alone)
        assert row["reason"].removeprefix("waiting: ").removeprefix(FOR_GPUS) in text


def test_scheduling_figures_are_the_last_cycles_on_the_queue_fairshare_api_and_dashboard(
    world, monkeypatch
):
    """docs/concepts.md#windows: the fair-share dashboard, API `fairshare/` and the queue
    are all as of the cluster's last cycle (the queue's `computed_at`): asked 20 minutes
    after it, while a2's jobs still run (its usage grows), they give the cycle's usage
    and the queue's factor and rank, not the request time's."""
    lv, _waiting, root, client = world
    later = lv.now + dt.timedelta(minutes=20)
    monkeypatch.setattr(timezone, "now", lambda: later)
    queue = client.get("/api/v1/queue/", {"cluster": lv.cluster.name}).json()
    api = client.get("/api/v1/fairshare/", {"cluster": lv.cluster.name}).json()
    board = fairshare_now(viewer=root, cluster=lv.cluster)
    stamp = last_cycle(cluster_id=lv.cluster.pk)
    assert stamp is not None and stamp.at == lv.now
    assert dt.datetime.fromisoformat(queue["computed_at"]) == stamp.at
    assert dt.datetime.fromisoformat(api["as_of"]) == stamp.at and api["from_cycle"]
    assert board["as_of"] == stamp.at and board["from_cycle"]

    nodes = {n["path"]: n for n in api["nodes"]}
    rows = {r["path"]: r for r in board["rows"]}
    assert set(rows) == set(nodes) - {"org"}
    for path, row in rows.items():
        node = nodes[path]
        assert row["usage_gpu_h"] == pytest.approx(node["raw_usage"]), path
        for name in ("factor", "rank", "level_fs"):
            key = {"factor": "fairshare"}.get(name, name)
            assert row[name] == (pytest.approx(node[key]) if node[key] is not None else None)

    # the usage is the cycle's: the same as the cycle read it, not the request time's
    index = tree_index()
    a2 = "org/prog-a/a2"

    def usage_h(at):
        used = window_usage(cluster_id=lv.cluster.pk, now=at, lookback_s=lv.cluster.lookback_s)
        return used.get(index.find(a2), 0.0) / 3600

    assert nodes[a2]["raw_usage"] == pytest.approx(usage_h(stamp.at))
    assert usage_h(later) > usage_h(stamp.at) + 1  # a surface reading it now would differ

    # the factor and rank of every project are the queue's (its stored project order and
    # the rank and factor of its waiting jobs)
    snapshot = QueueSnapshot.objects.get(cluster=lv.cluster)
    factors = {index.path(pid): factor for pid, factor in snapshot.project_order}
    for path, factor in factors.items():
        expected = nodes[path]["fairshare"]
        assert factor == (pytest.approx(expected) if expected is not None else None), path
    assert queue["results"]
    for row in queue["results"]:
        node = nodes[row["project_path"]]
        factor = node["fairshare"]
        assert row["fairshare_factor"] == (pytest.approx(factor) if factor is not None else None)
        assert row["project_rank"] == node["rank"], row["project_path"]
        if node["rank"] is not None:
            assert f"rank {node['rank']} of " in row["reason"], row["reason"]


def _partial_hour_counts(lv) -> dt.datetime:
    """Rollups for the last 7 days up to now, the current, partial hour included (with
    a2's runs in it): a surface that read it would show more than the others."""
    end = report_end(lv.now)
    assert lv.now > end  # the clock is inside an hour
    rollups_refresh(
        cluster_id=lv.cluster.pk,
        since=end - dt.timedelta(days=8),
        until=end + dt.timedelta(hours=1),
        now=lv.now,
    )
    partial = ProjectHour.objects.filter(cluster=lv.cluster, hour=end)
    assert sum(r.allocated_gpu_h for r in partial) > 0
    return end


def test_reporting_figures_end_at_the_last_complete_hour_on_every_surface(world, monkeypatch):
    """docs/concepts.md#windows: for the default period, the delivery dashboard, /me/,
    API `usage/` and `occupancy/`, the metric `allot_entitlement_ratio` and the what-if
    preview's recorded column all end at the last complete hour, state that end the same
    way and show the same delivered and entitled GPU-hours, ratio and occupancy."""
    lv, _waiting, root, client = world
    monkeypatch.setattr(timezone, "now", lambda: lv.now)
    end = _partial_hour_counts(lv)
    stamp = end.isoformat().replace("+00:00", "Z")
    index = tree_index()

    period = resolve_period(cluster=lv.cluster.name)  # what the dashboards read
    assert period.until == end and period.since == end - dt.timedelta(days=7)
    board = {p["path"]: p for p in delivery(period, user=root)["projects"]}

    body = client.get("/api/v1/usage/", {"cluster": lv.cluster.name, "limit": 1000}).json()
    assert (body["window_start"], body["window_end"]) == (
        period.since.isoformat().replace("+00:00", "Z"),
        stamp,
    )
    api: dict[str, dict[str, float]] = {}
    for row in body["results"]:
        sums = api.setdefault(row["project_path"], {"delivered_gpu_h": 0.0, "entitled_gpu_h": 0.0})
        sums["delivered_gpu_h"] += row["delivered_gpu_h"]
        sums["entitled_gpu_h"] += row["capped_entitled_gpu_h"]
        assert row["entitled_gpu_h"] == row["capped_entitled_gpu_h"]  # the deprecated alias

    since, until = preview_window(lv.now, 7)
    assert (since, until) == (period.since, period.until)
    record = {
        index.path(pid): f
        for pid, f in recorded_delivery(cluster=lv.cluster, since=since, until=until).items()
    }
    ceo = lv.tree.user("ceo")
    mine = {
        p["path"]: next(c for c in p["clusters"] if c["cluster"] == lv.cluster.name)
        for p in my_projects(user=ceo, span=resolve_span())
        if p["clusters"]
    }
    metric = {path: ratio for name, path, ratio in entitlement_ratios() if name == lv.cluster.name}
    assert api["org/prog-a/a2"]["delivered_gpu_h"] > 0
    assert set(api) == set(board) == set(record) == set(mine)
    for path, sums in api.items():
        for name in ("delivered_gpu_h", "entitled_gpu_h"):
            for surface in (board, record, mine):
                assert surface[path][name] == pytest.approx(sums[name]), (path, name)
        ratio = board[path]["ratio"]
        for surface in (record, mine):
            assert surface[path]["ratio"] == (pytest.approx(ratio) if ratio is not None else None)
        assert metric.get(path) == (pytest.approx(ratio) if ratio is not None else None), path

    occupancy_rows = client.get(
        "/api/v1/occupancy/", {"cluster": lv.cluster.name, "limit": 1000}
    ).json()
    assert occupancy_rows["window_end"] == stamp
    totals = occupancy(period, viewer=root)["totals"]
    for bucket in ("capacity_gpu_h", "within_entitlement_gpu_h", "borrowed_gpu_h"):
        api_total = sum(r[bucket] for r in occupancy_rows["results"])
        # each row is given to 3 decimals (the API's precision), the total is not rounded
        half_unit = 5e-4 * len(occupancy_rows["results"])
        assert api_total == pytest.approx(totals[bucket], abs=half_unit), bucket

    # every page states the end in the same words
    client.force_login(lv.tree.user("ceo"))
    pages = [
        client.get(f"/dashboards/{name}/", {"cluster": lv.cluster.name}).content.decode()
        for name in ("delivery", "occupancy", "efficiency")
    ]
    pages.append(client.get("/me/").content.decode())
    for page in pages:
        shown = page[page.index("days of complete hours, to ") :]
        assert f'<time datetime="{stamp}"' in shown[:120]


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

    _check_show(cli, waiting, root)
    _check_usage(cli, lv, root)
    _check_shares(cli, lv, root)


def _check_show(cli: Cli, waiting, root) -> None:
    """`allot show <job>`: position, fair-share factor, reason and blockers of the job page."""
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
        assert lines["queue position"].startswith(
            f"{queue['position']} of {queue['queue_length']} "
        )
        assert lines["fair-share factor"] == floatformat(queue["fairshare_factor"], 2)
        assert lines["reason"] == _words(queue["reason"])
        text = _words(shown.stdout)
        for blocker in page["blockers"]:
            assert _words(blocker["text"]) in text, blocker


def _check_usage(cli: Cli, lv, root) -> None:
    """`allot usage` (its default window): per project, the delivered and entitled
    GPU-hours of the delivery dashboard's default period, its end said the same way."""
    end = _partial_hour_counts(lv)
    board = {
        p["path"]: p
        for p in delivery(resolve_period(cluster=lv.cluster.name), user=root)["projects"]
    }
    used = cli("usage", "--cluster", lv.cluster.name)
    assert used.returncode == 0, used.stderr
    assert f"last 7 days of complete hours, to {render.when(end.isoformat())}" in used.stdout
    header = next(line for line in used.stdout.splitlines() if "DELIVERED" in line).split()
    assert header[-7:] == [
        "DELIVERED", "UNALLOC", "DEMAND", "CAPPED", "ENT", "GPU", "UTIL"
    ]  # fmt: skip
    assert f"GPU-hours on {lv.cluster.name} per day" in used.stdout  # one cluster: no column
    sums: dict[str, dict[str, float]] = {}
    for line in used.stdout.splitlines():
        cells = line.split()
        if not cells or not re.fullmatch(r"\d{4}-\d{2}-\d{2}", cells[0]):  # a day's row
            continue
        if cells[1] == "(partial)":  # a day the period starts or ends inside
            del cells[1]
        path = cells[1]
        figures = sums.setdefault(path, {"delivered_gpu_h": 0.0, "entitled_gpu_h": 0.0, "days": 0})
        figures["days"] += 1
        # GPU-hours with the delivery dashboard's one decimal
        assert all(re.fullmatch(r"\d+\.\d", cell) for cell in cells[-5:-1]), cells
        figures["delivered_gpu_h"] += float(cells[-5])
        figures["entitled_gpu_h"] += float(cells[-2])
        assert cells[-1] == "unknown" or cells[-1].endswith("%"), cells  # never a bare 0
    assert sums["org/prog-a/a2"]["delivered_gpu_h"] > 0
    assert set(sums) == set(board)
    for path, figures in sums.items():
        days = figures.pop("days")
        for name, value in figures.items():
            # each day's row is rounded to 0.1 GPU-h
            assert value == pytest.approx(board[path][name], abs=0.05 * days + 1e-9), (path, name)
    _check_usage_totals(used.stdout, board)


def _check_usage_totals(stdout: str, board: dict) -> None:
    """`allot usage`'s "over the period" table: each project's row of the delivery
    dashboard with its digits, the delivery ratio ("Entitlement delivered") included,
    which the CLI once did not show at all."""
    lines = stdout.splitlines()
    start = next(i for i, line in enumerate(lines) if line.strip() == "over the period")
    assert lines[start + 1].split() == [
        "PROJECT", "DELIVERED", "CAPPED", "ENT", "ENT", "DELIVERED", "DEMAND", "UNALLOC"
    ]  # fmt: skip
    totals = {cells[0]: cells[1:] for line in lines[start + 2 :] if (cells := line.split())}
    assert set(totals) == set(board)
    for path, cells in totals.items():
        row = board[path]
        assert cells == [
            floatformat(row["delivered_gpu_h"], 1),
            floatformat(row["entitled_gpu_h"], 1),
            percent(row["ratio"]),
            floatformat(row["demand_gpu_h"], 1),
            floatformat(row["unallocated_gpu_h"], 1),
        ], path


def _check_shares(cli: Cli, lv, root) -> None:
    """`allot shares`: every node's figures of the fair-share dashboard, in its format,
    as of the last cycle (as `allot queue` says too)."""
    shares = cli("shares", "--cluster", lv.cluster.name)
    assert shares.returncode == 0, shares.stderr
    answer = fairshare(viewer=root, cluster=lv.cluster)
    assert answer["as_of"] == lv.now  # the last cycle's time, as the queue's
    at = render.when(lv.now.isoformat(), seconds=True)
    assert f"as of the cycle at {at}" in shares.stdout
    queued = cli("queue", "--cluster", lv.cluster.name)
    assert f"as of the cycle at {at}" in queued.stdout, queued.stdout
    nodes = answer["nodes"]
    rows = [
        line.split()
        for line in shares.stdout.splitlines()
        if line.split() and line.split()[0] in {n["name"] for n in nodes}
    ]
    assert [r[0] for r in rows] == [n["name"] for n in nodes]
    for row, node in zip(rows, nodes, strict=True):
        expected = [_dashboard_format(node, c) for c in SHARE_COLUMNS]
        assert row[1:] == expected, (node["path"], row, expected)


def _dashboard_format(node: dict, column: str) -> str:
    """A fair-share figure as the dashboard writes it (usage in GPU-hours with one
    decimal, level FS and factor with two, none: '–' and an infinite level FS '∞' as on
    the page and in the glossary)."""
    value = node[column]
    if column in SHARE_FRACTIONS and value is not None:
        return share_text(value)
    unentitled = node["depth"] > 0 and not node["entitled_share"]
    if column == "level_fs" and node["level_fs_infinite"]:
        return "∞"
    if value is None or (unentitled and column in ("level_fs", "fairshare")):
        return "–"
    if column == "raw_usage":
        return floatformat(value, 1)  # the dashboard's own filters
    if column in ("level_fs", "fairshare"):
        return floatformat(value, 2)
    return render.number(value)


def test_the_job_page_protection_end_is_the_engines(live):
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
def test_a_preemption_rule_has_one_name_and_one_label_everywhere(live, live_server, tmp_path):
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


def _row_of(page: str, job_pk: int) -> str:
    """The My jobs row of job `job_pk` in the page's HTML."""
    start = page.index(f'<a href="/jobs/{job_pk}/">{job_pk}</a>')
    return page[start : page.index("</tr>", start)]


def _protected_cell(row: str) -> str:
    return re.search(r'data-label="Protected until">(.*?)</td>', row, re.S)[1]


def _show_lines(cli: Cli, job_pk: int) -> dict[str, str]:
    """`allot show <job>`'s labelled lines: label -> value."""
    shown = cli("show", str(job_pk))
    assert shown.returncode == 0, shown.stderr
    return {
        line.split("  ", 1)[0].strip(): _words(line.split("  ", 1)[1])
        for line in shown.stdout.splitlines()
        if "  " in line.strip()
    }


@pytest.mark.django_db(transaction=True)  # the live server's thread reads the committed rows
def test_a_running_jobs_protection_end_and_utilization_read_the_same_everywhere(
    live, live_server, tmp_path
):
    """glossary: protection, utilization. A running allocated job's protection end
    (its run's start + min(min runtime, the cluster's cap), worked out here by hand)
    reads the same on the job API, the job page, My jobs and `allot show`, as does its
    GPU utilization; a pending job shows no protection end and an unallocated running job
    "never (unallocated)" (the API: null for both)."""
    allocated = live.submit("a2", gpus=8, min_runtime_s=2 * 3600, duration_s=6 * 3600)
    capped = live.submit("a2", gpus=8, min_runtime_s=5 * 3600, duration_s=6 * 3600)
    free = live.submit("a1", gpus=8, min_runtime_s=0, duration_s=6 * 3600)
    live.cluster.max_min_runtime_s = 3 * 3600  # lowered below what `capped` asked for
    live.cluster.save()
    live.cycle()
    live.cycle(advance_s=60)  # the cluster confirms the runs started
    pending = live.submit("a1", gpus=32, min_runtime_s=600)
    started = {job.pk: live.job(job).attempts.get().started_at for job in (allocated, capped, free)}
    assert all(started.values())
    expected = {
        allocated.pk: started[allocated.pk] + dt.timedelta(hours=2),
        capped.pk: started[capped.pk] + dt.timedelta(hours=3),  # the cap, not 5 h
    }
    root = SuperUserFactory(username="root")
    api = APIClient()
    api.force_authenticate(root)
    pages = APIClient()
    pages.force_login(root)
    mine = APIClient()
    mine.force_login(live.user)  # the submitter: My jobs lists their jobs
    my_jobs = mine.get("/me/").content.decode()
    cli = Cli(live_server.url, tmp_path, token_for(root))
    cli.env["COLUMNS"] = "1000"

    for job in (allocated, capped, free, pending):
        until = expected.get(job.pk)
        body = api.get(f"/api/v1/jobs/{job.pk}/").json()
        html_page = pages.get(f"/jobs/{job.pk}/").content.decode()
        row, lines = _row_of(my_jobs, job.pk), _show_lines(cli, job.pk)
        assert job_page(actor=root, job_id=job.pk)["protected_until"] == until
        if until is not None:  # a running allocated job: the same time on every surface
            stamp = until.isoformat().replace("+00:00", "Z")
            assert dt.datetime.fromisoformat(body["protected_until"]) == until
            assert re.search(
                rf'<th>Protected until</th><td><time datetime="{re.escape(stamp)}"', html_page
            )
            assert _protected_cell(row).startswith(f'<time datetime="{stamp}"')
            assert lines["protected until"].startswith(render.when(until.isoformat()) + " (in ")
            continue
        assert body["protected_until"] is None
        if job is free:  # running, never protected
            assert (
                '<th>Protected until</th><td><span class="muted">never (unallocated)' in html_page
            )
            assert "never (unallocated)" in _protected_cell(row)
            assert lines["protected until"] == "never (unallocated)"
        else:  # pending: no protection end anywhere
            assert "Protected until</th>" not in html_page
            assert _protected_cell(row) == "–"
            assert "protected until" not in lines
    _check_show_utilization(cli, api, pages, live, (allocated, capped, pending))


def _check_show_utilization(cli: Cli, api, pages, live, jobs) -> None:
    """`allot show` gives the job page's GPU utilization under its label: a measured
    figure as the page rounds it, "unknown" without metrics, nothing before a start."""
    measured, unmeasured, pending = jobs
    attempt = live.job(measured).attempts.get()
    UtilizationSample.objects.create(
        attempt=attempt, cluster=live.cluster, start=attempt.started_at,
        end=attempt.started_at + dt.timedelta(seconds=60), samples=4, mean_pct=95.3,
        max_pct=99.0, known_s=60.0,
    )  # fmt: skip
    body = api.get(f"/api/v1/jobs/{measured.pk}/").json()
    assert body["utilization"]["utilization"] == pytest.approx(0.953)
    assert (
        "<th>GPU utilization</th><td>95.3%" in pages.get(f"/jobs/{measured.pk}/").content.decode()
    )
    assert _show_lines(cli, measured.pk)["GPU utilization"] == "95.3%"
    assert _show_lines(cli, unmeasured.pk)["GPU utilization"].startswith("unknown (no GPU metrics")
    assert "GPU utilization" not in _show_lines(cli, pending.pk)  # never started
