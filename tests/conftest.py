"""Shared fixtures. Django tests run against PostgreSQL (DATABASE_URL or the embedded one)."""

import os

import pytest

from tests.browser import CHROMIUM, LAUNCH_ARGS


@pytest.fixture
def api_client():
    from rest_framework.test import APIClient

    return APIClient()


@pytest.fixture
def page():
    """A Playwright page in Debian's chromium (see tests/browser.py)."""
    os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
    from playwright.sync_api import expect, sync_playwright

    expect.set_options(timeout=20000)  # the planner page solves three plans before it renders

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=LAUNCH_ARGS)
        page = browser.new_page()
        page.set_default_timeout(20000)
        yield page
        browser.close()
