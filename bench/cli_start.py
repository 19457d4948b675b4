"""Start-up cost of the `allot` CLI: CPU time (user + system) of whole calls, as a
researcher's script pays it in a polling loop.

Runs `python -m allot_cli` as a subprocess `--calls` times for each of: `--help`,
`queue` (20 pending jobs; as a table and `--json`) and `submit` against a fake server on 127.0.0.1 (the standard
library's http.server in this process, answering `clusters/`, `queue/` and `jobs/` with
canned JSON), and prints the median CPU per call in ms, read from the children's
rusage (microseconds, not /usr/bin/time's 10 ms steps). The server's CPU is this
process's, not the children's, so it is not counted. Also lists the heavy packages a
`--help` call loads (none of the server's, no rich, no HTTP stack is the aim).

    .venv/bin/python bench/cli_start.py [--calls 10] [--tree DIR]

`--tree` runs the CLI of another checkout (e.g. `git archive main | tar -x -C /tmp/m`)
with this virtual environment, for a before/after on the same minute.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
NOW = "2026-12-06T08:00:00Z"
CLUSTERS = [{"id": 1, "name": "gpu", "policy": {"max_min_runtime_s": 86400}}]
PENDING = {
    "count": 20,
    "computed_at": NOW,
    "cycle": 7,
    "next": None,
    "results": [
        {
            "position": i + 1,
            "job": 100 + i,
            "submitter": "ann",
            "project_path": "org/prog-a/a1",
            "gpus": 8,
            "min_runtime_s": 3600,
            "queued_at": NOW,
            "name": "job",
            "kind": "training",
            "priority": 0,
            "fairshare_factor": 0.5,
            "reason": "waits for 8 free GPUs on one host",
        }
        for i in range(20)
    ],
}
JOB = {
    "id": 200,
    "gpus": 1,
    "min_runtime_s": 900,
    "allocated": True,
    "project_path": "org/prog-a/a1",
    "cluster_name": "gpu",
    "state": "pending",
}
HEAVY = ("django", "scheduler", "budgets", "ledger", "config", "httpx", "rich", "urllib.request")
LOADED = (
    "import sys; sys.argv = ['allot', '--help']\n"
    "from allot_cli.main import main\n"
    "try:\n    main()\nexcept SystemExit:\n    pass\n"
    f"print(sorted({{m for m in sys.modules if m.startswith({HEAVY!r})}}), file=sys.stderr)"
)


class FakeApi(BaseHTTPRequestHandler):
    def _answer(self, status: int, body: object) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        path = self.path.split("?")[0]
        if path == "/api/v1/clusters/":
            self._answer(200, CLUSTERS)
        elif path == "/api/v1/queue/":
            self._answer(200, PENDING)
        else:
            self._answer(404, {"detail": "not found"})

    def do_POST(self) -> None:  # noqa: N802
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self._answer(201, {"jobs": [JOB], "array_id": None})

    def log_message(self, *args: object) -> None:
        pass


def cpu_ms(args: list[str], env: dict[str, str], tree: Path) -> float:
    """CPU (user + system) of one `python -m allot_cli ARGS` call, in ms."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    done = subprocess.run(
        [sys.executable, "-m", "allot_cli", *args], env=env, cwd=tree, capture_output=True
    )
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise SystemExit(f"allot {' '.join(args)} failed: {done.stderr.decode()}")
    used = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return used * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=10)
    parser.add_argument("--tree", type=Path, default=ROOT)
    opts = parser.parse_args()
    server = ThreadingHTTPServer(("127.0.0.1", 0), FakeApi)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    env = {
        "PATH": os.environ.get("PATH", ""),
        "HOME": "/nonexistent",
        "XDG_CONFIG_HOME": "/nonexistent",
        "ALLOT_URL": f"http://127.0.0.1:{server.server_address[1]}",
        "ALLOT_TOKEN": "bench",
        "COLUMNS": "120",
    }
    calls = {
        "help": ["--help"],
        "queue": ["queue"],
        "queue_json": ["queue", "--json"],
        "submit": ["submit", "-A", "org/prog-a/a1", "-t", "15m"],
    }
    for args in calls.values():  # warm the bytecode caches
        cpu_ms(args, env, opts.tree)
    figures: dict[str, object] = {"calls": opts.calls, "tree": str(opts.tree)}
    samples: dict[str, list[float]] = {name: [] for name in calls}
    for _ in range(opts.calls):  # interleaved, so a busy moment hits every kind alike
        for name, args in calls.items():
            samples[name].append(cpu_ms(args, env, opts.tree))
    for name, values in samples.items():
        figures[f"{name}_cpu_median_ms"] = round(statistics.median(values), 1)
        figures[f"{name}_cpu_min_ms"] = round(min(values), 1)
    bare = [cpu_ms_of([sys.executable, "-c", "pass"]) for _ in range(opts.calls)]
    figures["python_bare_cpu_median_ms"] = round(statistics.median(bare), 1)
    loaded = subprocess.run(
        [sys.executable, "-c", LOADED], env=env, cwd=opts.tree, capture_output=True, text=True
    )
    figures["help_loads"] = loaded.stderr.strip().splitlines()[-1] if loaded.stderr else ""
    server.shutdown()
    print(json.dumps(figures, indent=2))


def cpu_ms_of(command: list[str]) -> float:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run(command, check=True)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ((after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)) * 1000


if __name__ == "__main__":
    main()
