"""`make run`: start the simulated cluster, migrate, seed the demo organisation, then run
the web app, two Celery workers (the cycles' queue, and the "background" queue of
previews and ETA refreshes, so that a preview never holds up a cycle) and Celery beat
until Ctrl-C. Embedded PostgreSQL and Redis start when no URLs are set.

Every child is watched: when the web server, a worker, beat or the simulated cluster
exits on its own, the others are stopped and `make run` exits with status 1 naming it
(and its exit status), instead of serving pages while nothing schedules. State (the
embedded servers', beat's schedule, the simulated cluster's) lives under ALLOT_VAR_DIR.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass

from config import embedded as servers
from scheduler.adapters.simcluster import configured_url
from scheduler.adapters.simcluster.process import answers, is_local, launch_command


@dataclass
class Child:
    """A process `make run` started and watches, by the name it reports."""

    name: str
    popen: subprocess.Popen

    @property
    def exited(self) -> bool:
        return self.popen.poll() is not None


def main() -> int:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings.dev")
    host = os.environ.get("ALLOT_HOST", "127.0.0.1")
    port = os.environ.get("ALLOT_PORT", "8000")
    embedded_db = not os.environ.get("DATABASE_URL")
    embedded_redis = not os.environ.get("REDIS_URL")

    import django
    from django.core.management import call_command
    from django.db import OperationalError

    django.setup()
    from django.conf import settings

    env = dict(os.environ, REDIS_URL=settings.REDIS_URL)
    settings.VAR_DIR.mkdir(parents=True, exist_ok=True)
    children: list[Child] = []
    simcluster = _start_simcluster(env)
    if simcluster is not None:
        children.append(Child("the simulated cluster", simcluster))
    try:
        print("Allot: preparing the database ...", flush=True)
        call_command("migrate", verbosity=0, interactive=False)
        if settings.ALLOT_DEMO:
            call_command("seed_demo")
        else:
            print("Allot: ALLOT_DEMO=off: no demo organisation, no load", flush=True)
    except OperationalError as exc:
        _stop([c.popen for c in children])
        source = "embedded PostgreSQL" if embedded_db else "DATABASE_URL"
        raise SystemExit(
            f"Allot: cannot use the database ({source}): {exc}".rstrip()
            + "\nCreate it (createdb NAME) or unset DATABASE_URL for the embedded one."
        ) from None
    except BaseException:
        _stop([c.popen for c in children])
        raise

    python = sys.executable
    celery = [python, "-m", "celery", "-A", "config"]
    children += [
        Child("the Celery worker", subprocess.Popen(_worker(celery, "celery", port), env=env)),
        Child(
            "the background worker",
            subprocess.Popen(_worker(celery, settings.BACKGROUND_QUEUE, port), env=env),
        ),
        Child("Celery beat", subprocess.Popen([*celery, "beat"], env=env)),
        Child(
            "the web server",
            subprocess.Popen(
                [python, "manage.py", "runserver", f"{host}:{port}", "--noreload"], env=env
            ),
        ),
    ]
    where = "embedded PostgreSQL" if embedded_db else "DATABASE_URL"
    where += ", embedded Redis" if embedded_redis else ", REDIS_URL"
    print(
        f"\nAllot is running at http://{host}:{port}/  ({where}; Ctrl-C stops everything)\n"
        f"  API docs: http://{host}:{port}/api/docs/   admin: http://{host}:{port}/admin/\n"
        f"  simulated cluster: {configured_url()}   state: {settings.VAR_DIR}\n",
        flush=True,
    )
    return _watch(children, embedded=embedded_db or embedded_redis)


def _worker(celery: list[str], queue: str, port: str) -> list[str]:
    """A solo worker consuming `queue` only: "celery" (cycles, short tasks) or
    "background" (previews, ETA refreshes, ...), so a long task never delays a cycle."""
    name = "run" if queue == "celery" else queue
    return [*celery, "worker", "--pool=solo", "-Q", queue, "-n", f"{name}-{port}@%h"]


def _watch(children: list[Child], *, embedded: bool) -> int:
    """Wait for Ctrl-C/SIGTERM (0) or the first child that exits on its own (1, named)."""
    stopping = False

    def stop(*_):
        nonlocal stopping
        stopping = True

    signal.signal(signal.SIGINT, stop)
    signal.signal(signal.SIGTERM, stop)
    died: Child | None = None
    try:
        while not stopping and died is None:
            died = next((c for c in children if c.exited), None)
            if died is None:
                time.sleep(0.5)
    finally:
        _stop([c.popen for c in children])
        from django.db import connections

        connections.close_all()
        if embedded:
            servers.stop_all()
    if died is not None:
        print(
            f"\nAllot: {died.name} exited (status {died.popen.returncode}); stopped the "
            "other processes. Its messages are above.",
            file=sys.stderr,
            flush=True,
        )
        return 1
    return 0


def _start_simcluster(env: dict[str, str]) -> subprocess.Popen | None:
    """Serve the simulated cluster at ALLOT_SIMCLUSTER_URL unless one already answers
    there (or the URL names another machine)."""
    from django.conf import settings

    url = configured_url()
    if answers(url) or not is_local(url):
        print(f"Allot: using the simulated cluster at {url}", flush=True)
        return None
    state_dir = settings.VAR_DIR / "simcluster"
    child = subprocess.Popen(launch_command(url, state_dir), env=env)
    deadline = time.monotonic() + 20
    while not answers(url, timeout_s=0.5):
        if child.poll() is not None or time.monotonic() > deadline:
            _stop([child])
            raise SystemExit(f"Allot: the simulated cluster did not start at {url}")
        time.sleep(0.1)
    print(f"Allot: simulated cluster at {url} (state in {state_dir})", flush=True)
    return child


def _stop(children: list[subprocess.Popen]) -> None:
    for child in children:
        if child.poll() is None:
            child.terminate()
    for child in children:
        try:
            child.wait(timeout=15)
        except subprocess.TimeoutExpired:
            child.kill()


if __name__ == "__main__":
    sys.exit(main())
