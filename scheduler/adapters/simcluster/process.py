"""Start and stop a simulated cluster process (used by `make run` and the tests)."""

from __future__ import annotations

import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import IO
from urllib.parse import urlsplit

import httpx

from scheduler.adapters.base import verifies_certificates


class SimClusterProcess:
    """One `python -m scheduler.adapters.simcluster serve` child process.

    Without a `port`, the parent binds a free port and hands the listening socket to
    the child (no race for the port); `restart()` serves the same URL again from the
    same state directory."""

    def __init__(
        self,
        *,
        state_dir: Path,
        host: str = "127.0.0.1",
        port: int | None = None,
        speed: float | None = None,
        log: IO[bytes] | int | None = None,
    ) -> None:
        self.state_dir = Path(state_dir)
        self.host = host
        self.port = port
        self.speed = speed
        self.log = log
        self.popen: subprocess.Popen[bytes] | None = None
        self._socket: socket.socket | None = None

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def start(self, *, wait_s: float = 15.0) -> SimClusterProcess:
        """Start the process and return once it answers `/health`."""
        command = [sys.executable, "-m", "scheduler.adapters.simcluster", "serve"]
        command += ["--state-dir", str(self.state_dir), "--host", self.host]
        pass_fds: tuple[int, ...] = ()
        if self.port is None or self._socket is not None:
            if self._socket is None:
                self._socket = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
                self._socket.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                self._socket.bind((self.host, 0))
                self._socket.listen(128)
                self.port = self._socket.getsockname()[1]
            pass_fds = (self._socket.fileno(),)
            command += ["--fd", str(self._socket.fileno())]
        else:
            command += ["--port", str(self.port)]
        if self.speed is not None:
            command += ["--speed", str(self.speed)]
        self.popen = subprocess.Popen(
            command,
            pass_fds=pass_fds,
            stdout=self.log,
            stderr=subprocess.STDOUT if self.log is not None else None,
            cwd=Path(__file__).resolve().parents[3],
        )
        self.wait_ready(wait_s)
        return self

    def wait_ready(self, wait_s: float) -> None:
        deadline = time.monotonic() + wait_s
        while True:
            if self.popen is not None and self.popen.poll() is not None:
                raise RuntimeError(
                    f"the simulated cluster process exited with {self.popen.returncode} "
                    f"before serving {self.url}"
                )
            if answers(self.url, timeout_s=max(0.05, min(1.0, deadline - time.monotonic()))):
                return
            if time.monotonic() > deadline:
                raise RuntimeError(
                    f"the simulated cluster at {self.url} did not answer in {wait_s} s"
                )
            time.sleep(0.02)

    def stop(self, *, timeout_s: float = 5.0, release_port: bool = True) -> None:
        """Stop the process (SIGTERM, then SIGKILL) and, unless told otherwise, free the port."""
        if self.popen is not None and self.popen.poll() is None:
            self.popen.send_signal(signal.SIGTERM)
            try:
                self.popen.wait(timeout_s)
            except subprocess.TimeoutExpired:
                self.popen.kill()
                self.popen.wait()
        if release_port and self._socket is not None:
            self._socket.close()
            self._socket = None

    def kill(self) -> None:
        """SIGKILL, as a crash would (the state on disk is what was committed)."""
        if self.popen is not None and self.popen.poll() is None:
            self.popen.kill()
            self.popen.wait()

    def restart(self, *, crash: bool = False) -> SimClusterProcess:
        """Stop (or kill) and start again on the same URL and state directory."""
        if crash:
            self.kill()
        else:
            self.stop(release_port=False)
        return self.start()

    def __enter__(self) -> SimClusterProcess:
        return self.start() if self.popen is None else self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def answers(url: str, *, timeout_s: float = 1.0) -> bool:
    """Whether a simulated cluster answers at `url`."""
    try:
        response = httpx.get(
            f"{url.rstrip('/')}/health", timeout=timeout_s, verify=verifies_certificates(url)
        )
    except httpx.HTTPError:
        return False
    return response.status_code == 200 and response.json().get("status") == "ok"


def launch_command(url: str, state_dir: Path) -> list[str]:
    """The command `make run` starts to serve the simulated cluster at `url`."""
    parts = urlsplit(url)
    if parts.scheme != "http" or not parts.hostname:
        raise ValueError(f"ALLOT_SIMCLUSTER_URL must be http://HOST:PORT, got {url!r}")
    return [
        sys.executable,
        "-m",
        "scheduler.adapters.simcluster",
        "serve",
        "--host",
        parts.hostname,
        "--port",
        str(parts.port or 80),
        "--state-dir",
        str(state_dir),
    ]


def is_local(url: str) -> bool:
    """Whether `url` names this machine (so `make run` may start the process itself)."""
    host = urlsplit(url).hostname or ""
    return host in {"127.0.0.1", "localhost", "::1"} or host.startswith("127.")
