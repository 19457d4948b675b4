"""The backfill search on reserved hosts keeps each host's blocks for the cycle
(`reserve_room.HostRooms`); it must answer every search exactly as a scan of every host
does (the search before the blocks were kept: `open_victims` and `keyed_blocks` on each
host, the lowest key), for any job and rule, as stops and starts change the hosts:
the same block, the same victims in the same order, the same passed-over flag.
Hosts where running jobs overlap (the cache's inexact case) are generated too."""

from __future__ import annotations

from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from scheduler.core.engine import (
    EngineState,
    Host,
    Placement,
    Policy,
    RunningWorkload,
    Snapshot,
    StopReason,
    Workload,
)
from scheduler.core.engine.cluster import ClusterState, Decisions
from scheduler.core.engine.fairshare_cycle import FairShareCycle
from scheduler.core.engine.preemption import apply_preemption
from scheduler.core.engine.reserve_room import HostRooms, TakeRule, keyed_blocks, open_victims
from scheduler.core.engine.victims import Victim
from tests.core.engine.crowded import NOW, PROJECTS, TREE, H


@st.composite
def busy_cluster(draw: st.DrawFn) -> Snapshot:
    """Hosts of 8 or 4 GPUs full of work of every kind, mostly past its protection, a
    few gangs over two hosts, and now and then a job on GPUs another one holds."""
    hosts = [
        Host(f"h{i}", draw(st.sampled_from([8, 8, 4]))) for i in range(draw(st.integers(2, 6)))
    ]
    running: list[RunningWorkload] = []

    def add(placements: tuple[Placement, ...], gpus: int) -> None:
        project = draw(st.sampled_from(PROJECTS))
        allocated = draw(st.integers(0, 3)) > 0
        min_rt = draw(st.sampled_from([0.5 * H, H, 10 * H])) if allocated else 0.0
        ran = draw(st.sampled_from([0.25 * H, 2 * H, 9 * H]))
        w = Workload(f"r{len(running)}", project, gpus, 0.0, min_rt, True, draw(st.integers(0, 2)))
        running.append(RunningWorkload(w, placements, NOW - ran, allocated, None))

    for h in hosts:
        pos = 0
        while pos < h.gpus:
            size = draw(st.sampled_from([1, 2, 4]))
            if pos % size or pos + size > h.gpus:
                size = 1
            if draw(st.integers(0, 5)) > 0:
                add((Placement(h.name, tuple(range(pos, pos + size))),), size)
            pos += size
    for _ in range(draw(st.integers(0, 2))):  # gangs over two hosts (on GPUs held already)
        a, b = draw(st.lists(st.sampled_from(hosts), min_size=2, max_size=2, unique=True))
        add((Placement(a.name, (0, 1)), Placement(b.name, (0, 1))), 4)
    usage = {p: draw(st.sampled_from([0.0, 5 * H, 200 * H])) for p in PROJECTS}
    return Snapshot(hosts=hosts, running=running, pending={}, tree=TREE, usage=usage)


def _full_scan(
    cluster: ClusterState,
    by_host: dict[int, list[tuple[Victim, int]]],
    hosts: list[int],
    p: int,
    take: TakeRule,
    fewest: bool,
) -> tuple[tuple[int, int, list[Victim]] | None, bool]:
    within = set(hosts)
    best_key = None
    best = None
    skipped = False
    for h in hosts:
        if cluster.gpus[h] < p:
            continue
        on, passed = open_victims(by_host.get(h, ()), take, within)
        skipped = skipped or passed
        if not on:
            continue
        free, gpus = cluster.free[h], cluster.gpus[h]
        for key, chosen in keyed_blocks(h, free, gpus, on, p, fewest, take.lf, take.leaf_index):
            if best_key is None or key < best_key:
                best_key, best = key, (h, key[7], chosen)
    return best, skipped


@given(busy_cluster(), st.data())
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_kept_blocks_answer_every_search_as_a_scan_of_every_host(s: Snapshot, data) -> None:
    fewest = data.draw(st.booleans())
    policy = Policy(short_reserve_fewest_gpus=fewest)
    state = EngineState()
    layout = state.host_layout(s.hosts)
    cap = policy.max_min_runtime_s
    cluster = ClusterState(
        s, layout, cap, NOW, state.runs, state.blocks, state.masks, state.free_index(layout)
    )
    decisions = Decisions()
    cycle = FairShareCycle(s, policy, NOW, state, cluster, decisions)
    victims = cycle.victims()
    fs = cycle.fair_share
    rooms = HostRooms(cluster, victims.by_host, fewest, fs.lf, fs.tree.leaf_index)
    everyone = list(range(len(s.hosts)))
    hosts = data.draw(st.lists(st.sampled_from(everyone), min_size=1, unique=True))
    for step in range(6):
        p = data.draw(st.sampled_from([1, 2, 4, 8]))
        w = Workload(
            f"w{step}",
            data.draw(st.sampled_from(PROJECTS)),
            p,
            NOW - data.draw(st.sampled_from([0.0, 60.0])),
            900.0,
            True,
            data.draw(st.integers(0, 2)),
        )
        take = TakeRule(
            w if data.draw(st.integers(0, 3)) > 0 else None,
            data.draw(st.booleans()),
            data.draw(st.booleans()),
            data.draw(st.sampled_from([15.0, float("inf")])),
            data.draw(st.sampled_from([900.0, 3600.0])),  # the short limit
            fs.lf,
            fs.tree.leaf_index,
        )
        # the same list object (the fast path) or a copy (found by its hosts)
        asked = hosts if data.draw(st.booleans()) else list(hosts)
        want, skipped = _full_scan(cluster, victims.by_host, asked, p, take, fewest)
        assert rooms.cheapest(asked, p, take) == want
        if rooms.order(asked, p).inexact:
            event("a host with overlapping jobs")
        if want is None:
            assert rooms.passed_over(asked, p, take) == skipped
            continue
        h, start, chosen = want
        event("allocated work taken" if any(v.allocated for v in chosen) else "a block found")
        apply_preemption(
            cluster,
            victims,
            decisions,
            w,
            cluster.shape(p),
            [(h, start)],
            chosen,
            lambda v: (StopReason.SHORT_RESERVE, "test"),
        )
