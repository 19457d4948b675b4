"""The xdist scheduler of tests/conftest.py hands out the longest work first and never
lets a busy worker hold the next long test (tests/support/scheduling.py), driven here
through pytest-xdist's own scheduler interface with simulated workers and clocks."""

from __future__ import annotations

import heapq
from types import SimpleNamespace

from tests.conftest import ModuleGroupScheduling
from tests.support.scheduling import DEFAULT_S, longest_first, pending_s


class FakeNode:
    """A worker: runs the tests it is sent in order, and one only once it knows the next
    (or is shut down), as pytest-xdist's worker does."""

    def __init__(self, name: str):
        self.name, self.queue, self.shutting_down, self.ran = name, [], False, []
        self.gateway = SimpleNamespace(id=name)

    def send_runtest_some(self, indexes: list[int]) -> None:
        self.queue.extend(indexes)

    def shutdown(self) -> None:
        self.shutting_down = True


def simulate(collection: list[str], seconds: dict[str, float], workers: int) -> list[FakeNode]:
    """Run `collection` on `workers` simulated workers; the workers, with what each ran."""
    config = SimpleNamespace(
        getvalue=lambda name: {"tx": [f"{workers}*popen"], "dist": "loadgroup"}[name],
        option=SimpleNamespace(loadscopereorder=True),
    )
    scheduler = ModuleGroupScheduling(config)
    scheduler.durations = seconds
    nodes = [FakeNode(f"gw{n}") for n in range(workers)]
    for node in nodes:
        scheduler.add_node(node)
        scheduler.add_node_collection(node, collection)
    scheduler.schedule()
    clock: list[tuple[float, int]] = []  # (time the node's running test ends, node number)
    running: dict[int, int] = {}

    def start(n: int, now: float) -> None:
        node = nodes[n]
        if n not in running and (len(node.queue) >= 2 or (node.queue and node.shutting_down)):
            running[n] = index = node.queue.pop(0)
            node.ran.append(collection[index])
            heapq.heappush(clock, (now + seconds.get(collection[index], DEFAULT_S), n))

    for n in range(workers):
        start(n, 0.0)
    while clock:
        now, n = heapq.heappop(clock)
        scheduler.mark_test_complete(nodes[n], running.pop(n))
        for m in range(workers):  # a completion may shut others down too
            start(m, now)
    assert sorted(t for node in nodes for t in node.ran) == sorted(collection)
    return nodes


def test_units_are_ordered_by_their_expected_seconds():
    queue = {"a": {"a::x": False}, "b": {"b::x": False, "b::y": False}, "c": {"c::x": False}}
    ranked = longest_first(queue, {"a::x": 2.0, "b::x": 1.5, "b::y": 1.0})
    assert list(ranked) == ["b", "a", "c"]
    assert pending_s({"b": {"b::x": True, "b::y": False}}, {"b::y": 1.0}) == 1.0


def test_the_long_tests_go_to_different_workers_and_none_waits_behind_another():
    long = {f"tests/t_long.py::test_{n}": s for n, s in enumerate([50, 48, 30, 29, 20])}
    short = [f"tests/t_short.py::test_{n}" for n in range(200)]  # 0.3 s each: 60 s
    collection = short + list(long)  # collected last, as the slow transactional tests are
    nodes = simulate(collection, long, workers=4)
    for node in nodes:
        held = [t for t in node.ran if t in long]
        assert sum(long[t] for t in held) <= 50, (node.name, held)
    loads = [sum(long.get(t, DEFAULT_S) for t in node.ran) for node in nodes]
    assert max(loads) - min(loads) <= 2 * DEFAULT_S + 1, loads  # the short ones fill in


def test_a_group_stays_on_one_worker():
    group = [f"tests/test_query_counts.py::test_{n}" for n in range(30)]
    others = [f"tests/t_other.py::test_{n}" for n in range(40)]
    nodes = simulate(others + group, {}, workers=3)
    holders = [node.name for node in nodes if set(group) & set(node.ran)]
    assert len(holders) == 1
