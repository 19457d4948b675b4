"""The banner of a dead background worker in a real browser (Debian's chromium), on a
desktop and on a phone: shown under the header, apart from the scheduling banner's
colour, and no wider than the screen. Its screenshots are written to
var/screenshots/banner-background-<viewport>.png when ALLOT_SCREENSHOTS=1."""

from __future__ import annotations

import datetime as dt

from django.utils import timezone
from playwright.sync_api import expect

from ops.services import heartbeat_record
from scheduler.models import CycleRecord
from tests.browser import BROWSER_MARKS, screenshot, sign_in
from tests.factories import ClusterFactory

pytestmark = BROWSER_MARKS

VIEWPORTS = {"desktop": {"width": 1440, "height": 900}, "phone": {"width": 390, "height": 844}}


def beat(kind: str, name: str, age_s: float, queues: tuple[str, ...] = ()) -> None:
    at = timezone.now() - dt.timedelta(seconds=age_s)
    heartbeat_record(kind=kind, name=name, host="test", started_at=at, now=at, queues=queues)


def test_the_background_banner_reads_on_a_desktop_and_a_phone(tree, live_server, page, settings):
    settings.ALLOT_HEARTBEAT_S = 5
    beat("beat", "beat", age_s=1)
    beat("worker", "run-8078@host", age_s=1, queues=("celery",))  # cycles go on
    beat("worker", "background-8078@host", age_s=600, queues=("background",))
    cluster = ClusterFactory(name="h100", cycle_s=10)
    CycleRecord.objects.create(
        cluster=cluster, started_at=timezone.now() - dt.timedelta(seconds=2), errors=[]
    )
    tree.user("ann")  # (its password set)
    sign_in(page, live_server.url, "ann")
    page.wait_for_url(lambda url: "/accounts/login/" not in url)
    for viewport, size in VIEWPORTS.items():
        page.set_viewport_size(size)
        page.goto(f"{live_server.url}/me/")
        expect(page.locator("h1")).to_contain_text("My jobs")
        banner = page.locator(".banner-background")
        expect(banner).to_be_visible()
        expect(banner).to_contain_text("what-if previews stay queued, job ETAs are not refreshed")
        expect(page.locator(".banner-stalled:not(.banner-background)")).to_have_count(0)
        assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")
        screenshot(page, f"banner-background-{viewport}", full_page=False)
