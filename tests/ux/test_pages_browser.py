"""Every page in a real browser (Debian's chromium), on a desktop (1440 x 900) and on a
phone (390 x 844): the page never scrolls sideways, logs no console error, has no
failed request, every Plotly axis is titled and no two tick labels of an axis overlap.
A page with a finding has its screenshot written to var/screenshots/<page>-<viewport>.png;
ALLOT_SCREENSHOTS=1 writes every page's, for a person to look at (the README's tour takes
the best of them; 48 full-page screenshots are a sixth of this test's CPU).

The process's browser (tests/support/browser_thread.py), one live server, the pages visited in a loop; two worlds:
a busy one (long names, a thousand waiting jobs, history, drains, adapter errors, a
what-if preview) and an empty one (no cluster, no job: the empty states)."""

from __future__ import annotations

import datetime as dt
import time

import pytest
from django.utils import timezone

from accounts.services import token_create
from budgets import services as budget_services
from budgets.demo import DEMO_ROOT
from budgets.services import budget_tree_import
from scheduler.models import (
    Attempt,
    AttemptEnd,
    AttemptState,
    CycleRecord,
    Host,
    Job,
    JobEvent,
    JobState,
    UtilizationSample,
)
from tests.browser import BROWSER_MARKS, DRAWN, SHOTS, every_screenshot, sign_in
from tests.dashboards import data
from tests.factories import AttemptFactory, ClusterFactory, HostFactory, JobFactory
from tests.support.jobs import seed_jobs
from tests.support.live import submit_job

pytestmark = BROWSER_MARKS
VIEWPORTS = {"desktop": {"width": 1440, "height": 900}, "phone": {"width": 390, "height": 844}}
LONG_NAME = "multilingual-pretraining-and-evaluation-of-very-large-language-models-2027"
WAITING = 1000
SUBMITTED = 56  # of them through the submit service: every gpus, project and name kind

# What the page looks like to a checker: sideways scroll, Plotly axes without a title and
# tick labels of one axis whose boxes overlap.
PAGE_CHECKS = """
() => {
  const out = {scrollWidth: document.documentElement.scrollWidth, innerWidth: window.innerWidth,
               charts: 0, untitled: [], overlaps: []};
  const plots = Array.from(document.querySelectorAll(".js-plotly-plot"));
  plots.forEach(function (gd, n) {
    const layout = gd._fullLayout;
    if (!layout) { return; }
    out.charts += 1;
    const name = (gd.id || gd.dataset.figure || gd.dataset.mode || gd.dataset.source || "chart") + "#" + n;
    Object.keys(layout).filter(function (k) { return /^[xy]axis\\d*$/.test(k); }).forEach(function (k) {
      const axis = layout[k];
      if (!axis.visible || axis.showticklabels === false) { return; }
      const title = axis.title && axis.title.text;
      if (!title || !String(title).trim()) { out.untitled.push(name + " " + k); }
    });
    const groups = {};
    gd.querySelectorAll("g[class$='tick'] > text").forEach(function (t) {
      const box = t.getBoundingClientRect();
      if (!t.textContent.trim() || box.width === 0 || getComputedStyle(t).opacity === "0") { return; }
      const key = t.parentNode.getAttribute("class");
      (groups[key] = groups[key] || []).push({text: t.textContent, box: box});
    });
    Object.keys(groups).forEach(function (key) {
      const ticks = groups[key];
      for (let i = 0; i < ticks.length; i++) {
        for (let j = i + 1; j < ticks.length; j++) {
          const a = ticks[i].box, b = ticks[j].box;
          if (a.left < b.right - 1 && b.left < a.right - 1 && a.top < b.bottom - 1 && b.top < a.bottom - 1) {
            out.overlaps.push(name + " " + key + ": '" + ticks[i].text + "' / '" + ticks[j].text + "'");
          }
        }
      }
    });
  });
  return out;
}
"""


@pytest.fixture
def browser(chromium):
    """The process's chromium (tests/support/browser_thread.py: this module's test bodies
    run in its thread); each Visitor opens a context of its own."""
    from playwright.sync_api import expect

    expect.set_options(timeout=30000)  # a what-if preview replays its jobs before it draws
    return chromium.browser()


