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
