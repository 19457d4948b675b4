"""A real browser: a researcher opens the page of a job that waits behind protected
work and sees its ranked blockers and its estimated start with a range; its screenshot
(ALLOT_SCREENSHOTS=1) is var/screenshots/job.png."""

from tests.browser import BROWSER_MARKS, screenshot, sign_in

pytestmark = BROWSER_MARKS


def test_job_page_shows_blockers_and_eta(live, live_server, page):
    from playwright.sync_api import expect

    for _ in range(4):
        live.submit("b1", gpus=8, min_runtime_s=3600)
    live.cycle()  # every GPU is held by protected work for an hour
    waiting = live.submit("a1", gpus=8, min_runtime_s=600)
    live.cycle(advance_s=1)
    live.tree.user("ann")
    sign_in(page, live_server.url, "ann")
    page.goto(f"{live_server.url}/jobs/{waiting.pk}/")
    expect(page.locator("h2")).to_contain_text(["Why it waits"])
    expect(page.locator("ol.blockers li.blocker-capacity")).to_contain_text("hosts could hold it")
    eta = page.locator("#eta")
    expect(eta).to_contain_text("Estimated start:")
    # all of the cluster frees at once when the protected hour ends: one start, no range,
    # shown in the reader's zone with how far away it is
    expect(eta).to_contain_text("(in ")
    expect(eta).not_to_contain_text("likely between")
    expect(eta).to_contain_text("Reservation-only estimate")
    page.set_viewport_size({"width": 1280, "height": 900})
    screenshot(page, "job")