class Visitor:
    """A browser tab that records console errors and failed requests per page."""

    def __init__(self, browser, base: str):
        self.context = browser.new_context()
        self.page = self.context.new_page()
        self.page.set_default_timeout(30000)
        self.base = base
        self.problems: list[str] = []
        self.page.on("console", self._console)
        self.page.on("pageerror", lambda e: self.problems.append(f"page error: {e}"))
        self.page.on("requestfailed", self._failed)
        self.page.on("response", self._response)
        self.in_flight: set = set()  # requests sent and not yet answered
        self.page.on("request", lambda r: self.in_flight.add(r))
        self.page.on("requestfinished", lambda r: self.in_flight.discard(r))
        self.page.on("requestfailed", lambda r: self.in_flight.discard(r))

    def _console(self, message) -> None:
        if message.type == "error":
            self.problems.append(f"console: {message.text}")

    def _failed(self, request) -> None:
        # a poll that a navigation cancels is not a failure of the page
        if request.failure != "net::ERR_ABORTED":
            self.problems.append(f"failed: {request.url} {request.failure}")

    def _response(self, response) -> None:
        if response.status >= 400:
            self.problems.append(f"HTTP {response.status}: {response.url}")

    def settle(self) -> None:
        """Wait until the page is drawn: loaded, every chart drawn by Plotly, Swagger UI's
        operations listed, and no request of the page unanswered (its responses and
        failures recorded) - instead of half a second without traffic."""
        from playwright.sync_api import TimeoutError as PlaywrightTimeout

        page = self.page
        page.wait_for_load_state("load")
        try:
            page.wait_for_function(DRAWN, timeout=30000)
        except PlaywrightTimeout:  # reported with the page's errors, which say why
            self.problems.append("never finished drawing (a part or a chart missing)")
        deadline = time.monotonic() + 30
        while self.in_flight and time.monotonic() < deadline:
            page.wait_for_timeout(20)  # lets Playwright deliver the requests' events
        self.problems.extend(f"unanswered: {r.url}" for r in self.in_flight)

    def check(self, name: str, viewport: str) -> dict:
        """Check the page as it is now (its screenshot written when it has a finding, or
        when every screenshot is asked for: ALLOT_SCREENSHOTS=1); the findings."""
        page = self.page
        self.settle()
        found = page.evaluate(PAGE_CHECKS)
        findings = {}
        if found["scrollWidth"] > found["innerWidth"]:
            findings["sideways scroll"] = f"{found['scrollWidth']} > {found['innerWidth']}"
        if found["untitled"]:
            findings["untitled axes"] = found["untitled"]
        if found["overlaps"]:
            findings["overlapping tick labels"] = found["overlaps"]
        if self.problems:
            findings["errors"] = list(self.problems)
            self.problems.clear()
        if findings or every_screenshot():
            SHOTS.mkdir(parents=True, exist_ok=True)
            page.screenshot(path=str(SHOTS / f"{name}-{viewport}.png"), full_page=True)
        return {"charts": found["charts"], **({"findings": findings} if findings else {})}

    def visit(self, name: str, path: str, viewport: str) -> dict:
        self.page.goto(self.base + path)
        return self.check(name, viewport)

    def close(self) -> None:
        self.context.close()


def _utilization(*jobs: Job) -> None:
    """Known GPU utilization over the jobs' attempts (the job pages draw it)."""
    for attempt in Attempt.objects.filter(job__in=jobs):
        start = attempt.started_at or timezone.now()
        UtilizationSample.objects.bulk_create(
            UtilizationSample(
                attempt=attempt, cluster=attempt.cluster,
                start=start + dt.timedelta(minutes=m), end=start + dt.timedelta(minutes=m + 1),
                samples=4, mean_pct=92.0 if m % 10 else 45.0, max_pct=92.0, known_s=60.0,
            )
            for m in range(30)
        )  # fmt: skip


