"""A real browser (Debian's chromium driven by Playwright): a manager edits a weight,
sees the live preview, saves with a reason and finds the change in the history."""

import os
import shutil

import pytest

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
LAUNCH_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--disable-quic",
]

pytestmark = [
    pytest.mark.browser,
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(
        CHROMIUM is None,
        reason="Debian's chromium is not installed (make test installs it as root)",
    ),
]


@pytest.fixture
def page():
    os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=LAUNCH_ARGS)
        page = browser.new_page()
        page.set_default_timeout(15000)
        yield page
        browser.close()


def test_manager_edits_a_weight_and_sees_it_in_the_history(tree, live_server, page):
    from playwright.sync_api import expect

    tree.user("lead-a")  # password "pw"
    page.goto(f"{live_server.url}/budgets/")
    page.fill("input[name=username]", "lead-a")
    page.fill("input[name=password]", "pw")
    page.click("button[type=submit]")
    expect(page.locator("h1")).to_contain_text("Budget tree")

    page.click(f"a[href='/budgets/nodes/{tree.node('prog-a').pk}/edit/']")
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
