"""Test servers' ports (tests/support/ports.py): in this worker's slice, below the
ephemeral range, never handed out twice, and walked from an offset of the process's own."""

from __future__ import annotations

import itertools

from tests.support import ports


def test_ports_are_in_the_workers_slice_and_never_repeat():
    given = [ports.free_port() for _ in range(5)]
    assert len(set(given)) == 5
    for port in given:
        assert ports._START <= port < ports._START + ports.PORTS_PER_WORKER
        assert port < ports._ephemeral_floor()


def test_two_processes_side_by_side_walk_different_ports(monkeypatch):
    walks = []
    for pid in (4242, 4243):
        monkeypatch.setattr(ports.os, "getpid", lambda pid=pid: pid)
        walks.append(list(itertools.islice(ports._slice_in_turn(), 3)))
    assert not set(walks[0]) & set(walks[1])
    whole = list(ports._slice_in_turn())
    assert sorted(whole) == list(range(ports._START, ports._START + len(whole)))
