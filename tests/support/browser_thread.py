"""One chromium per pytest process, driven from a thread of its own (a pytest plugin).

Each page test used to start Playwright's driver and launch chromium, then stop both
(21 tests, 1.0-1.7 CPU-s each on the 2-core machine under load). Playwright's sync
API runs its event loop in the thread that starts it, and while it runs that thread has
a running asyncio loop (Django's async-unsafe checks fire, `async_to_sync` and
`asyncio.run` refuse to run): started once in the worker's own thread for the session,
the loop would be there for every later test, browser or not.

So Playwright and the browser live in the thread `Chromium` starts on first use, and a
test that uses them (its fixtures include `chromium`: `page`, or a module's own fixture
on it) has its body run in that thread (`pytest_pyfunc_call`), with the page its fixture
made there; the worker's thread, where every other test and every fixture runs, never
has an event loop. Each test gets a new browser context (its own cookies, storage and
cache, as a new browser had), closed after it. The test body's queries go through that
thread's own database connections (the browser tests are transactional: what fixtures
wrote is committed), closed after each test."""

from __future__ import annotations

import os
import queue
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from typing import Any

import pytest

from tests.browser import CHROMIUM, LAUNCH_ARGS

# the fixture whose tests run in the browser's thread
THREAD_FIXTURE = "chromium"
_CHROMIUM = pytest.StashKey["Chromium"]()


class Chromium:
    """Playwright's sync API and one launched chromium, in a thread of their own:
    `run(fn, ...)` calls `fn` there and returns its result or raises its exception."""

    def __init__(self) -> None:
        self._calls: queue.SimpleQueue = queue.SimpleQueue()
        launched: Future = Future()
        self._thread = threading.Thread(
            target=self._serve, args=(launched,), name="playwright", daemon=True
        )
        self._thread.start()
        self._browser = launched.result(timeout=120)

    def _serve(self, launched: Future) -> None:
        from playwright.sync_api import sync_playwright

        try:
            with sync_playwright() as p:
                self._playwright = p
                launched.set_result(self._launch())
                while (call := self._calls.get()) is not None:
                    done, fn, args, kwargs = call
                    try:
                        done.set_result(fn(*args, **kwargs))
                    except BaseException as e:  # pytest's failures and skips too
                        done.set_exception(e)
                self._browser.close()
        except BaseException as e:
            if not launched.done():
                launched.set_exception(e)
            raise

    def _launch(self):
        return self._playwright.chromium.launch(
            executable_path=CHROMIUM, headless=True, args=LAUNCH_ARGS
        )

    def browser(self):
        """The launched chromium; launched again if it went away (a crash fails the
        test it happened in, not every later one)."""

        def connected():
            if not self._browser.is_connected():
                self._browser = self._launch()
            return self._browser

        return self.run(connected)

    def run(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        if not self._thread.is_alive():
            raise RuntimeError("the browser's thread has ended")
        done: Future = Future()
        self._calls.put((done, fn, args, kwargs))
        return done.result()

    def new_page(self, timeout_ms: float):
        """A page in a new browser context (closed with `close_page`)."""
        browser = self.browser()

        def make():
            page = browser.new_context().new_page()
            page.set_default_timeout(timeout_ms)
            return page

        return self.run(make)

    def close_page(self, page) -> None:
        self.run(lambda: page.context.close())

    def stop(self) -> None:
        self._calls.put(None)
        self._thread.join(60)


@pytest.fixture(scope="session")
def chromium(request) -> Iterator[Chromium]:
    """Debian's chromium, launched once for the process (see the module's docstring)."""
    # the test bodies' queries run in the browser's thread, where the loop runs
    os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
    started = Chromium()
    request.config.stash[_CHROMIUM] = started
    try:
        yield started
    finally:
        del request.config.stash[_CHROMIUM]
        started.stop()


@pytest.fixture
def page(chromium: Chromium):
    """A Playwright page in a new context of the process's chromium (tests/browser.py);
    the test's body runs in the browser's thread."""
    from playwright.sync_api import expect

    expect.set_options(timeout=20000)  # the planner page solves three plans before it renders
    made = chromium.new_page(timeout_ms=20000)
    try:
        yield made
    finally:
        chromium.close_page(made)


@pytest.hookimpl(tryfirst=True)
def pytest_pyfunc_call(pyfuncitem: pytest.Function) -> bool | None:
    """Run the body of a test that drives the browser in the browser's thread."""
    if THREAD_FIXTURE not in pyfuncitem.fixturenames:
        return None
    from django.db import connections

    args = {name: pyfuncitem.funcargs[name] for name in pyfuncitem._fixtureinfo.argnames}

    def body() -> None:
        try:
            pyfuncitem.obj(**args)
        finally:
            connections.close_all()  # those the body opened, in the browser's thread

    pyfuncitem.config.stash[_CHROMIUM].run(body)
    return True
