"""Set-up shared by the bench scripts that run Allot as a real server.

- `fresh_database`: an empty database `<name>_<suffix>` (or a copy of another) next to
  DATABASE_URL for the block, dropped afterwards; `test_database`: Django's test database, likewise, for
  the scripts that run Django in their own process.
- `production_env` and `manage`: the environment of the production settings, and
  `manage.py` commands run in it (`migrate`, a setup script with `shell -c`, ...).
- `start_gunicorn` / `stop_gunicorn`, or `with gunicorn(...)`: gunicorn (`config.wsgi
  -c config/gunicorn.py`) with its output in a log file, waited for until `/healthz/web`
  answers.
- `member_token`: (in-process Django) a user who is the only member of one project,
  and their API token; `post_job`: one `POST /api/v1/jobs/`.
- `worker_cpu_s`: the CPU seconds gunicorn's workers used so far.
"""

from __future__ import annotations

import http.client
import json
import os
import secrets
import subprocess
import sys
import time
import urllib.request
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

ROOT = Path(__file__).resolve().parents[1]
PYTHON = sys.executable


def admin_sql(url: str, sql: str) -> None:
    """One statement outside a transaction (CREATE/DROP DATABASE)."""
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(sql)


@contextmanager
def fresh_database(suffix: str, keep: bool = False, template: str | None = None) -> Iterator[str]:
    """An empty database `<name>_<suffix>` on DATABASE_URL's server for the block (a copy
    of the database at the URL `template`, if given: nothing may be connected to it); its
    URL. Dropped (with its connections) afterwards unless `keep`."""
    if not os.environ.get("DATABASE_URL"):
        sys.exit(f"Set DATABASE_URL (the {suffix} database is created next to it).")
    parts = urlsplit(os.environ["DATABASE_URL"])
    name = f"{parts.path.lstrip('/')}_{suffix}"
    admin = urlunsplit(parts._replace(path="/postgres"))
    drop = f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'
    admin_sql(admin, drop)
    copied = f' TEMPLATE "{urlsplit(template).path.lstrip("/")}"' if template else ""
    admin_sql(admin, f'CREATE DATABASE "{name}"{copied}')
    try:
        yield urlunsplit(parts._replace(path=f"/{name}"))
    finally:
        if not keep:
            admin_sql(admin, drop)


@contextmanager
def test_database(suffix: str) -> Iterator[None]:
    """Django's test database, named `test_<name>_<suffix>`, created and migrated for the
    block and destroyed afterwards (call django.setup() first)."""
    from django.conf import settings
    from django.db import connections
    from django.test.utils import setup_databases, teardown_databases

    db = settings.DATABASES["default"]
    db["TEST"]["NAME"] = f"test_{db['NAME']}_{suffix}"
    config = setup_databases(verbosity=0, interactive=False)
    try:
        yield
    finally:
        connections.close_all()
        teardown_databases(config, verbosity=0)


def production_env(
    database_url: str,
    *,
    port: int,
    var_dir: Path,
    workers: int | None = None,
    redis_url: str | None = None,
    **extra: str,
) -> dict[str, str]:
    """os.environ with the production settings on `database_url`, gunicorn on
    127.0.0.1:`port` with `workers` workers (default 2 x CPUs + 1), and `extra`.
    Redis: `redis_url` (for broker and results too), else REDIS_URL must be set."""
    env = dict(
        os.environ,
        DATABASE_URL=database_url,
        DJANGO_SETTINGS_MODULE="config.settings.production",
        SECRET_KEY=secrets.token_urlsafe(50),
        ALLOWED_HOSTS="127.0.0.1,localhost",
        ALLOT_SSL_REDIRECT="false",
        ALLOT_PORT=str(port),
        WEB_CONCURRENCY=str(workers or 2 * os.cpu_count() + 1),
        ALLOT_VAR_DIR=str(var_dir),
        PYTHONUNBUFFERED="1",
        **extra,
    )
    if redis_url:
        env.update(
            REDIS_URL=redis_url, CELERY_BROKER_URL=redis_url, CELERY_RESULT_BACKEND=redis_url
        )
    elif not env.get("REDIS_URL"):
        sys.exit("Set REDIS_URL (the server needs it).")
    return env


def manage(env: dict[str, str], *args: str) -> str:
    """`manage.py <args>` in `env`; its stdout. Exits with its stderr if it fails.
    A setup script: `manage(env, "shell", "-c", CODE)`, which prints what it returns."""
    done = subprocess.run(
        [PYTHON, "manage.py", *args], cwd=ROOT, env=env, capture_output=True, text=True
    )
    if done.returncode:
        sys.exit(f"manage.py {args[0]} failed:\n{done.stderr}")
    return done.stdout


def start_gunicorn(env: dict[str, str], log_path: Path, wait_s: float = 60) -> subprocess.Popen:
    """gunicorn with the settings of `env`, stdout and stderr to `log_path`; returns once
    `/healthz/web` answers (raises if it does not within `wait_s`)."""
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with log_path.open("wb") as log:
        server = subprocess.Popen(
            [str(Path(PYTHON).parent / "gunicorn"), "config.wsgi", "-c", "config/gunicorn.py"],
            cwd=ROOT,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline and server.poll() is None:
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{env['ALLOT_PORT']}/healthz/web", timeout=2)
            return server
        except OSError:
            time.sleep(0.25)
    stop_gunicorn(server)
    raise RuntimeError(f"gunicorn did not answer; see {log_path}")


def stop_gunicorn(server: subprocess.Popen) -> None:
    server.terminate()
    server.wait(30)


@contextmanager
def gunicorn(env: dict[str, str], log_path: Path) -> Iterator[subprocess.Popen]:
    """start_gunicorn for the block, stop_gunicorn after it."""
    server = start_gunicorn(env, log_path)
    try:
        yield server
    finally:
        stop_gunicorn(server)


def member_token(program: str, project: str, username: str = "bench") -> str:
    """(In-process Django.) The tree org/`program`/`project` with a new user `username`
    as the project's only member; that user's API token."""
    from django.contrib.auth import get_user_model

    from accounts.services import token_create
    from budgets.services import budget_tree_import

    user = get_user_model().objects.create_user(username, password="bench-password-1")
    leaf = {"name": project, "weight": 1, "members": [username]}
    budget_tree_import(
        data={"name": "org", "children": [{"name": program, "weight": 1, "children": [leaf]}]}
    )
    return token_create(user=user, name="bench")[1]


def post_job(
    port: int, token: str, body: dict, timeout: float = 60, idempotency_key: bool = True
) -> tuple[int, bytes]:
    """`POST /api/v1/jobs/` on 127.0.0.1:`port` (a fresh Idempotency-Key unless told
    not to); (status, body). Connection failures raise OSError."""
    headers = {"Authorization": f"Token {token}", "Content-Type": "application/json"}
    if idempotency_key:
        headers["Idempotency-Key"] = str(uuid.uuid4())
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        conn.request("POST", "/api/v1/jobs/", body=json.dumps(body), headers=headers)
        response = conn.getresponse()
        return response.status, response.read()
    finally:
        conn.close()


def worker_cpu_s(master_pid: int) -> float:
    """User + system CPU seconds of the gunicorn master's worker processes (read from
    /proc, so the load generator's own share does not count)."""
    ticks = os.sysconf("SC_CLK_TCK")
    total = 0
    children = Path(f"/proc/{master_pid}/task/{master_pid}/children").read_text().split()
    for pid in children:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        total += int(fields[11]) + int(fields[12])  # utime, stime
    return total / ticks
