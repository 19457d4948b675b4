"""The efficiency pyramid, the per-project efficiency table and a job's GPU utilization
in a real browser (Debian's chromium), on a desktop and on a phone: drawn under the
content security policy, never scrolling sideways, unknown shown as unknown."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest
from django.utils import timezone

from scheduler.models import UtilizationSample
from tests.browser import BROWSER_MARKS, sign_in
from tests.dashboards import data
from tests.factories import AttemptFactory, ClusterFactory, JobFactory

pytestmark = BROWSER_MARKS

SCREENSHOTS = Path("var/screenshots")
VIEWPORTS = {"desktop": {"width": 1440, "height": 900}, "phone": {"width": 390, "height": 844}}
CSP_LISTENER = """
window.__csp = [];
document.addEventListener('securitypolicyviolation', e => window.__csp.push(
  e.violatedDirective + ' ' + (e.blockedURI || 'inline')));
"""


def _job_with_utilization(tree, cluster):
    start = timezone.now() - dt.timedelta(hours=1)
    user = tree.user("lead-a")
    job = JobFactory(
        cluster=cluster, project=tree.node("a1"), submitter=user, gpus=2, first_started_at=start
    )
    attempt = AttemptFactory(
        job=job, placements=[{"host": "node00", "gpu_indices": [0, 1]}], started_at=start
    )
    for m in range(40):
        UtilizationSample.objects.create(
            attempt=attempt, cluster=cluster, start=start + dt.timedelta(minutes=m),
            end=start + dt.timedelta(minutes=m + 1), samples=4, mean_pct=92.0 if m % 10 else 45.0,
            max_pct=92.0, known_s=60.0,
        )  # fmt: skip
    return job


@pytest.mark.parametrize("viewport", VIEWPORTS)
def test_pyramid_efficiency_and_job_utilization(tree, live_server, page, viewport):
    from playwright.sync_api import expect

    cluster = ClusterFactory(name="h100", host_count=8, gpus_per_host=8)
    data.history(tree, cluster)
    job = _job_with_utilization(tree, cluster)
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.add_init_script(CSP_LISTENER)
    page.set_viewport_size(VIEWPORTS[viewport])
    base = live_server.url
    sign_in(page, base, "lead-a")
    page.goto(f"{base}/dashboards/?cluster=h100&days=7&step=hour")
    expect(page.locator("#efficiency .chart .main-svg").first).to_be_visible()
    headline = page.locator("#efficiency dl.headline")
    for label in ("Availability", "Occupancy", "Impact", "GPU utilization"):
        expect(headline).to_contain_text(label)
    table = page.locator("#efficiency table.efficiency")
    expect(table).to_contain_text("org/prog-a/a2")
    expect(table.locator("tr", has_text="org/prog-a/a2")).to_contain_text("unknown")
    page.wait_for_load_state("networkidle")
    page.screenshot(path=str(SCREENSHOTS / f"efficiency-{viewport}.png"), full_page=True)
    assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")
    assert page.evaluate("window.__csp") == []

    page.goto(f"{base}/jobs/{job.pk}/")
    row = page.locator("tr", has_text="GPU utilization")
    expect(row).to_contain_text("%")
    expect(row.locator("svg.sparkline polyline")).to_be_visible()
    expect(page.locator("tr", has_text="Effective GPU-h")).to_be_visible()
    assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")
    # the facts fit: a 300-px sparkline beside an unfolded label once made the table
    # scroll inside itself on a phone, every value cut at the right edge
    facts = page.locator("table.facts")
    assert facts.evaluate("t => t.scrollWidth <= t.clientWidth"), facts.evaluate(
        "t => [t.scrollWidth, t.clientWidth]"
    )
    assert page.evaluate("window.__csp") == []
    page.screenshot(path=str(SCREENSHOTS / f"job-utilization-{viewport}.png"), full_page=True)
