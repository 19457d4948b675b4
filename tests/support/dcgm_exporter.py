"""A DCGM-exporter look-alike for a test: serves, at `/metrics`, what `gpus()` returns
(the simulated cluster's `gpu_figures`) in the exporter's format, on a free port, in a
thread. For clusters whose own process does not serve metrics (Slurm)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from scheduler.adapters.simcluster.metrics import CONTENT_TYPE, render


class DcgmExporter:
    def __init__(self, gpus: Callable[[], list]) -> None:
        gpus_now = gpus

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 - the http.server API
                if self.path != "/metrics":
                    self.send_error(404)
                    return
                body = render(gpus_now()).encode()
                self.send_response(200)
                self.send_header("Content-Type", CONTENT_TYPE)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/metrics"

    def __enter__(self) -> DcgmExporter:
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.server.shutdown()
        self.server.server_close()
