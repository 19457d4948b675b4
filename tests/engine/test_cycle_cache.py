"""Cross-cycle caches of the engine (hosts arrays, running-job objects, GC pause):
a warm plan must equal a cold one over evolving cycles, health changes included, and
a plan made while another holds the caches (concurrent use) must be the same too."""

from __future__ import annotations

import random

import scheduler.engine.cycle as engine_cycle
from scheduler.engine import Host, RunningWorkload

from .helpers import H, apply_plan, cycle, job, snap, tree


def _cold(s, now):
    engine_cycle._RUN_CACHE.clear()
    engine_cycle._RUN_STATE = None
    engine_cycle._RUN_CACHE_KEY = None
    engine_cycle._HOSTS = None
    engine_cycle._RUNS.clear()
    return cycle(s, now)


def _unshared(s, now):
    # Another plan() holds the caches: this one must build its own objects.
    assert engine_cycle._LOCK.acquire(blocking=False)
    try:
        return cycle(s, now)
    finally:
        engine_cycle._LOCK.release()


def test_warm_cold_and_unshared_plans_agree_over_evolving_cycles():
    rng = random.Random(11)
    t = tree(a=1, b=2, c=1, d=3)
    names = [f"h{i}" for i in range(8)]
    healthy = [True] * len(names)
    waiting = {
        p: [
            job(
                f"{p}{i}",
                p,
                rng.choice([1, 1, 2, 4, 8, 16]),
                minrt=rng.choice([0, 0.5 * H, H, 3 * H]),
                submit=i,
                prio=rng.choice([0, 0, 1]),
            )
            for i in range(30)
        ]
        for p in "abcd"
    }
    for v in waiting.values():
        v.sort(key=lambda w: (-w.priority, w.submit_s, w.id))
    running: dict[str, RunningWorkload] = {}
    usage = dict.fromkeys("abcd", 0.0)
    now = 100 * H
    hs = tuple(Host(n, 8, ok) for n, ok in zip(names, healthy, strict=True))
    acted = 0
    for step in range(40):
        if step % 9 == 4:  # a host changes health: a new hosts tuple
            k = rng.randrange(len(names))
            healthy[k] = not healthy[k]
            hs = tuple(Host(n, 8, ok) for n, ok in zip(names, healthy, strict=True))
        s = snap(hs, list(running.values()), {p: list(v) for p, v in waiting.items()}, t, usage)
        warm = cycle(s, now)
        assert warm == _unshared(s, now)
        assert warm == _cold(s, now)
        cycle(s, now)  # leave warm caches for the next cycle
        acted += bool(warm.starts or warm.stops)
        apply_plan(warm, running, waiting, now)
        for wid in rng.sample(sorted(running), k=min(2, len(running))):
            del running[wid]  # finished
        for wid, rw in list(running.items()):  # checkpoints: new objects, same runs
            if rw.workload.resumable and rng.random() < 0.3:
                running[wid] = RunningWorkload(
                    rw.workload, rw.placements, rw.started_s, rw.allocated, now
                )
            if rw.allocated:
                usage[rw.workload.project] += rw.workload.gpus * 0.5 * H
        now += 0.5 * H
    assert acted > 10  # the scenario exercises starts and preemptions


def test_plan_leaves_the_garbage_collector_as_it_found_it():
    import gc

    s = snap(tuple(Host(f"h{i}", 8) for i in range(2)), [], {}, tree(a=1))
    assert gc.isenabled()
    cycle(s, 0.0)
    assert gc.isenabled()
    gc.disable()
    try:
        cycle(s, 0.0)
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_kept_free_masks_follow_snapshots_that_jump_between_running_sets():
    """The cross-cycle state keeps each host's free mask and the free GPU count, updated
    only on hosts whose used GPUs changed: plans must equal cold ones when the caller
    alternates between unrelated snapshots (different running jobs on the same hosts
    tuple) and when it goes back to an earlier one."""
    rng = random.Random(5)
    t = tree(a=1, b=2, c=1)
    hs = tuple(Host(f"h{i}", 8) for i in range(6))
    states = []
    for k in range(3):  # three independent histories on the same hosts tuple
        waiting = {
            p: [
                job(f"{p}{k}_{i}", p, rng.choice([1, 2, 4, 8, 16]), minrt=rng.choice([0, H]))
                for i in range(12)
            ]
            for p in "abc"
        }
        running: dict[str, RunningWorkload] = {}
        now = 10 * H
        for _ in range(3):
            s = snap(hs, list(running.values()), {p: list(v) for p, v in waiting.items()}, t)
            apply_plan(_cold(s, now), running, waiting, now)
            now += H
        states.append((running, waiting, now))
    order = [0, 1, 0, 2, 2, 1, 0, 2, 1, 1]
    for step, k in enumerate(order):
        running, waiting, now = states[k]
        s = snap(hs, list(running.values()), {p: list(v) for p, v in waiting.items()}, t)
        warm = cycle(s, now)
        assert warm == _cold(s, now), (step, k)
        cycle(s, now)  # leave this snapshot's state for the next (different) one
        if step % 3 == 2:  # drop one job: a small change from the kept state
            running = dict(running)
            if running:
                del running[sorted(running)[0]]
            states[k] = (running, waiting, now)
