"""The dashboards and /me/ in a real browser (Debian's chromium): every chart is drawn
from its htmx partial under the content security policy; ALLOT_SCREENSHOTS=1 saves their
screenshots to var/screenshots/ for a person to look at."""

from __future__ import annotations

from tests.browser import BROWSER_MARKS, CUT_CELLS, screenshot, sign_in
from tests.dashboards import data
from tests.factories import ClusterFactory

pytestmark = BROWSER_MARKS

CSP_LISTENER = """
window.__csp = [];
document.addEventListener('securitypolicyviolation', e => window.__csp.push(
  e.violatedDirective + ' ' + (e.blockedURI || 'inline')));
"""


def test_dashboards_and_me_draw_their_charts(tree, live_server, page):
    from playwright.sync_api import expect

    cluster = ClusterFactory(name="h100", host_count=8, gpus_per_host=8)
    data.history(tree, cluster)
    tree.user("lead-a")  # gives the user the password "pw"
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
    screenshot(page, "dashboards")
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
    screenshot(page, "me")
    assert page.evaluate("window.__csp") == []


def test_project_tables_read_as_cards_on_a_phone(tree, live_server, page):
    """At 390 px the delivery table (634 px wide), the efficiency table and My projects
    scrolled sideways inside their cards: Delivered and Entitlement delivered, the figures
    a manager opens them for, stood out of view behind a scroll nothing pointed at. Each
    row is a card now, every figure under its column's name."""
    from tests.browser import DRAWN

    cluster = ClusterFactory(name="h100", host_count=8, gpus_per_host=8)
    data.history(tree, cluster)
    tree.user("lead-a")
    page.set_viewport_size({"width": 390, "height": 844})
    sign_in(page, live_server.url, "lead-a")
    page.goto(f"{live_server.url}/dashboards/?cluster=h100&days=7&step=hour")
    page.wait_for_function(DRAWN, timeout=30000, polling=100)
    for table in ("#delivery table.delivery", "#efficiency table.efficiency"):
        assert page.locator(f"{table} td").count() > 0, table
        assert page.evaluate(CUT_CELLS, table) == [], table
    delivered = page.locator('#delivery td[data-label="Entitlement delivered"]').first
    assert delivered.is_visible() and delivered.bounding_box()["x"] < 390
    page.goto(f"{live_server.url}/me/")
    page.wait_for_function(DRAWN, timeout=30000, polling=100)
    assert page.locator("#my-projects table.projects td").count() > 0
    assert page.evaluate(CUT_CELLS, "#my-projects table.projects") == []
