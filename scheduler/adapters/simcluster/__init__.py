"""The simulated cluster: a separate process that plays a GPU cluster over HTTP.

It is what the demo (`make run`), the end-to-end tests and the benchmarks schedule
against, through `scheduler.adapters.simulated`. Like slurmrestd it has its own state
(SQLite files in its state directory, never Allot's database) and keeps it across
restarts: jobs keep running while it is down, and the ones whose time came end then.

    python -m scheduler.adapters.simcluster serve --host 127.0.0.1 --port 8001 --state-dir var/simcluster

One process hosts several named clusters. Durations that a job asks for (`run_for_s`,
the exit delay after a stop, the grace period) are simulated seconds; a cluster's
`speed` says how many simulated seconds pass per wall second (60: a simulated hour in
a wall minute). Timestamps it reports are wall-clock UTC, the times Allot's ledger
charges. The HTTP surface is described in `scheduler.adapters.simcluster.app`.

This package is plain Python (no Django).
"""

from __future__ import annotations

import os

DEFAULT_URL = "http://127.0.0.1:8001"
URL_VARIABLE = "ALLOT_SIMCLUSTER_URL"


def configured_url() -> str:
    """The simulated cluster's base URL from `ALLOT_SIMCLUSTER_URL` (or the default)."""
    return os.environ.get(URL_VARIABLE, "").strip() or DEFAULT_URL


def host_names(count: int) -> list[str]:
    """Host names of a simulated cluster: h000, h001, ... (as the simulator names them)."""
    width = max(3, len(str(count - 1)))
    return [f"h{i:0{width}d}" for i in range(count)]
