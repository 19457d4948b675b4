"""The adaptive short-job reserve, on by default (`Policy.short_reserve_auto`): sized from
the short work the cycle sees (running and waiting) and from the cluster (at most
`short_reserve_idle_share` of the healthy GPUs beyond what short work uses), and giving
way to the first waiting job of the fair-share order once it has waited
`short_reserve_release_s`. It never breaks a min-runtime contract, never makes a job
impossible, and never holds the hosts the first waiting job needs beyond that bound."""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import replace

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from scheduler.core.engine import Policy, Snapshot, Workload, plan
from scheduler.core.engine.fairshare import compute_fair_share
from tests.core.engine.crowded import CAP, NOW, check_plan, crowded_with_short_jobs, started_on
from tests.core.engine.helpers import H, cycle, hosts, job, pending, run, snap, tree

SHORT = 15 * 60.0
RELEASE = Policy().short_reserve_release_s
_HELD = re.compile(r"; ([\w, ]+) held for jobs with a min runtime of at most")


def auto(s: Snapshot, now: float = NOW, **policy):
    return cycle(s, now, short_reserve_auto=True, **policy)


def held_hosts(out) -> set[str] | None:
    """The reserve's hosts, as the explained queue tells a waiting allocated job (None:
    no waiting job was told, so the plan does not show them)."""
    for entry in out.queue:
        m = _HELD.search(entry.reason)
        if m:
            named = set(m.group(1).split(", "))
            if " more hosts" in m.group(1):  # a long list is cut: the plan has them all
                return set(out.short_reserve)
            return named
    return None


def _trainers(n: int) -> list:
    return [
        run(job(f"t{i}", "a", 8, minrt=4 * H), f"h{i}", tuple(range(8)), started=NOW - H)
        for i in range(n)
    ]


def test_it_is_on_by_default_and_one_setting_turns_it_off():
    assert Policy().short_reserve_auto and Policy().short_reserve_hosts == 0
    # 64 hosts: 2% of the GPUs pays for one host kept ready for the next short job
    s = snap(
        hosts(64), _trainers(63), pending(job("long", "b", 8, minrt=H, submit=NOW)), tree(a=1, b=1)
    )
    out = plan(s, Policy(), NOW)
    assert not out.starts and held_hosts(out) == {"h63"}
    assert started_on(plan(s, Policy(short_reserve_auto=False), NOW)) == {"long": {"h63"}}


def test_a_small_cluster_reserves_nothing_without_short_work_and_a_host_for_a_lot_of_it():
    # 4 hosts: 2% of 32 GPUs pays for no host; 6 GPUs of short work running fill none
    busy = _trainers(3)
    shorts = [
        run(job(f"d{i}", "a", 1, minrt=10 * 60), "h3", (i,), started=NOW - 60) for i in range(6)
    ]
    long = job("long", "b", 1, minrt=H, submit=NOW)
    s = snap(hosts(4), busy + shorts, pending(long), tree(a=1, b=1))
    assert started_on(auto(s)) == {"long": {"h3"}}
    # 8 GPUs of short work running and waiting fill a host: it is held for short work
    debug = job("debug", "b", 2, minrt=5 * 60, submit=NOW)
    s = snap(hosts(4), busy + shorts, pending(long, debug), tree(a=1, b=1))
    out = auto(s)
    assert started_on(out) == {"debug": {"h3"}} and held_hosts(out) == {"h3"}


def test_the_first_job_in_line_gets_the_reserve_once_it_has_waited_the_bound():
    hs = hosts(64)
    busy = _trainers(63)
    sweep = run(job("sweep", "a", 8, minrt=0), "h63", tuple(range(8)), started=NOW - H)
    fresh = job("long", "b", 8, minrt=H, submit=NOW - RELEASE + 60)
    out = auto(snap(hs, [*busy, sweep], pending(fresh), tree(a=1, b=1)))
    assert not out.starts and held_hosts(out) == {"h63"}
    # the same job, after the bound: the reserve gives it h63 (preempting the backfill)
    late = replace(fresh, submit_s=NOW - RELEASE)
    out = auto(snap(hs, [*busy, sweep], pending(late), tree(a=1, b=1)))
    assert started_on(out) == {"long": {"h63"}}
    assert [x.workload_id for x in out.stops] == ["sweep"]


def _long_gpus(s: Snapshot, host: str, horizon: float = SHORT) -> int:
    """GPUs of `host` under allocated work protected beyond `horizon` from now (the
    short-job limit by default)."""
    n = 0
    for r in s.running:
        w = r.workload
        if r.allocated and r.started_s + min(w.min_runtime_s, CAP) > NOW + horizon:
            n += sum(len(p.gpu_indices) for p in r.placements if p.host == host)
    return n


