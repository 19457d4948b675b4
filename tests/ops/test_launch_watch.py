"""`make run`'s watch loop (config/launch.py `_watch`) with stand-in children: the first
child to exit makes it stop the others and return 1, naming that child. Two of the names
are also killed under a real `make run` (test_make_run.py)."""

from __future__ import annotations

import signal
import subprocess

import pytest

from config import launch

# the names `make run` gives its five children (config/launch.py)
NAMES = [
    "the web server",
    "the Celery worker",
    "the background worker",
    "Celery beat",
    "the simulated cluster",
]


@pytest.mark.parametrize("dies", NAMES)
def test_the_watch_stops_every_child_and_names_the_one_that_died(dies, capsys, monkeypatch):
    monkeypatch.setattr(signal, "signal", lambda *_: None)  # keep pytest's own handlers
    children = [
        launch.Child(name, subprocess.Popen(["sleep", "0.3" if name == dies else "60"]))
        for name in NAMES
    ]
    assert launch._watch(children, embedded=False) == 1
    assert f"Allot: {dies} exited (status 0)" in capsys.readouterr().err
    assert all(child.popen.poll() is not None for child in children)


def test_ctrl_c_stops_every_child_and_exits_zero(monkeypatch):
    handlers = {}
    monkeypatch.setattr(
        signal, "signal", lambda signum, handler: handlers.update({signum: handler})
    )
    children = [launch.Child(name, subprocess.Popen(["sleep", "60"])) for name in NAMES]
    monkeypatch.setattr(launch.time, "sleep", lambda _s: handlers[signal.SIGINT]())
    assert launch._watch(children, embedded=False) == 0
    assert all(child.popen.poll() is not None for child in children)
