"""Playwright and the browser in a thread of their own (tests/support/browser_thread.py):
their event loop runs there and never in the worker's thread, where every other test
runs, and the body of a page test runs in that thread."""

import asyncio
import threading

import pytest

from tests.browser import BROWSER_MARKS

pytestmark = BROWSER_MARKS


def test_the_worker_thread_has_no_event_loop_while_a_page_is_open(request):
    page = request.getfixturevalue("page")  # not a fixture of the test: its body runs here
    chromium = request.getfixturevalue("chromium")
    assert threading.current_thread() is threading.main_thread()
    with pytest.raises(RuntimeError):
        asyncio.get_running_loop()
    assert asyncio.run(asyncio.sleep(0, result="ran")) == "ran"  # refused where a loop runs
    assert chromium.run(asyncio.get_running_loop).is_running()
    chromium.run(page.set_content, "<p id=said>hello</p>")
    assert chromium.run(page.inner_text, "#said") == "hello"


def test_a_page_tests_body_runs_in_the_browsers_thread(page):
    assert threading.current_thread().name == "playwright"
    page.set_content("<p id=said>hello</p>")
    assert page.inner_text("#said") == "hello"
    # a new context per test: nothing stored by another test's pages
    assert page.context.cookies() == []
