"""A real Prometheus server for the utilization tests (Debian's `prometheus`,
`make prometheus`): its own free port and temporary directory, scraping the targets it
is given every second."""

from __future__ import annotations

import shutil
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

import httpx

from tests.support.ports import free_port

PROMETHEUS = shutil.which("prometheus") or (
    "/usr/bin/prometheus" if Path("/usr/bin/prometheus").exists() else None
)
MISSING_REASON = "prometheus is not installed (make prometheus, or apt-get install prometheus)"
SCRAPE_S = 1.0


@dataclass
class PrometheusServer:
    directory: Path
    port: int = 0
    process: subprocess.Popen | None = None
    # One client for every query (plain HTTP: no certificate store): `httpx.get` made a
    # client each call, whose certificate store cost ~30 ms of CPU a query (the tests
    # poll every 20 ms).
    client: httpx.Client = field(default_factory=lambda: httpx.Client(verify=False))

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def query(self, query: str) -> list[dict]:
        """The result of the instant `query` now (`/api/v1/query`)."""
        answer = self.client.get(f"{self.url}/api/v1/query", params={"query": query}, timeout=5.0)
        return answer.json()["data"]["result"]

    def start(self, targets: dict[str, str]) -> PrometheusServer:
        """Scrape every `targets` URL (job name -> metrics page URL) each second."""
        self.port = self.port or free_port()
        if self.client.is_closed:  # started again after a stop
            self.client = httpx.Client(verify=False)
        jobs = []
        for name, target in targets.items():
            parts = urlsplit(target)
            jobs.append(
                f"  - job_name: {name}\n    metrics_path: {parts.path}\n"
                f"    static_configs:\n      - targets: ['{parts.netloc}']\n"
            )
        config = self.directory / "prometheus.yml"
        config.write_text(
            f"global:\n  scrape_interval: {SCRAPE_S:g}s\n  evaluation_interval: 1s\n"
            "scrape_configs:\n" + "".join(jobs)
        )
        log = open(self.directory / "prometheus.log", "wb")  # noqa: SIM115 - the process owns it
        assert PROMETHEUS is not None
        self.process = subprocess.Popen(
            [
                PROMETHEUS,
                f"--config.file={config}",
                f"--storage.tsdb.path={self.directory / 'data'}",
                f"--web.listen-address=127.0.0.1:{self.port}",
                "--web.enable-lifecycle",
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        log.close()
        self._wait_ready()
        return self

    def _wait_ready(self, timeout_s: float = 30.0) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            assert self.process is not None and self.process.poll() is None, (
                self.directory / "prometheus.log"
            ).read_text()[-2000:]
            try:
                if self.client.get(f"{self.url}/-/ready", timeout=1.0).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.1)
        raise AssertionError("prometheus did not become ready")

    def scraped_after(self, at_s: float) -> bool:
        """Whether Prometheus holds a scrape of the GPU metrics from after `at_s` (epoch
        seconds) for every series it has (and it has one)."""
        answer = self.query("timestamp(DCGM_FI_DEV_GPU_UTIL)")
        return bool(answer) and min(float(r["value"][1]) for r in answer) > at_s

    def series_count(self, query: str) -> int:
        """How many values Prometheus holds for `query` (an instant vector) now."""
        return len(self.query(query))

    def stop(self) -> None:
        """Stop the server and close its client."""
        self.client.close()
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
