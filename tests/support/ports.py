"""Ports for the servers a test starts (Redis, the simulated cluster, web instances, Prometheus).

A port the kernel hands out for `bind(0)` comes from the ephemeral range, which every
outgoing connection draws from too; between choosing such a port and the server binding
it, a client elsewhere in the suite can take it (CI saw "address already in use" that
way). The ports here lie below the ephemeral range, in a slice of their own for each
xdist worker, and each is handed out once per process, so neither outgoing connections
nor a neighbouring worker can hold the port a test was given. Within its slice a
process starts at an offset drawn at random from its process id and wraps around, so two runs of
the suite side by side on one machine (gw0 of each) do not walk the same ports in step.
"""

from __future__ import annotations

import itertools
import os
import random
import socket

FIRST_PORT = 20000
PORTS_PER_WORKER = 500


def _worker_index() -> int:
    worker = os.environ.get("PYTEST_XDIST_WORKER", "gw0")
    digits = worker.removeprefix("gw")
    return int(digits) if digits.isdigit() else 0


def _ephemeral_floor() -> int:
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as ranges:
            return int(ranges.read().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


_START = FIRST_PORT + _worker_index() * PORTS_PER_WORKER


def _slice_in_turn() -> itertools.chain[int]:
    """This worker's ports below the ephemeral range, from an offset of this process's own."""
    limit = min(_START + PORTS_PER_WORKER, _ephemeral_floor())
    if limit <= _START:
        return itertools.chain()
    offset = _START + random.Random(os.getpid()).randrange(limit - _START)
    return itertools.chain(range(offset, limit), range(_START, offset))


_candidates = _slice_in_turn()


def free_port() -> int:
    """A port nobody listens on, outside the ephemeral range, never returned twice in this process."""
    limit = min(_START + PORTS_PER_WORKER, _ephemeral_floor())
    for port in _candidates:
        with socket.socket() as probe:
            try:
                probe.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise RuntimeError(f"no free port left in {_START}..{limit} for this test worker")
