"""The dashboards and /me/ in a real browser (Debian's chromium): every chart is drawn
from its htmx partial under the content security policy, and screenshots are saved to
var/screenshots/ for a person to look at."""

from __future__ import annotations

import datetime as dt
import math
from pathlib import Path

from django.utils import timezone

from ledger.models import ClusterHour, ProjectHour
from scheduler.models import JobState
from tests.browser import BROWSER_MARKS, sign_in
from tests.dashboards import data
from tests.factories import ClusterFactory, HostFactory

pytestmark = BROWSER_MARKS

SCREENSHOTS = Path("var/screenshots")
CSP_LISTENER = """
window.__csp = [];
document.addEventListener('securitypolicyviolation', e => window.__csp.push(
  e.violatedDirective + ' ' + (e.blockedURI || 'inline')));
"""


def _history(tree, cluster) -> None:
    """A week of varied ledger hours, jobs, preemptions and a drain."""
    capacity = float(cluster.gpu_capacity)
    projects = [tree.node("a1"), tree.node("a2"), tree.node("b1")]
    shares = [0.35, 0.15, 0.5]
    cluster_rows, project_rows = [], []
    for h in range(7 * 24):
        wave = 0.5 + 0.4 * math.sin(h / 9.0)
        used = capacity * wave
        within, borrowed = used * 0.8, used * 0.1
        unallocated, down = capacity * 0.05, 8.0 if 30 < h < 40 else 0.0
        idle_demand = capacity * 0.05 if h % 24 < 6 else 0.0
        idle = capacity - within - borrowed - unallocated - down - idle_demand
        cluster_rows.append(
            ClusterHour(
                cluster=cluster,
                hour=data.hour_ago(h),
                capacity_gpu_h=capacity,
                healthy_gpu_h=capacity - down,
                within_entitlement_gpu_h=within,
                borrowed_gpu_h=borrowed,
                unallocated_gpu_h=unallocated,
                idle_demand_gpu_h=idle_demand,
                idle_gpu_h=idle,
                down_gpu_h=down,
                computed_at=timezone.now(),
            )
        )
        for i, (project, share) in enumerate(zip(projects, shares, strict=True)):
            entitled = min(share * capacity, used * (0.4 + 0.3 * i))
            project_rows.append(
                ProjectHour(
                    cluster=cluster,
                    project=project,
                    hour=data.hour_ago(h),
                    entitled_gpu_h=entitled,
                    allocated_gpu_h=entitled * (0.8 + 0.1 * i),
                    demand_gpu_h=entitled * 1.5,
                    unallocated_gpu_h=1.0,
                )
            )
    ClusterHour.objects.bulk_create(cluster_rows)
    ProjectHour.objects.bulk_create(project_rows)
    ann = tree.user("ann")
    for h in range(0, 7 * 24, 5):
        for kind, wait_min in (("debug", 2 + h % 7), ("training", 20 + h % 40)):
            started = data.hour_ago(h) + dt.timedelta(minutes=10)
            j = data.job(
                cluster,
                tree.node("a1"),
                ann,
                kind=kind,
                state=JobState.SUCCEEDED,
                submitted_at=started - dt.timedelta(minutes=wait_min),
                name=f"{kind}-run-{h}",
            )
            data.attempt(j, started_at=started, ended_at=started + dt.timedelta(minutes=30))
            if h % 20 == 0:
                data.preemption(
                    j,
                    at=started + dt.timedelta(minutes=5),
                    rule="fair_share" if kind == "training" else "unallocated",
                )
    for i in range(3):
        data.job(
            cluster,
            tree.node("a1"),
            ann,
            submitted_at=data.hour_ago(1),
            name=f"waiting-{i}",
            state=JobState.PENDING,
        )
    host = HostFactory(cluster=cluster, name="gpu-node-07")
    data.health_change(host, at=data.hour_ago(40), to="draining", reason="ECC errors on GPU 3")
    data.health_change(host, at=data.hour_ago(31), to="healthy", reason="GPU replaced")


def test_dashboards_and_me_draw_their_charts(tree, live_server, page):
    from playwright.sync_api import expect

    cluster = ClusterFactory(name="h100", host_count=8, gpus_per_host=8)
    _history(tree, cluster)
    tree.user("lead-a")  # gives the user the password "pw"
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.add_init_script(CSP_LISTENER)
    page.set_viewport_size({"width": 1400, "height": 900})
    base = live_server.url
    sign_in(page, base, "lead-a")
    page.goto(f"{base}/dashboards/?cluster=h100&days=7&step=hour")
    for section in ("occupancy", "delivery", "waits"):
        expect(page.locator(f"#{section} .chart .main-svg").first).to_be_visible()
    expect(page.locator("#fairshare table.fairshare")).to_contain_text("a1")
    expect(page.locator("#occupancy dl.headline")).to_contain_text("Occupancy")
    expect(page.locator("#delivery")).to_contain_text("of 3")
    expect(page.locator("#waits table.drains")).to_contain_text("ECC errors on GPU 3")
    page.wait_for_load_state("networkidle")
    page.screenshot(path=str(SCREENSHOTS / "dashboards.png"), full_page=True)
    assert page.evaluate("window.__csp") == []

    page.click("#delivery a.download >> nth=0")  # downloads do not break the page
    page.select_option("select[name=step]", "day")
    page.click("form.filters button[type=submit]")
    expect(page.locator("#occupancy .chart .main-svg").first).to_be_visible()
    assert "step=day" in page.url

    page.context.clear_cookies()  # sign out (the sign-out button would match sign_in's click)
    sign_in(page, base, "ann")
    page.goto(f"{base}/me/")
    expect(page.locator("#my-jobs table.jobs tbody tr").first).to_contain_text("waiting-")
    expect(page.locator("#my-projects .chart .main-svg").first).to_be_visible()
    page.wait_for_load_state("networkidle")
    page.screenshot(path=str(SCREENSHOTS / "me.png"), full_page=True)
    assert page.evaluate("window.__csp") == []
