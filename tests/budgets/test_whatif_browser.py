"""A real browser: a manager types a new weight, previews it on the cluster's recent
jobs, sees the progress and then the before/after table and chart; its screenshot
(ALLOT_SCREENSHOTS=1) is var/screenshots/whatif.png."""

from tests.browser import BROWSER_MARKS, screenshot, sign_in
from tests.factories import ClusterFactory, HostFactory
from tests.support.jobs import seed_jobs

pytestmark = BROWSER_MARKS


def test_manager_previews_a_weight_change_on_past_jobs(tree, live_server, page):
    from playwright.sync_api import expect

    cluster = ClusterFactory(name="gpu", host_count=2)
    for i in range(2):
        HostFactory(cluster=cluster, name=f"node{i:02d}")
    seed_jobs(tree, cluster, n=120)
    tree.user("lead-a")
    errors: list[str] = []
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    sign_in(page, live_server.url, "lead-a")
    page.goto(f"{live_server.url}/budgets/nodes/{tree.node('prog-a').pk}/edit/")
    page.fill("input[aria-label='weight of a2']", "90")
    expect(page.locator("#preview table.preview")).to_contain_text("org/prog-a/a2")
    page.fill("input[name=days]", "3")
    page.click("button:has-text('Preview on past jobs')")

    result = page.locator("#whatif table.whatif-result")
    expect(result).to_contain_text("org/prog-a/a2")
    expect(result).to_contain_text("120 jobs of gpu")
    expect(page.locator("#whatif .whatif-chart .main-svg").first).to_be_visible()
    # the axis names each project by the server's labels (dashboards.charts.short_label)
    ticks = page.locator("#whatif .whatif-chart .ytick text").all_text_contents()
    assert ticks and all(t.startswith("org/prog-") for t in ticks), ticks
    assert not [e for e in errors if "Content Security Policy" in e], errors
    page.set_viewport_size({"width": 1280, "height": 900})
    page.locator("#whatif").scroll_into_view_if_needed()
    screenshot(page, "whatif")
