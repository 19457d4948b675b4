"""The cycle reports its duration and its starts and stops (by rule) to `/metrics`."""

import re

import pytest

pytestmark = pytest.mark.django_db


def _value(text: str, name: str, labels: str) -> float:
    match = re.search(rf"^{re.escape(name)}{{{re.escape(labels)}}} (\S+)$", text, re.M)
    return float(match.group(1)) if match else 0.0


def test_cycles_starts_and_preemptions_by_rule_are_counted(live, client):
    def metrics() -> str:
        return client.get("/metrics", REMOTE_ADDR="127.0.0.1").content.decode()

    before = metrics()
    for _ in range(4):
        live.submit("b1", gpus=8, min_runtime_s=0, resumable=True, duration_s=10_000, kind="sweep")
    live.cycle()
    live.memory.advance(600)
    live.submit("a1", gpus=8, min_runtime_s=600, duration_s=100)
    live.cycle()
    after = metrics()

    def grew(name: str, labels: str) -> float:
        return _value(after, name, labels) - _value(before, name, labels)

    assert grew("allot_cycle_duration_seconds_count", 'cluster="live"') == 2
    starts = 'action="start",cluster="live",rule="unallocated"'
    assert grew("allot_scheduler_actions_total", starts) == 4
    stops = 'action="stop",cluster="live",rule="unallocated_work"'
    assert grew("allot_scheduler_actions_total", stops) == 1
