"""The mypyc-compiled engine (scheduler/core/native.py): used only when it matches the source,
and deciding exactly as the interpreted source does."""

from __future__ import annotations

import hashlib
import importlib.machinery
import json
import logging
import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

import scheduler.core.engine
from scheduler.core import native

ROOT = native.ROOT
CAN_COMPILE = (
    shutil.which("cc") is not None and Path(sysconfig.get_paths()["include"], "Python.h").is_file()
)

# plans of the cycle benchmark's three cluster states and the baselines, as a digest
_DIGEST = """
import hashlib, sys
sys.path.insert(0, "bench")
from cycle import make_snapshot
from scheduler.core.engine import EngineState, Policy, plan
out = []
for mode in ("burst", "live", "full"):
    snap = make_snapshot(3, mode=mode, hosts_n=32, pending_n=1500, running_target=200)
    state = EngineState()
    for policy in (Policy(explain_queue=True), Policy(mode="fifo"), Policy(mode="static")):
        out.append(repr(plan(snap, policy, 30 * 86400.0, state)))
        out.append(repr(plan(snap, policy, 30 * 86400.0 + 60, state)))
print(hashlib.sha256("".join(out).encode()).hexdigest())
"""


def _digest(env: dict[str, str]) -> str:
    done = subprocess.run(
        [sys.executable, "-c", _DIGEST],
        cwd=ROOT,
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=600,
        check=True,
    )
    return done.stdout.strip()


@pytest.mark.skipif(not CAN_COMPILE, reason="no C compiler or Python headers: nothing compiled")
@pytest.mark.skipif(
    os.environ.get("ALLOT_NATIVE") == "0", reason="ALLOT_NATIVE=0 asks for the interpreted engine"
)
def test_make_install_built_the_engine_and_this_process_runs_it() -> None:
    assert native.status().startswith("compiled"), native.status()
    assert scheduler.core.engine.__file__ is not None
    assert scheduler.core.engine.__file__.endswith(".so")
    assert scheduler.core.engine.__path__ == [str(ROOT / "scheduler" / "core" / "engine")]


@pytest.mark.skipif(not CAN_COMPILE, reason="no C compiler or Python headers: nothing compiled")
def test_compiled_and_interpreted_engines_make_the_same_plans() -> None:
    compiled, interpreted = _digest({}), _digest({"ALLOT_NATIVE": "0"})
    assert len(compiled) == 64
    assert compiled == interpreted


def _manifest(
    tmp_path: Path,
    source: str,
    sha256: str,
    suffix: str | None = None,
    shared: str = "x__mypyc",
) -> Path:
    """A manifest of one module `x` compiled from `source` (recorded digest `sha256`)
    and a shared library `shared`, both an empty file."""
    ext = tmp_path / "lib" / "m.so"
    ext.parent.mkdir(parents=True)
    ext.write_bytes(b"")
    manifest = tmp_path / "manifest.json"
    manifest.write_text(
        json.dumps(
            {
                "extension_suffix": suffix or importlib.machinery.EXTENSION_SUFFIXES[0],
                "shared_library": {"module": shared, "extension": "lib/m.so"},
                "modules": {"x": {"source": source, "extension": "lib/m.so", "sha256": sha256}},
            }
        )
    )
    return manifest


def _digest_of(source: str) -> str:
    return hashlib.sha256((ROOT / source).read_bytes()).hexdigest()


def test_an_edited_source_makes_the_whole_group_fall_back(tmp_path: Path) -> None:
    source = "scheduler/core/engine/types.py"
    ok = native._valid_build(_manifest(tmp_path / "a", source, _digest_of(source)))
    assert isinstance(ok, native._Build) and set(ok.extensions) == {"x", "x__mypyc"}
    stale = native._valid_build(_manifest(tmp_path / "b", source, "0" * 64))
    assert stale == f"stale: {source} changed since the build (make install)"


def test_no_build_another_interpreter_or_opting_out_means_interpreted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert native._valid_build(tmp_path / "none.json").startswith("not built")  # type: ignore[union-attr]
    other = _manifest(tmp_path, "scheduler/core/engine/types.py", "", suffix=".cpython-39-x.so")
    assert "this interpreter loads" in native._valid_build(other)  # type: ignore[operator]
    older = tmp_path / "older.json"  # a manifest of another shape reads as unreadable
    suffix = importlib.machinery.EXTENSION_SUFFIXES[0]
    older.write_text(json.dumps({"extension_suffix": suffix, "shared_library": "y__mypyc"}))
    assert native._valid_build(older).startswith("unreadable manifest")  # type: ignore[union-attr]
    monkeypatch.setattr(native, "_status", native.status())  # restored afterwards
    monkeypatch.setenv("ALLOT_NATIVE", "0")
    assert native.install(other) is False
    assert native.status() == "interpreted: ALLOT_NATIVE=0"


