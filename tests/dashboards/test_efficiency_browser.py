"""The efficiency pyramid, the per-project efficiency table and a job's GPU utilization
in a real browser (Debian's chromium), on a desktop and on a phone: drawn under the
content security policy, never scrolling sideways, unknown shown as unknown."""

from __future__ import annotations

import datetime as dt

import pytest
from django.utils import timezone

from scheduler.models import AttemptEnd, AttemptState, JobEvent, UtilizationSample
from tests.browser import BROWSER_MARKS, screenshot, sign_in
from tests.dashboards import data
from tests.factories import AttemptFactory, ClusterFactory, JobFactory

pytestmark = BROWSER_MARKS

VIEWPORTS = {"desktop": {"width": 1440, "height": 900}, "phone": {"width": 390, "height": 844}}
CSP_LISTENER = """
window.__csp = [];
document.addEventListener('securitypolicyviolation', e => window.__csp.push(
  e.violatedDirective + ' ' + (e.blockedURI || 'inline')));
"""


HOSTS = [f"h01{n:02d}" for n in range(1, 9)]  # a 64-GPU job: eight hosts listed


# Every table of the page whose content is wider than the table (it scrolls inside itself,
# its right edge cut): {heading or class: [scrollWidth, clientWidth]}.
TABLE_WIDTHS = """
() => Object.fromEntries(Array.from(document.querySelectorAll("main table")).map(function (t, n) {
  let head = t.previousElementSibling;
  while (head && !/^H[1-3]$/.test(head.tagName)) { head = head.previousElementSibling; }
  return [(t.className || (head ? head.textContent.trim() : "table")) + "#" + n,
          [t.scrollWidth, t.clientWidth]];
}))
"""


def _job_with_utilization(tree, cluster):
    """A running 64-GPU job on eight hosts, after a first attempt that failed, with the
    events a cycle writes (their reasons name the hosts)."""
    start = timezone.now() - dt.timedelta(hours=1)
    user = tree.user("lead-a")
    job = JobFactory(
        cluster=cluster, project=tree.node("a1"), submitter=user, gpus=64, first_started_at=start
    )
    placements = [{"host": h, "gpu_indices": list(range(8))} for h in HOSTS]
    AttemptFactory(
        job=job, number=1, placements=placements, state=AttemptState.ENDED,
        started_at=start - dt.timedelta(minutes=20), ended_at=start - dt.timedelta(minutes=5),
        end_reason=AttemptEnd.FAILED, end_detail="exit code 137 (killed: out of memory)",
    )  # fmt: skip
    attempt = AttemptFactory(job=job, number=2, placements=placements, started_at=start)
    hosts = "h01[01-08]"
    for at, (before, after, reason) in zip(
        (start - dt.timedelta(minutes=20), start - dt.timedelta(minutes=5), start),
        (
            ("pending", "running", f"started on {hosts} (64 GPUs): a1 at 12% of its share"),
            ("running", "pending", "attempt 1 failed: exit code 137 (killed: out of memory)"),
            ("pending", "running", f"started on {hosts} (64 GPUs): protected for 4 min 56 s"),
        ),
        strict=True,
    ):
        JobEvent.objects.create(
            job=job, at=at, from_state=before, to_state=after, reason=reason, attempt=attempt
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
    screenshot(page, f"efficiency-{viewport}")
    assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")
    assert page.evaluate("window.__csp") == []

    page.goto(f"{base}/jobs/{job.pk}/")
    row = page.locator("tr", has_text="GPU utilization")
    expect(row).to_contain_text("%")
    expect(row.locator("svg.sparkline polyline")).to_be_visible()
    expect(page.locator("tr", has_text="Effective GPU-h")).to_be_visible()
    assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")
    # every table fits: a 300-px sparkline beside an unfolded label once made the facts
    # scroll inside themselves on a phone, every value cut at the right edge; the
    # attempts' and events' times and host lists made theirs 16 px too wide
    widths = page.evaluate(TABLE_WIDTHS)
    assert len(widths) == 4 and all(w <= room for w, room in widths.values()), widths
    assert page.evaluate("window.__csp") == []
    screenshot(page, f"job-utilization-{viewport}")
