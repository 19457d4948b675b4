"""The window planner page in a real browser: three Plotly heatmaps side by side."""

from tests.browser import BROWSER_MARKS, sign_in
from tests.roles import participant

pytestmark = BROWSER_MARKS


def test_planner_heatmaps_render_in_a_real_browser(live_server, page):
    from playwright.sync_api import expect

    participant("viewer")
    sign_in(page, live_server.url, "viewer")
    page.goto(f"{live_server.url}/planner/")
    page.click("text=mixed-control")
    for mode in ("fifo", "fast", "full"):
        heatmap = page.locator(f"#heatmap-{mode}")
        expect(heatmap.locator(".main-svg").first).to_be_visible()
        expect(page.locator(f"tr[data-mode={mode}]")).to_contain_text("%")
    assert page.evaluate("typeof Plotly") == "object"
    expect(page.locator(".legend").first).to_contain_text("(real-time)")
