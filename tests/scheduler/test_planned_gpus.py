"""Planned GPUs of starts the cluster has not placed yet, moved off busy ones
(`scheduler.cycle.planned_gpus`; the cycle's case is in tests/e2e/test_cycle.py)."""

from __future__ import annotations

from scheduler.cycle.planned_gpus import moved_placements, reported_busy


def part(host: str, *indices: int) -> dict:
    return {"host": host, "gpu_indices": list(indices)}


def test_a_clashing_start_keeps_its_free_gpus_and_takes_the_lowest_others():
    busy = reported_busy([("g1", (1, 2)), ("g1", (0,))])
    planned = [(7, [part("g1", 4, 5)]), (3, [part("g1", 2, 3)])]
    # 7 keeps 4-5; 3 keeps 3 and takes 6, the lowest GPU nobody holds
    assert moved_placements(planned, busy, {"g1": 8}) == {3: [part("g1", 3, 6)]}


def test_starts_clear_of_busy_gpus_and_of_each_other_stay():
    planned = [(1, [part("g1", 4, 5)]), (2, [part("g2", 0, 1, 2, 3)])]
    assert moved_placements(planned, {"g1": {0, 1}}, {"g1": 8, "g2": 8}) == {}


def test_of_two_starts_planned_on_the_same_gpus_the_first_keeps_them():
    planned = [(1, [part("g1", 0)]), (2, [part("g1", 0)])]
    assert moved_placements(planned, {"g1": {5}}, {"g1": 8}) == {2: [part("g1", 1)]}


def test_only_the_clashing_host_of_a_multi_host_start_moves():
    planned = [(1, [part("g1", 0, 1), part("g2", 0, 1)])]
    moved = moved_placements(planned, {"g2": {0}}, {"g1": 8, "g2": 8})
    assert moved == {1: [part("g1", 0, 1), part("g2", 1, 2)]}


def test_a_start_with_no_room_left_on_its_host_is_left_as_it_is():
    planned = [(1, [part("g1", 6, 7)])]
    assert moved_placements(planned, {"g1": set(range(7))}, {"g1": 8}) == {}