def test_a_build_that_does_not_load_leaves_the_source_in_use(tmp_path: Path) -> None:
    """A manifest that matches the source but whose shared library is not a loadable
    file (here an empty one): `install` says so and the engine imports from source."""
    source = "scheduler/core/engine/types.py"
    manifest = _manifest(tmp_path, source, _digest_of(source), shared="allot_test_broken__mypyc")
    check = (
        "import os, sys; from pathlib import Path; import scheduler.core.native as n; "
        "os.environ['ALLOT_NATIVE'] = '1'; "
        f"print(n.install(Path({str(manifest)!r}))); print(n.status()); "
        "import scheduler.core.engine.types as t; print(t.__file__)"
    )
    done = subprocess.run(
        [sys.executable, "-c", check],
        cwd=ROOT,
        env={**os.environ, "ALLOT_NATIVE": "0"},  # nothing installed when scheduler loads
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    installed, why, engine_file = done.stdout.strip().splitlines()
    assert installed == "False"
    assert why.startswith(f"interpreted: the build in {tmp_path} does not load")
    assert engine_file.endswith("scheduler/core/engine/types.py")


# The recordings the interpreted engine replays. The compiled engine (the suite's own
# process, test_plan_hash) replays all six and stays the full check. "fairshare" is left
# out here: it is the short-job reserve sized automatically over a hard usage window,
# and each of those two is replayed by one of the two fair-share recordings kept
# ("fairshare-decay": the automatic reserve over decayed usage; "fairshare-reserve-off":
# the hard window without the automatic reserve), so every path it runs is still run
# interpreted; it is a quarter of this test's time. The baseline modes are cheap.
# test_compiled_and_interpreted_engines_make_the_same_plans compares both engines
# directly on three more cluster states.
INTERPRETED_RECORDINGS = (
    "fairshare-decay",
    "fairshare-reserve-off",
    "fifo",
    "priority",
    "static",
)


def test_the_interpreted_engine_matches_the_plan_hash_recording_too() -> None:
    """The suite's own process runs the compiled engine where it is built; the recording
    of every cycle's plan over whole simulator runs (test_plan_hash) must hold for the
    source as well (INTERPRETED_RECORDINGS: every path the recordings run)."""
    names = " ".join(INTERPRETED_RECORDINGS)
    check = (
        "from tests.core.engine.test_plan_hash import EXPECTED, _run; import scheduler.core.native as n; "
        "print(n.status()); "
        f"print(*(n for n in {names!r}.split() if _run(n).digest.hexdigest() != EXPECTED[n]))"
    )
    done = subprocess.run(
        [sys.executable, "-c", check],
        cwd=ROOT,
        env={**os.environ, "ALLOT_NATIVE": "0"},
        capture_output=True,
        text=True,
        timeout=600,
        check=True,
    )
    which, mismatched = (done.stdout.splitlines() + [""])[:2]
    assert which == "interpreted: ALLOT_NATIVE=0"
    assert mismatched == "", f"interpreted plans differ from the recording: {mismatched}"


@pytest.mark.parametrize(
    ("case", "level", "status"),
    [
        ("stale", "WARNING", "interpreted: stale: scheduler/core/engine/types.py changed since"),
        ("not built", "DEBUG", "interpreted: not built"),
        ("opted out", "DEBUG", "interpreted: ALLOT_NATIVE=0"),
    ],
)
def test_an_unused_build_is_logged_as_a_warning(
    case: str,
    level: str,
    status: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """What `install` found decides the level: a build that exists but is not used is
    a warning (the service runs at half speed), anything else a debug line."""
    monkeypatch.setattr(native, "_status", native.status())  # both restored afterwards
    monkeypatch.setattr(native, "_build_unused", native._build_unused)
    # this process has the real build installed: let `install` look again
    monkeypatch.setattr(
        sys, "meta_path", [f for f in sys.meta_path if not isinstance(f, native._NativeFinder)]
    )
    manifest = _manifest(tmp_path, "scheduler/core/engine/types.py", "0" * 64)
    if case == "not built":
        manifest = tmp_path / "none.json"
    monkeypatch.setenv("ALLOT_NATIVE", "0" if case == "opted out" else "1")
    assert native.install(manifest) is False
    with caplog.at_level(logging.DEBUG, logger="allot.test"):
        native.log_status(logging.getLogger("allot.test"))
    [(logged_level, message)] = [(r.levelname, r.getMessage()) for r in caplog.records]
    assert logged_level == level
    assert message.startswith(f"engine {status}")
