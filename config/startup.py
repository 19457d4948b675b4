"""A process's start without the cyclic garbage collector.

Django's set-up (settings, the apps, their models and ready()) makes ~130,000 objects that
live as long as the process, and the collector walks them again and again while they are
made: ~300 collections of the young generations and two full ones, ~0.25 CPU-s of the ~2
of a process's start (the suite starts hundreds of processes: servers, workers, commands).

The entry points that set Django up next pause the collector first (`pause`): manage.py,
config/wsgi.py (a web worker), config/asgi.py, and a Celery worker's or beat's loader as
it imports the tasks modules (config/celery.py), which is when Celery sets Django up.
(The Celery app's import itself pauses nothing: the launcher and gunicorn's master import
it too, and they never set Django up.) The last app's ready() (dashboards/apps.py) moves
what the set-up made into the collector's permanent generation and starts it again
(`resume`), as the Python documentation advises for a process that forks workers, and as
a web worker does once more after its URL conf (config/gunicorn.py): later collections
walk what requests, tasks and commands make, not the whole application again.

A process whose apps are loaded already (the tests, which set Django up themselves)
keeps its collector as it is; nothing else in the product turns the collector off.
"""

from __future__ import annotations

import gc

from django.apps import apps


def pause() -> None:
    """Stop the cyclic collector until the apps are ready (before Django's set-up)."""
    if not apps.ready and gc.isenabled():
        gc.disable()


def resume() -> None:
    """After the set-up: freeze what it made and start the collector again, if `pause`
    stopped it."""
    if not gc.isenabled():
        gc.freeze()
        gc.enable()
