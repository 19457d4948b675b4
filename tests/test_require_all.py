"""`.ci/run` fails when any test is skipped (issue 31, point 5): with ALLOT_REQUIRE_ALL=1
the hooks of `tests/conftest.py` turn every skip (in a test, a `skipif` mark, a fixture,
a whole module) into a failure that keeps its reason, and leave an expected failure
alone; without it a skip stays a skip. Checked on a throwaway suite run in a pytest
process of its own, so the real suite's outcome is untouched."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

SKIPPING_TESTS = """
import pytest


@pytest.fixture
def component():
    pytest.skip("the component is missing")


def test_skips_in_the_test():
    pytest.skip("the component is missing")


@pytest.mark.skipif(True, reason="the component is missing")
def test_marked():
    pass


def test_skips_in_a_fixture(component):
    pass


@pytest.mark.xfail(reason="a known failure", strict=True)
def test_expected_failure():
    assert False


def test_passes():
    pass
"""
SKIPPED_MODULE = 'import pytest\n\npytest.skip("no component", allow_module_level=True)\n'
# The suite's own hooks, as a conftest of the throwaway suite.
HOOKS = (
    "from tests.conftest import pytest_make_collect_report, pytest_runtest_makereport"
    "  # noqa: F401\n"
)


def run_suite(tmp_path: Path, module: str, require_all: str) -> subprocess.CompletedProcess[str]:
    """pytest on a suite of one test module, `module`'s text, with the suite's hooks."""
    (tmp_path / "conftest.py").write_text(HOOKS)
    (tmp_path / "test_throwaway.py").write_text(module)
    env = {**os.environ, "ALLOT_REQUIRE_ALL": require_all}
    return subprocess.run(
        [sys.executable, "-m", "pytest", str(tmp_path), "--rootdir", str(tmp_path)]
        + ["-c", str(ROOT / "pyproject.toml"), "-q", "-p", "no:randomly"]
        + ["-p", "no:cacheprovider", "-p", "no:xdist"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_with_require_all_every_skip_fails_the_run(tmp_path):
    result = run_suite(tmp_path, SKIPPING_TESTS, "1")
    summary = result.stdout.strip().splitlines()[-1]
    assert result.returncode == 1, result.stdout + result.stderr
    # the skip in the test: failed; in a mark or a fixture (the setup): errors
    assert "1 failed, 1 passed, 1 xfailed, 2 errors" in summary, result.stdout
    assert result.stdout.count("ALLOT_REQUIRE_ALL=1 makes a skip a failure") >= 3
    assert "the component is missing" in result.stdout


def test_with_require_all_a_skipped_module_fails_the_run(tmp_path):
    result = run_suite(tmp_path, SKIPPED_MODULE, "1")
    assert result.returncode != 0, result.stdout + result.stderr
    assert "ALLOT_REQUIRE_ALL=1 makes a skip a failure: Skipped: no component" in result.stdout


def test_without_it_a_skip_stays_a_skip(tmp_path):
    result = run_suite(tmp_path, SKIPPING_TESTS, "0")
    summary = result.stdout.strip().splitlines()[-1]
    assert result.returncode == 0, result.stdout + result.stderr
    assert "1 passed, 3 skipped, 1 xfailed" in summary, result.stdout
    result = run_suite(tmp_path, SKIPPED_MODULE, "0")
    # 5: no test ran (pytest's code for "nothing collected"), not 1 (a failure)
    assert result.returncode == 5, result.stdout + result.stderr
    assert "1 skipped" in result.stdout.strip().splitlines()[-1], result.stdout


def test_ci_sets_it():
    assert "export ALLOT_REQUIRE_ALL=1" in (ROOT / ".ci/run").read_text()
