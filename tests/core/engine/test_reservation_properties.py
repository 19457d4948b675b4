"""Hypothesis properties of reservations and of the per-cycle preemption-search cap.

The crowded clusters of `test_contended_properties` are planned with a small, drawn
`Policy.max_failed_preemption_searches` (0 to 3) and one or two reservations, so that
both cases are reached often (each generator's reach is checked at the end of its test,
with minimum counts that fail if a change to the generator or the engine stops reaching
them).

Reservations, checked on every plan that has one:
- the reserved hosts exist, are healthy, and no host is held twice;
- the reserved job is pending, does not start in the same plan, and its hosts can hold
  it (one host of at least its size, or whole hosts adding up to exactly its size);
- no allocated job lands on a reserved host if it could delay the reserved job: its own
  protection must end by the time every job on those hosts has passed its protection
  (when the hosts become usable for the reserved job). Unallocated work may use reserved
  hosts: the reserved job may preempt it at any time.

The search cap, checked on every plan: the failed preemption searches of a cycle never
exceed it (counted by wrapping the engine's two search functions), and the plan keeps
every invariant of `check_plan` when the cap cut the cycle's work short.
"""

from __future__ import annotations

import re
from collections import Counter
from contextlib import contextmanager
from dataclasses import dataclass, replace
from unittest import mock

from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from scheduler.core.engine import CyclePlan, Policy, Snapshot, Workload, fairshare_cycle, plan
from scheduler.core.engine.reservations import within_text
from tests.core.engine.crowded import CAP, NOW, PROJECTS, check_plan, crowded


@dataclass
class SearchCount:
    """Preemption searches of the plans made while `counting_searches` is active."""

    calls: int = 0
    failed: int = 0


@contextmanager
def counting_searches():
    """Wrap the engine's preemption searches (block and whole-host) to count them."""
    count = SearchCount()

    def wrap(search):
        def counted(*args, **kwargs):
            found = search(*args, **kwargs)
            count.calls += 1
            count.failed += found is None
            return found

        return counted

    with (
        mock.patch.object(fairshare_cycle, "search_block", wrap(fairshare_cycle.search_block)),
        mock.patch.object(
            fairshare_cycle, "search_whole_hosts", wrap(fairshare_cycle.search_whole_hosts)
        ),
    ):
        yield count


@st.composite
def capped(draw: st.DrawFn) -> tuple[Snapshot, Policy]:
    """A crowded cluster and a policy with a small search cap and 1-2 reservations."""
    s = draw(crowded())
    # a few small unallocated jobs, to backfill reserved hosts in phase 2 of the cycle
    extra = draw(st.lists(st.sampled_from(PROJECTS), max_size=3))
    if extra:
        pending = {p: list(lst) for p, lst in s.pending.items()}
        for i, project in enumerate(extra):
            pending.setdefault(project, []).append(
                Workload(f"b{i}", project, draw(st.sampled_from([1, 2])), 50.0 + i, 0.0, True, 0)
            )
        s = replace(s, pending=pending)
    policy = Policy(
        max_min_runtime_s=CAP,
        max_failed_preemption_searches=draw(st.sampled_from([0, 1, 1, 2, 3])),
        max_reservations=draw(st.integers(1, 2)),
        # the reservations for large jobs alone (the adaptive short-job reserve has its
        # own property test, test_short_reserve_auto.py)
        short_reserve_auto=False,
    )
    return s, policy


def check_reservations(s: Snapshot, out: CyclePlan, seen: Counter[str]) -> None:
    """The reservation invariants of the module docstring."""
    hosts = {h.name: h for h in s.hosts}
    pending = {w.id: w for lst in s.pending.values() for w in lst}
    started = {x.workload_id: x for x in out.starts}
    stopped = {x.workload_id for x in out.stops}
    held: list[str] = []
    for res in out.reservations:
        seen["reservation"] += 1
        assert res.hosts, res
        assert all(h in hosts for h in res.hosts), f"unknown host in {res}"
        assert all(hosts[h].healthy for h in res.hosts), f"unhealthy host reserved: {res}"
        held += res.hosts
        w = pending.get(res.workload_id)
        assert w is not None, f"reserved job {res.workload_id} is not pending"
        assert w.id not in started, f"reserved job {w.id} also starts"
        sizes = [hosts[h].gpus for h in res.hosts]
        if len(sizes) == 1:
            assert sizes[0] >= w.gpus, res
        else:
            assert sum(sizes) == w.gpus and len(set(sizes)) == 1, res
            seen["multi-host reservation"] += 1

        # When the hosts become usable for the reserved job: every allocated job left on
        # them has passed its protection. The reason states it ("expected usable in ..." or "within a minute")
        # unless a job there is one the reserved job may never preempt (a higher-ranked
        # project's, or one started on them earlier in this cycle): then nothing
        # allocated may land there after the reservation.
        usable_at = NOW
        for r in s.running:
            if r.workload.id in stopped or not r.allocated:
                continue
            if any(p.host in res.hosts for p in r.placements):
                usable_at = max(usable_at, r.started_s + min(r.workload.min_runtime_s, CAP))
        stated = re.search(r"expected usable (in [0-9.]+ (?:min|h)|within a minute) ", res.reason)
        if stated is None:
            seen["reservation behind work it may not preempt"] += 1
            continue
        assert stated.group(1) == within_text(usable_at - NOW), (res.reason, usable_at)
        if usable_at - NOW < 30:  # it once read "in 0 min"
            assert stated.group(1) == "within a minute", res.reason
        if usable_at > NOW:
            seen["reservation waiting for protection to end"] += 1
        for x in out.starts:
            if not any(p.host in res.hosts for p in x.placements):
                continue
            if not x.allocated:
                seen["unallocated work on a reserved host"] += 1
                continue
            end = NOW + min(pending[x.workload_id].min_runtime_s, CAP)
            assert end <= usable_at, (
                f"{x.workload_id} (protected until {end}) lands on {res.hosts}, "
                f"usable for {w.id} at {usable_at}"
            )
            seen["allocated job on a reserved host"] += 1
    assert len(held) == len(set(held)), f"a host is held twice: {out.reservations}"


def test_reservations_and_the_search_cap_hold_and_are_reached():
    seen: Counter[str] = Counter()

    @settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck))
    @given(capped())
    def check(example: tuple[Snapshot, Policy]) -> None:
        s, policy = example
        with counting_searches() as searches:
            out = plan(s, policy, NOW)
        cap = policy.max_failed_preemption_searches
        assert searches.failed <= cap, (searches, cap)
        if cap == 0:
            assert searches.calls == 0, searches
            seen["no search allowed"] += 1
        elif searches.failed == cap:
            seen["search cap reached"] += 1
        if searches.calls > searches.failed:
            seen["preemption found"] += 1
        assert check_plan(s, seen, policy) == out
        check_reservations(s, out, seen)
        for name in seen:
            event(name)

    check()
    # Each case is reached in well over 5% of the examples (300); the floors fail when
    # a change to the generator or to the engine stops reaching them. (Unallocated work
    # in a reservation's hole is counted, not required: some runs draw none.)
    for case, floor in (
        ("search cap reached", 10),
        ("no search allowed", 20),
        ("preemption found", 40),
        ("reservation", 100),
        ("multi-host reservation", 50),
        ("reservation behind work it may not preempt", 40),
        ("reservation waiting for protection to end", 10),
        ("allocated job on a reserved host", 15),
        ("stop fair_share", 50),
        ("stop priority", 10),
    ):
        assert seen[case] >= floor, (case, dict(seen))
