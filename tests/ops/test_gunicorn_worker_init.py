"""config/gunicorn.py's `post_worker_init`: a web worker imports the URLconf before its
first request and freezes what it holds then, as gunicorn itself calls the hook. Before
it, the worker set Django up with the cyclic collector paused, and the collector runs
again with what the set-up made frozen (config/startup.py).

What a process imports at start leaves out the modules only some requests need, each
loaded by the code that needs it when it runs (`LATER`): OR-Tools (and the pandas it
loads, 0.6 of the 2.5 CPU-s of a web process's start) at the planner's first full-mode
solve, numpy at its first plan (scheduler/core/planner/plan.py), httpx when an adapter
is made or a metric read (scheduler/adapters/simulated.py). The same holds once the
Celery app has imported its tasks modules, as a worker does at start."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

LATER = ("ortools", "pandas", "numpy", "httpx")

# gunicorn's Config reads the file and hands the hook to the worker, which calls it after
# loading the application (django.setup() done): here the same, in a fresh process.
SCRIPT = """
import gc, sys, types
from gunicorn.config import Config
namespace = {"__file__": "config/gunicorn.py"}
exec(compile(open("config/gunicorn.py").read(), "gunicorn.py", "exec"), namespace)
cfg = Config()
cfg.set("post_worker_init", namespace["post_worker_init"])
from config.wsgi import application  # what the worker loads first
assert "config.urls" not in sys.modules
set_up = gc.get_freeze_count()
print(gc.isenabled(), set_up > 100_000)
# a worker after the first (the first also checks the database: test_fails_loudly.py)
cfg.post_worker_init(types.SimpleNamespace(allot_slot=1))
print("config.urls" in sys.modules, "scheduler.api.views" in sys.modules, gc.get_freeze_count() > set_up + 1000)
from config import startup
startup.pause()  # the apps are ready: a no-op
print(gc.isenabled())
print("later:", *sorted(name for name in LATER if name in sys.modules))
from config.celery import app
app.loader.import_default_modules()  # a Celery worker's tasks modules
print("scheduler.tasks" in sys.modules, "scheduler.adapters.simulated" in sys.modules)
print("later:", *sorted(name for name in LATER if name in sys.modules))
"""


def test_a_worker_imports_the_urlconf_and_freezes_the_heap_before_its_first_request():
    done = subprocess.run(
        [sys.executable, "-c", f"LATER = {LATER!r}\n" + SCRIPT],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    set_up, worker, paused_late, web_later, tasks, worker_later = done.stdout.splitlines()
    assert set_up.split() == ["True", "True"]  # the collector runs, the set-up frozen
    assert worker.split() == ["True", "True", "True"]
    assert paused_late == "True"
    assert web_later == "later:"  # none of LATER
    assert tasks.split() == ["True", "True"]
    assert worker_later == "later:"