def _head(s: Snapshot, policy: Policy) -> Workload | None:
    """The first waiting allocated job of the fair-share order: the engine's order, whose
    ties between projects of equal fair share follow the policy's seed (not their names),
    of the projects with an entitlement."""
    fs = compute_fair_share(s.tree, s.usage, policy.seed)
    for proj in fs.order:
        if fs.tree.entitled_by_key.get(proj, 0.0) <= 0.0:
            continue
        for w in s.pending.get(proj, ()):
            if w.min_runtime_s > 0:
                return w
    return None


@st.composite
def crowded_with_recent_jobs(draw: st.DrawFn) -> Snapshot:
    """A crowded cluster with short jobs waiting; some queues submitted just now (the
    reserve holds), others long ago (it gives way to the first in line)."""
    s, _ = draw(crowded_with_short_jobs())
    if draw(st.booleans()):
        return s
    waiting = {
        p: [replace(w, submit_s=NOW - draw(st.sampled_from([0.0, 60.0]))) for w in lst]
        for p, lst in s.pending.items()
    }
    return Snapshot(s.hosts, s.running, waiting, s.tree, s.usage)


def test_the_adaptive_reserve_keeps_every_contract_and_its_bound():
    seen: Counter[str] = Counter()

    # Random again: the rare case a random run found (2026-12-05: the first job in line
    # one host short after the bound) was this test's first job in line, taken from the
    # projects in name order where the engine breaks ties of equal fair share by the
    # policy's seed; `_head` now reads the engine's order. 8 runs of 2,000 examples
    # (seeds 1, 4-10) found no other, and 6 of 400 (seeds 21-26) reached every floor.
    @settings(max_examples=400, deadline=None, suppress_health_check=list(HealthCheck))
    @given(crowded_with_recent_jobs())
    def check(s: Snapshot) -> None:
        policy = Policy(max_min_runtime_s=CAP, short_job_max_s=SHORT)
        assert policy.short_reserve_auto
        out = check_plan(s, seen, policy)  # no protected job stopped, every invariant
        healthy = [h for h in s.hosts if h.healthy]
        size = max(h.gpus for h in healthy)
        largest = [h.name for h in healthy if h.gpus == size]
        head = _head(s, policy)
        late = head is not None and head.min_runtime_s > SHORT and NOW - head.submit_s >= RELEASE
        if late:
            # the same cluster with the first job in line just submitted: a reserve that
            # the bound made give way
            fresh = {
                p: [replace(w, submit_s=NOW) if w is head else w for w in lst]
                for p, lst in s.pending.items()
            }
            before = held_hosts(plan(replace(s, pending=fresh), policy, NOW))
            if before:
                seen["reserve released to the first job in line"] += 1
                if head.gpus >= size:
                    seen["reserve released to a large job"] += 1
        held = held_hosts(out)
        if held is None:
            return
        seen["reserve active"] += 1
        assert held <= set(largest)
        # never a job made impossible: the widest waiting job keeps its hosts, and one
        # host always stays open to long work
        widest = max(w.gpus for lst in s.pending.values() for w in lst)
        assert len(largest) - len(held) >= max(1, -(-widest // size))
        # the bound: once the first job in line has waited `short_reserve_release_s`,
        # it has as many hosts outside the reserve as it needs where long work leaves
        # it room within another `short_reserve_release_s`, whenever it would have them
        # counting the reserve's hosts where only short work and backfill stand in its
        # way: the reserve delays it by at most twice that bound
        if not late:
            return
        need = -(-head.gpus // size)

        def room(h: str, horizon: float) -> bool:
            busy = _long_gpus(s, h, horizon)
            return size - busy >= head.gpus if head.gpus <= size else not busy

        outside = [h for h in largest if h not in held and room(h, RELEASE)]
        inside = [h for h in held if room(h, SHORT)]
        if len(outside) + len(inside) >= need:
            assert len(outside) >= need, (head, held, outside, s)
            seen["bound kept with the reserve still active"] += 1

    check()
    # the generator reaches these on purpose
    assert seen["reserve active"] >= 50 and seen["stop unallocated"] >= 50, dict(seen)
    assert seen["reserve released to the first job in line"] >= 2, dict(seen)
    assert seen["reserve released to a large job"] >= 2, dict(seen)
    assert seen["bound kept with the reserve still active"] >= 2, dict(seen)