def _busy_world(live) -> dict[str, str]:
    """Long names, a thousand waiting jobs, running and ended ones, history, a drain, a
    host down, adapter errors, the short-job reserve; the paths of the pages to visit."""
    tree = live.tree
    lead_a = tree.user("lead-a")
    budget_services.node_create(
        actor=lead_a, parent_id=tree.node("prog-a").pk, name=LONG_NAME, weight=5, reason="r"
    )
    budget_services.node_create(
        actor=lead_a, parent_id=tree.node("prog-a").pk, name="sandbox", weight=0, reason="free"
    )
    cluster = live.cluster
    cluster.short_reserve_hosts = 1
    cluster.save(update_fields=["short_reserve_hosts"])
    ann = live.user
    ann.is_staff = ann.is_superuser = True
    ann.set_password("pw")
    ann.save()
    for _ in range(3):
        live.submit("b1", gpus=8, min_runtime_s=3600, name="protected-training")
    live.cycle()
    running = Job.objects.filter(cluster=cluster, state=JobState.RUNNING).first()
    project, long_project = tree.node("a1"), tree.node(LONG_NAME)
    _wait_in_line(cluster, project, long_project, ann, live.now)
    live.cycle(advance_s=1)
    waiting = Job.objects.filter(cluster=cluster, state=JobState.PENDING).order_by("id").first()
    ended = submit_job(cluster=cluster, project=project, user=ann, at=live.now, name="done")
    AttemptFactory(
        job=ended, number=1, attempt_id=f"ended-{ended.pk}", cluster=cluster, project=project,
        gpus=1, placements=[{"host": "node00", "gpu_indices": [0]}], allocated=True,
        state=AttemptState.ENDED, created_at=live.now, started_at=live.now,
        ended_at=live.now + dt.timedelta(minutes=30), end_reason=AttemptEnd.SUCCEEDED,
    )  # fmt: skip
    Job.objects.filter(pk=ended.pk).update(state=JobState.SUCCEEDED, ended_at=timezone.now())
    data.history(tree, cluster)
    _utilization(running, ended)
    for kind, wait in (("sweep", dt.timedelta(days=3, hours=5)), ("debug", dt.timedelta(0))):
        started = timezone.now() - dt.timedelta(hours=3)  # waits from none to days: log axis
        late = data.job(cluster, project, ann, kind=kind, state=JobState.SUCCEEDED,
                        submitted_at=started - wait, name=f"{kind}-waited")  # fmt: skip
        data.attempt(late, started_at=started, ended_at=started + dt.timedelta(minutes=20))
    Host.objects.filter(cluster=cluster, name="node03").update(
        health="draining", health_reason="ECC errors on GPU 3; " + "reseated twice " * 8,
        health_changed_at=timezone.now() - dt.timedelta(hours=2),
    )  # fmt: skip
    CycleRecord.objects.create(
        cluster=cluster, started_at=timezone.now() - dt.timedelta(minutes=5), duration_ms=12.0,
        errors=["adapter unreachable: connection refused by 10.0.0.7:6820 after 3 retries"],
    )  # fmt: skip
    empty = ClusterFactory(name="empty-cluster", host_count=2)
    for i in range(2):
        HostFactory(cluster=empty, name=f"e{i}")
    seed_jobs(tree, cluster, n=120)
    for name in (LONG_NAME[:100], "CI runner of the " + "long " * 14 + "project", ""):
        token_create(user=ann, name=name)  # a name of one long word folds in its column
    return {
        "budget-tree": "/budgets/",
        "budget-history": "/budgets/history/",
        "dashboards": f"/dashboards/?cluster={cluster.pk}&days=7&step=hour",
        "dashboards-by-day": f"/dashboards/?cluster={cluster.pk}&days=30&step=day",
        "dashboards-no-history": f"/dashboards/?cluster={empty.pk}",
        "me": "/me/",
        "me-last-page": "/me/?page=999",
        "me-tokens": "/me/tokens/",
        "job-waiting": f"/jobs/{waiting.pk}/",
        "job-running": f"/jobs/{running.pk}/",
        "job-ended": f"/jobs/{ended.pk}/",
        "now": "/now/",
        "queue": f"/clusters/{cluster.pk}/queue/",
        "queue-last-page": f"/clusters/{cluster.pk}/queue/?page=999&running_page=999",
        "queue-long-names": f"/clusters/{cluster.pk}/queue/?project=org/prog-a/{LONG_NAME}",
        "queue-running": f"/clusters/{cluster.pk}/queue/?state=running",
        "queue-empty-cluster": f"/clusters/{empty.pk}/queue/",
        "planner": "/planner/",
        "planner-mixed-control": "/planner/mixed-control/",
        "planner-scale": "/planner/scale/",
        "api-docs": "/api/docs/",
        "admin": "/admin/",
    }


def _waiting_job(i: int, **rows) -> dict:
    """The i-th of the thousand waiting jobs: its GPUs, minimum run time and name."""
    return {
        "gpus": (1, 2, 4, 8)[i % 4],
        "min_runtime_s": (600, 3600, 600, 28800)[i % 4],
        "name": f"{LONG_NAME}-sweep-{i}" if i % 50 == 0 else f"run-{i}",
        **rows,
    }


