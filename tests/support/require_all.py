"""ALLOT_REQUIRE_ALL=1 (set by .ci/run): every component is installed, so a skip is a
failure. The hooks that make it one, installed by tests/conftest.py; kept free of Django
and of the suite's fixtures, so tests/test_require_all.py runs them in a bare pytest."""

from __future__ import annotations

import os

import pytest

REQUIRE_ALL = os.environ.get("ALLOT_REQUIRE_ALL", "") not in ("", "0")


def _require_all(report) -> None:
    """Turn a skip (not an expected failure) into a failure that keeps its reason."""
    if REQUIRE_ALL and report.skipped and not hasattr(report, "wasxfail"):
        reason = report.longrepr[-1] if isinstance(report.longrepr, tuple) else report.longrepr
        report.outcome = "failed"
        report.longrepr = f"skipped, but ALLOT_REQUIRE_ALL=1 makes a skip a failure: {reason}"


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    _require_all(outcome.get_result())


@pytest.hookimpl(hookwrapper=True)
def pytest_make_collect_report(collector):
    outcome = yield
    _require_all(outcome.get_result())
