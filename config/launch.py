"""`make run`: start the simulated cluster, migrate, seed the demo organisation, then run
the web app and a Celery worker with beat until Ctrl-C. Embedded PostgreSQL and Redis
start when no URLs are set."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time


def main() -> int:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings.dev")
    host = os.environ.get("ALLOT_HOST", "127.0.0.1")
    port = os.environ.get("ALLOT_PORT", "8000")
    embedded_db = not os.environ.get("DATABASE_URL")
    embedded_redis = not os.environ.get("REDIS_URL")

    import django
    from django.core.management import call_command

    django.setup()
    from django.conf import settings

    from scheduler.adapters.simcluster import configured_url

    python = sys.executable
    env = dict(os.environ, REDIS_URL=settings.REDIS_URL)
    children: list[subprocess.Popen] = []
    simcluster = _start_simcluster(env)
    if simcluster is not None:
        children.append(simcluster)
    try:
        print("Allot: preparing the database ...", flush=True)
        call_command("migrate", verbosity=0, interactive=False)
        if settings.ALLOT_DEMO:
            call_command("seed_demo")
        else:
            print("Allot: ALLOT_DEMO=off: no demo organisation, no load", flush=True)
    except BaseException:
        _stop(children)
        raise

    children += [
        subprocess.Popen(
            [
                python,
                "-m",
                "celery",
                "-A",
                "config",
                "worker",
                "-B",
                "--pool=solo",
                "--loglevel=INFO",
                "--schedule",
                str(settings.BASE_DIR / "var" / "celerybeat-schedule"),
            ],
            env=env,
        ),
        subprocess.Popen(
            [python, "manage.py", "runserver", f"{host}:{port}", "--noreload"], env=env
        ),
    ]
    where = "embedded PostgreSQL" if embedded_db else "DATABASE_URL"
    where += ", embedded Redis" if embedded_redis else ", REDIS_URL"
    print(
        f"\nAllot is running at http://{host}:{port}/  ({where}; Ctrl-C stops everything)\n"
        f"  API docs: http://{host}:{port}/api/docs/   admin: http://{host}:{port}/admin/\n"
        f"  simulated cluster: {configured_url()}\n",
        flush=True,
    )
    stopping = False

    def stop(*_):
        nonlocal stopping
        stopping = True

    signal.signal(signal.SIGINT, stop)
    signal.signal(signal.SIGTERM, stop)
    try:
        while not stopping and all(c.poll() is None for c in children):
            time.sleep(0.5)
    finally:
        _stop(children)
        from django.db import connections

        connections.close_all()
        if embedded_db or embedded_redis:
            from config import embedded

            embedded.stop_all()
    failed = [c for c in children if c.returncode not in (0, None, -signal.SIGTERM)]
    return 1 if failed and not stopping else 0


def _start_simcluster(env: dict[str, str]) -> subprocess.Popen | None:
    """Serve the simulated cluster at ALLOT_SIMCLUSTER_URL unless one already answers
    there (or the URL names another machine)."""
    from config import embedded
    from scheduler.adapters.simcluster import configured_url
    from scheduler.adapters.simcluster.process import answers, is_local, launch_command

    url = configured_url()
    if answers(url) or not is_local(url):
        print(f"Allot: using the simulated cluster at {url}", flush=True)
        return None
    state_dir = embedded.var_dir() / "simcluster"
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