def _wait_in_line(cluster, project, long_project, user, now: dt.datetime) -> None:
    """A thousand waiting jobs, one a second: the first SUBMITTED through the submit
    service (each kind of row the pages show), the rest stored in bulk as the service
    stores them (a job PENDING and its first event), which is 30 s cheaper."""
    bulk: list[Job] = []
    for i in range(WAITING):
        at = now - dt.timedelta(seconds=WAITING - i)
        where = long_project if i % 7 == 0 else project
        if i < SUBMITTED:
            submit_job(cluster=cluster, project=where, user=user, at=at, **_waiting_job(i))
            continue
        fields = _waiting_job(i, cluster=cluster, project=where, submitter=user)
        bulk.append(JobFactory.build(**fields, submitted_at=at, state=JobState.PENDING,
                                     state_reason="submitted"))  # fmt: skip
    jobs = Job.objects.bulk_create(bulk)
    JobEvent.objects.bulk_create(
        JobEvent(job=job, at=job.submitted_at, to_state=JobState.PENDING, reason_code="submitted",
                 reason=f"submitted by {user.username}", actor=user, actor_name=user.username)
        for job in jobs
    )  # fmt: skip


def _whatif(visitor: Visitor, tree, viewport: str) -> dict:
    """The edit page with a what-if preview drawn."""
    from playwright.sync_api import expect

    page = visitor.page
    page.goto(f"{visitor.base}/budgets/nodes/{tree.node('prog-a').pk}/edit/")
    page.fill("input[aria-label='weight of a2']", "90")
    expect(page.locator("#preview table.preview")).to_contain_text("org/prog-a/a2")
    page.select_option("select[name=cluster]", "live")
    page.fill("input[name=days]", "3")
    page.click("button:has-text('Preview on past jobs')")
    expect(page.locator("#whatif .whatif-chart .main-svg").first).to_be_visible()
    return visitor.check("whatif", viewport)


def _assert_clean(results: dict[str, dict]) -> None:
    bad = {page: r["findings"] for page, r in results.items() if "findings" in r}
    assert bad == {}


def test_every_page_reads_well_on_a_desktop_and_a_phone(live, live_server, browser):
    paths = _busy_world(live)
    charts_expected = {"dashboards": 6, "me": 1, "planner-mixed-control": 3, "whatif": 1}
    results: dict[str, dict] = {}
    for viewport, size in VIEWPORTS.items():
        visitor = Visitor(browser, live_server.url)
        visitor.page.set_viewport_size(size)
        results[f"sign-in/{viewport}"] = visitor.visit("sign-in", "/accounts/login/", viewport)
        sign_in(visitor.page, live_server.url, "ann")
        for name, path in paths.items():
            results[f"{name}/{viewport}"] = visitor.visit(name, path, viewport)
        results[f"whatif/{viewport}"] = _whatif(visitor, live.tree, viewport)
        visitor.close()
    _assert_clean(results)
    for name, count in charts_expected.items():
        for viewport in VIEWPORTS:
            assert results[f"{name}/{viewport}"]["charts"] == count, (name, viewport)


def test_the_empty_states_read_well_too(live_server, browser):
    """No cluster, no job, no history: every page says so in words (and a demo install
    lists its logins on the sign-in page)."""
    budget_tree_import(
        data={
            "name": DEMO_ROOT,
            "managers": ["ceo"],
            "children": [{"name": "solo", "weight": 1, "members": ["researcher"]}],
        }
    )
    from django.contrib.auth import get_user_model

    researcher = get_user_model().objects.get(username="researcher")
    researcher.set_password("pw")
    researcher.save()
    paths = {
        "empty-dashboards": "/dashboards/",
        "empty-me": "/me/",
        "empty-me-tokens": "/me/tokens/",
        "empty-now": "/now/",
        "empty-queue": "/queue/",
        "empty-budget-tree": "/budgets/",
        "empty-history": "/budgets/history/?actor=nobody",
    }
    results: dict[str, dict] = {}
    for viewport, size in VIEWPORTS.items():
        visitor = Visitor(browser, live_server.url)
        visitor.page.set_viewport_size(size)
        results[f"sign-in-demo/{viewport}"] = visitor.visit(
            "sign-in-demo", "/accounts/login/", viewport
        )
        assert visitor.page.locator(".demo-logins").is_visible()
        sign_in(visitor.page, live_server.url, "researcher")
        for name, path in paths.items():
            results[f"{name}/{viewport}"] = visitor.visit(name, path, viewport)
        assert visitor.page.locator("header.top a:has-text('Now')").count() == 0
        visitor.close()
    _assert_clean(results)
