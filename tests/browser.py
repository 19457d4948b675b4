"""Launching Debian's chromium for the page tests (Playwright; nothing is downloaded), and
waiting until a page is drawn and every request it made is answered."""

import os
import shutil
import time
from pathlib import Path

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
BROWSER_MARKS = [
    pytest.mark.browser,
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(
        CHROMIUM is None,
        reason="Debian's chromium is not installed (make test installs it as root)",
    ),
]


SHOTS = Path(__file__).resolve().parent.parent / "var" / "screenshots"


def every_screenshot() -> bool:
    """Whether the browser tests write every screenshot (`ALLOT_SCREENSHOTS=1`, for the
    README's tour); by default only a page with a finding gets one: a full-page screenshot
    is chromium's costliest step (a sixth of the page-by-page test's CPU) and no test
    reads it."""
    return os.environ.get("ALLOT_SCREENSHOTS", "0") == "1"


def screenshot(page, name: str, *, full_page: bool = True) -> None:
    """Write the page's screenshot to var/screenshots/<name>.png when every screenshot is
    asked for (`every_screenshot`)."""
    if every_screenshot():
        SHOTS.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(SHOTS / f"{name}.png"), full_page=full_page)


def sign_in(page, base_url: str, username: str, password: str = "pw") -> None:
    page.goto(f"{base_url}/accounts/login/")
    page.fill("input[name=username]", username)
    page.fill("input[name=password]", password)
    page.click("button[type=submit]")


# The page is loaded: the parts htmx loads after the page swapped in, and Swagger UI
# (which fetches the schema after load) lists its operations.
LOADED = """
() => document.readyState === "complete"
  && !document.querySelector(".htmx-request, .htmx-swapping, .htmx-settling")
  && Array.from(document.querySelectorAll("[hx-trigger='load']"))
       .every(function (el) { return !el.textContent.includes("Loading\u2026"); })
  && (!document.getElementById("swagger-ui")
      || document.querySelector("#swagger-ui .opblock, #swagger-ui .errors-wrapper") !== null)
"""
# The page is drawn: loaded, the parts htmx loads after the page (the dashboards'
# sections) swapped in, each chart's div drawn by Plotly (dashboards.js, planner.js,
# whatif.js), and Swagger UI (which fetches the schema after load) lists its operations.
DRAWN = """
() => document.readyState === "complete"
  && !document.querySelector(".htmx-request, .htmx-swapping, .htmx-settling")
  && Array.from(document.querySelectorAll("[hx-trigger='load']"))
       .every(function (el) { return !el.textContent.includes("Loading\u2026"); })
  && Array.from(document.querySelectorAll(".chart[data-figure], .heatmap, .whatif-chart"))
       .every(function (div) { return div.classList.contains("js-plotly-plot"); })
  && (!document.getElementById("swagger-ui")
      || document.querySelector("#swagger-ui .opblock, #swagger-ui .errors-wrapper") !== null)
"""


# The cells of the tables matching a selector that lie right of their table's visible box
# (the table scrolled sideways inside its card), by column: none when each row reads as a
# card (`table.cards` on a phone).
CUT_CELLS = """
(sel) => Array.from(document.querySelectorAll(sel + ' td')).filter(function (td) {
  const box = td.closest('table').parentElement.getBoundingClientRect();
  const r = td.getBoundingClientRect();
  return r.width > 0 && r.right > box.right + 1;
}).map(function (td) { return td.getAttribute('data-label') || td.textContent.trim(); })
"""


class Requests:
    """The requests of a page sent and not yet answered (a poll that a navigation cancels
    counts as answered)."""

    def __init__(self, page) -> None:
        self.in_flight: set = set()
        page.on("request", lambda r: self.in_flight.add(r))
        page.on("requestfinished", lambda r: self.in_flight.discard(r))
        page.on("requestfailed", lambda r: self.in_flight.discard(r))


def settle(page, requests: Requests, ready: str = DRAWN, timeout_s: float = 30) -> None:
    """Wait until the page is `ready` (drawn, or `LOADED`) and none of its requests is
    unanswered,
    then until the page's queued tasks (the reports of a violated content security
    policy among them) have run: what waiting for 0.5 s without traffic (Playwright's
    "networkidle") was for, without the half second."""
    page.wait_for_load_state("load")
    page.wait_for_function(ready, timeout=timeout_s * 1000, polling=50)
    deadline = time.monotonic() + timeout_s
    while requests.in_flight and time.monotonic() < deadline:
        page.wait_for_timeout(20)  # lets Playwright deliver the requests' events
    assert not requests.in_flight, [r.url for r in requests.in_flight]
    page.evaluate("() => new Promise(done => requestAnimationFrame(() => setTimeout(done, 0)))")
