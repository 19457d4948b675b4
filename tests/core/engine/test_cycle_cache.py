"""The engine's warm state (`EngineState`, owned by the caller): a warm plan must equal a
cold one over evolving cycles, health changes included, whether the caller passes the
same objects (the simulator), brand-new objects with the same content (the live
worker reads them from the database every cycle), or snapshots that jump between
unrelated histories; and the engine keeps no module-level mutable state."""

from __future__ import annotations

import gc
import importlib
import pkgutil
import random
import types
from dataclasses import replace

import scheduler.core.engine
from scheduler.core.engine import EngineState, Host, Policy, RunningWorkload, Snapshot, plan

from .helpers import H, apply_plan, job, snap, tree


def _copy(s: Snapshot) -> Snapshot:
    """The same content in brand-new objects, as a caller reading a database makes."""

    def copy_tree(n):
        return replace(n, children=tuple(copy_tree(c) for c in n.children))

    return Snapshot(
        hosts=tuple(replace(h) for h in s.hosts),
        running=[
            replace(r, workload=replace(r.workload), placements=tuple(map(replace, r.placements)))
            for r in s.running
        ],
        pending={p: [replace(w) for w in lst] for p, lst in s.pending.items()},
        tree=copy_tree(s.tree),
        usage=dict(s.usage),
    )


def test_warm_cold_and_fresh_object_plans_agree_over_evolving_cycles():
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
    sim_state, live_state = EngineState(), EngineState()
    policy = Policy()
    acted = stopped = 0
    for step in range(40):
        if step % 9 == 4:  # a host changes health: a new hosts tuple
            k = rng.randrange(len(names))
            healthy[k] = not healthy[k]
            hs = tuple(Host(n, 8, ok) for n, ok in zip(names, healthy, strict=True))
        s = snap(hs, list(running.values()), {p: list(v) for p, v in waiting.items()}, t, usage)
        warm = plan(s, policy, now, sim_state)
        assert warm == plan(s, policy, now)  # cold
        assert warm == plan(_copy(s), policy, now, live_state)  # new objects, same content
        if step == 20:
            live_state.reset()  # what the live worker does when it cannot trust its cache
        plan(s, policy, now, sim_state)  # the same snapshot again: still warm
        acted += bool(warm.starts or warm.stops)
        stopped += len(warm.stops)
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
    assert acted > 10 and stopped > 5  # the scenario exercises starts and preemptions


def test_one_state_alternating_between_clusters_stays_exact():
    """A state passed snapshots of two different clusters in turn (a misuse the live
    worker must survive) still plans exactly as a cold cycle."""
    rng = random.Random(2)
    state = EngineState()
    worlds = []
    for k, n_hosts in enumerate((3, 5)):
        t = tree(**{f"p{k}{i}": i + 1 for i in range(3)})
        hs = tuple(Host(f"c{k}h{i}", 8) for i in range(n_hosts))
        waiting = {
            p: [
                job(f"{p}_{i}", p, rng.choice([1, 2, 4, 8]), minrt=rng.choice([0, H]))
                for i in range(8)
            ]
            for p in (f"p{k}{i}" for i in range(3))
        }
        worlds.append((t, hs, waiting, {}))
    now = 10 * H
    for step in range(12):
        t, hs, waiting, running = worlds[step % 2]
        s = snap(hs, list(running.values()), {p: list(v) for p, v in waiting.items()}, t)
        warm = plan(s, Policy(), now, state)
        assert warm == plan(s, Policy(), now)
        apply_plan(warm, running, waiting, now)
        now += H


def test_kept_free_masks_follow_snapshots_that_jump_between_running_sets():
    """The state keeps each host's free mask and the free GPU count, updated only on
    hosts whose used GPUs changed: plans must equal cold ones when the caller
    alternates between unrelated snapshots (different running jobs on the same hosts
    tuple) and when it goes back to an earlier one."""
    rng = random.Random(5)
    t = tree(a=1, b=2, c=1)
    hs = tuple(Host(f"h{i}", 8) for i in range(6))
    state = EngineState()
    histories = []
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
            apply_plan(plan(s, Policy(), now), running, waiting, now)
            now += H
        histories.append((running, waiting, now))
    for step, k in enumerate([0, 1, 0, 2, 2, 1, 0, 2, 1, 1]):
        running, waiting, now = histories[k]
        s = snap(hs, list(running.values()), {p: list(v) for p, v in waiting.items()}, t)
        warm = plan(s, Policy(), now, state)
        assert warm == plan(s, Policy(), now), (step, k)
        plan(s, Policy(), now, state)  # leave this snapshot's state for the next one
        if step % 3 == 2:  # drop one job: a small change from the kept state
            running = dict(running)
            if running:
                del running[sorted(running)[0]]
            histories[k] = (running, waiting, now)


def test_plan_leaves_the_garbage_collector_alone():
    s = snap(tuple(Host(f"h{i}", 8) for i in range(2)), [], {}, tree(a=1))
    assert gc.isenabled()
    plan(s, Policy(), 0.0, EngineState())
    assert gc.isenabled()


def _engine_modules() -> list[types.ModuleType]:
    pkg = scheduler.core.engine
    names = [m.name for m in pkgutil.iter_modules(pkg.__path__, pkg.__name__ + ".")]
    return [importlib.import_module(n) for n in names]


def test_engine_modules_hold_no_mutable_state():
    """What the engine keeps between cycles lives in the caller's EngineState only: no
    module of the engine has a dict, list, set or other mutable container at module
    level (type aliases and `__all__` aside)."""
    found = []
    for module in _engine_modules():
        for name, value in vars(module).items():
            if name == "__all__" or name.startswith("__"):
                continue
            if isinstance(value, dict | list | set | bytearray) and not isinstance(value, type):
                found.append(f"{module.__name__}.{name}")
    assert len(_engine_modules()) >= 10
    assert not found, found
