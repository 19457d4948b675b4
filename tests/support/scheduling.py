"""Longest first under pytest-xdist, by recorded durations (`tests/durations.json`).

The scheduler of `tests/conftest.py` hands out units of work (a test, or a group of
modules that must share a worker) in the order of their expected seconds, the longest
first, and gives a worker a second unit ahead of time only while what it holds is short:
a worker busy with a long test does not sit on the next long one while another worker
runs dry (list scheduling, longest processing time first). The expected seconds come
from a recorded run; a test the recording does not name counts as `DEFAULT_S`.

Record after the suite changed shape (a test became long, one was split):
`ALLOT_RECORD_DURATIONS=tests/durations.json make test` (setup, call and teardown of
each test; tests under `RECORD_FLOOR_S` are left out, they count as `DEFAULT_S`).
"""

from __future__ import annotations

import json
from collections import OrderedDict
from pathlib import Path

DURATIONS = Path(__file__).resolve().parent.parent / "durations.json"
# A test the recording does not name (short, or new): its expected seconds.
DEFAULT_S = 0.3
# Tests shorter than this are not written to the recording (they count as DEFAULT_S).
RECORD_FLOOR_S = 1.0
# A worker is given another unit ahead of time only while the units it holds and has not
# finished are expected to take less than this, and hold at most two tests.
PREFETCH_S = 5.0


def load_durations(path: Path = DURATIONS) -> dict[str, float]:
    """Node id -> recorded seconds (empty when nothing was recorded)."""
    try:
        return {str(k): float(v) for k, v in json.loads(path.read_text())["tests"].items()}
    except (OSError, ValueError, KeyError):
        return {}


def expected_s(nodeid: str, durations: dict[str, float]) -> float:
    """The seconds a test is expected to take (setup, call and teardown)."""
    return durations.get(nodeid, DEFAULT_S)


def longest_first(
    workqueue: dict[str, dict[str, bool]], durations: dict[str, float]
) -> OrderedDict[str, dict[str, bool]]:
    """The units of work ordered by their expected seconds, longest first (stable:
    units of equal length keep the collection's order)."""
    ranked = sorted(
        workqueue.items(),
        key=lambda unit: -sum(expected_s(nodeid, durations) for nodeid in unit[1]),
    )
    return OrderedDict(ranked)


def pending_s(workload: dict[str, dict[str, bool]], durations: dict[str, float]) -> float:
    """Expected seconds of a worker's tests not yet finished (the running one included)."""
    return sum(
        expected_s(nodeid, durations)
        for unit in workload.values()
        for nodeid, done in unit.items()
        if not done
    )


def write_durations(
    seconds: dict[str, float], path: Path = DURATIONS, per_worker: dict[str, float] | None = None
) -> None:
    """Write a run's per-test seconds (those of at least RECORD_FLOOR_S), and the seconds
    of tests each worker ran (how even the run was)."""
    kept = {k: round(v, 1) for k, v in sorted(seconds.items()) if v >= RECORD_FLOOR_S}
    body = {
        "about": "seconds per test (setup+call+teardown) of one `make test` run; "
        "see tests/support/scheduling.py",
        "total_s": round(sum(seconds.values()), 1),
        "per_worker_s": {k: round(v, 1) for k, v in sorted((per_worker or {}).items())},
        "tests": kept,
    }
    path.write_text(json.dumps(body, indent=1) + "\n")
