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

from tests import conftest as suite_conftest
from tests.support import require_all

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
# The suite's own hooks (tests/conftest.py installs them from there), as a conftest of the
# throwaway suite; its pytest loads no plugin and no Django (a run of the project's
# configuration spent 4 CPU-seconds setting Django and the plugins up, twice).
HOOKS = (
    "from tests.support.require_all import pytest_make_collect_report, pytest_runtest_makereport"
    "  # noqa: F401\n"
)
# The project's options that decide what the output says: the skips' reasons (-ra).
INI = "[pytest]\naddopts = -ra --strict-markers\n"


def start_suite(folder: Path, require_all: str) -> subprocess.Popen[str]:
    """pytest, in a process of its own, on a throwaway suite in `folder` (a test module
    that skips in every way, a module skipped whole) with the suite's hooks."""
    folder.mkdir()
    (folder / "conftest.py").write_text(HOOKS)
    (folder / "pytest.ini").write_text(INI)
    (folder / "test_skipping.py").write_text(SKIPPING_TESTS)
    (folder / "test_skipped_module.py").write_text(SKIPPED_MODULE)
    return subprocess.Popen(
        [sys.executable, "-m", "pytest", str(folder), "--rootdir", str(folder)]
        + ["-c", str(folder / "pytest.ini"), "-q", "-p", "no:randomly"]
        + ["-p", "no:cacheprovider", "-p", "no:xdist", "--continue-on-collection-errors"],
        cwd=ROOT,
        env={**os.environ, "ALLOT_REQUIRE_ALL": require_all, "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def test_a_skip_fails_the_run_with_require_all_and_only_then(tmp_path):
    # both runs at once: each is mostly the start of a pytest process
    runs = {flag: start_suite(tmp_path / f"require_all_{flag}", flag) for flag in ("1", "0")}
    out = {flag: run.communicate(timeout=300)[0] for flag, run in runs.items()}
    required, plain = out["1"], out["0"]
    # ALLOT_REQUIRE_ALL=1: the skip in the test fails; the skips in a mark, a fixture (the
    # setup) and the module (its collection) are errors; the xfail stays one
    assert runs["1"].returncode == 1, required
    assert "1 failed, 1 passed, 1 xfailed, 3 errors" in required.splitlines()[-1], required
    assert required.count("ALLOT_REQUIRE_ALL=1 makes a skip a failure") >= 4, required
    assert "makes a skip a failure: Skipped: no component" in required
    assert "the component is missing" in required
    # without it, a skip stays a skip
    assert runs["0"].returncode == 0, plain
    assert "1 passed, 4 skipped, 1 xfailed" in plain.splitlines()[-1], plain


def test_the_suite_installs_those_hooks():
    """The hooks checked above are the ones the suite's conftest installs."""
    assert suite_conftest.pytest_runtest_makereport is require_all.pytest_runtest_makereport
    assert suite_conftest.pytest_make_collect_report is require_all.pytest_make_collect_report


def test_ci_sets_it():
    assert "export ALLOT_REQUIRE_ALL=1" in (ROOT / ".ci/run").read_text()
