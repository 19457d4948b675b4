"""A TCP relay a test can take down and bring back (`Outage`), and a port nothing
listens on (`closed_port`): a database or a broker restarting, as the processes the
tests start see it (tests/ops/test_worker_database.py, tests/ops/test_fails_loudly.py)."""

from __future__ import annotations

import contextlib
import socket
import threading


def closed_port() -> int:
    """A port of 127.0.0.1 nothing listens on (bound by the system, then released)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class Outage:
    """A TCP relay to `host`:`port` (PostgreSQL) that the test can take down
    (connections refused and the open ones cut) and bring back on the same port: a
    database restart as a worker or beat sees it."""

    def __init__(self, host: str, port: int) -> None:
        self.target = (host, port)
        self.port = closed_port()
        self._open: list[socket.socket] = []
        self._listener: socket.socket | None = None
        self.up()

    def up(self) -> None:
        listener = socket.socket()
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", self.port))
        listener.listen()
        self._listener = listener
        threading.Thread(target=self._accept, args=(listener,), daemon=True).start()

    def down(self) -> None:
        assert self._listener is not None
        with contextlib.suppress(OSError):  # wakes the accept() in progress (Linux)
            self._listener.shutdown(socket.SHUT_RDWR)
        self._listener.close()
        self._listener = None
        for sock in self._open:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            sock.close()
        self._open.clear()

    def _accept(self, listener: socket.socket) -> None:
        while True:
            try:
                client, _ = listener.accept()
            except OSError:
                return
            if listener is not self._listener:  # taken down meanwhile
                client.close()
                return
            server = socket.create_connection(self.target)
            self._open += [client, server]
            for source, sink in ((client, server), (server, client)):
                threading.Thread(target=_pump, args=(source, sink), daemon=True).start()


def _pump(source: socket.socket, sink: socket.socket) -> None:
    try:
        while data := source.recv(65536):
            sink.sendall(data)
    except OSError:
        pass
    finally:
        for sock in (source, sink):
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
