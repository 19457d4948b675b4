"""A real browser (Debian's chromium driven by Playwright): a manager edits a weight,
sees the live preview, saves with a reason and finds the change in the history."""

from tests.browser import BROWSER_MARKS, sign_in

pytestmark = BROWSER_MARKS


def test_manager_edits_a_weight_and_sees_it_in_the_history(tree, live_server, page):
    from playwright.sync_api import expect

    tree.user("lead-a")  # password "pw"
    sign_in(page, live_server.url, "lead-a")
    expect(page.locator("h1")).to_contain_text("Budget tree")

    page.click(f"a[href='/budgets/nodes/{tree.node('prog-a').pk}/edit/']")
    # htmx listens for the input once the page has loaded: typing earlier (a busy
    # machine) goes unheard and no preview comes
    page.wait_for_load_state("load")
    page.fill("input[aria-label='weight of a1']", "30")
    preview = page.locator("#preview table.preview")
    expect(preview).to_contain_text("org/prog-a/a1")
    expect(preview).to_contain_text("25.00%")  # 50% x 30/60 after the edit

    page.fill("textarea[name=reason]", "Quarterly review: a2 ships the evaluation suite")
    page.click("button:has-text('Save change')")
    expect(page.locator("h1")).to_contain_text("Budget history")
    first = page.locator("article.event").first
    expect(first).to_contain_text("Quarterly review: a2 ships the evaluation suite")
    expect(first).to_contain_text("lead-a")
    expect(first).to_contain_text("org/prog-a/a1")
    expect(first).to_contain_text("70 → 30")


def test_the_tree_header_reads_on_a_phone(tree, live_server, page):
    """At 390 px the tree scrolls sideways inside itself; its header must not be squeezed
    into a narrow column that breaks 'Entitled GPU-h/week' over seven lines."""
    from playwright.sync_api import expect

    from tests.factories import ClusterFactory

    ClusterFactory(name="demo-h100", host_count=16, gpus_per_host=8)
    page.set_viewport_size({"width": 390, "height": 844})
    tree.user("lead-a")
    sign_in(page, live_server.url, "lead-a")
    expect(page.locator("table.tree")).to_contain_text("Entitled GPU-h/week")
    heights = page.evaluate(
        "() => [...document.querySelectorAll('table.tree thead th')]"
        ".map(th => th.getBoundingClientRect().height)"
    )
    line = page.evaluate(
        "() => parseFloat(getComputedStyle(document.querySelector('table.tree th')).lineHeight)"
        " || 20"
    )
    assert max(heights) <= 3 * line, (heights, line)  # a title and the cluster's line
    assert page.evaluate("() => document.documentElement.scrollWidth") <= 390
