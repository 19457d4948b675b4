"""The bytecode the xdist controller writes before its workers start
(tests/support/bytecode.py) is what pytest's import hook reads: the module's
assertion-rewritten code, in the file the hook looks for."""

from __future__ import annotations

from pathlib import Path

from _pytest.assertion import rewrite

from tests.support.bytecode import _sources, _write, rewritten_pyc


def test_a_test_module_gets_the_rewritten_code_pytest_reads(pytestconfig):
    path = Path(__file__)  # this module, already imported: its cached code can go
    pyc = rewritten_pyc(path)
    pyc.unlink(missing_ok=True)
    _write(pytestconfig, [path])
    code = rewrite._read_pyc(path, pyc)
    assert code is not None and code.co_filename == str(path)
    # rewritten: the module's code imports pytest's assertion helpers
    assert "@pytest_ar" in code.co_names


def test_the_sources_are_the_folders_python_files_only():
    sources = _sources("tests")
    assert Path(__file__) in sources
    assert all(p.suffix == ".py" and "__pycache__" not in p.parts for p in sources)
