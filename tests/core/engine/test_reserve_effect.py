"""What the short-job reserve did in one cycle (`reserve_effect`): the GPUs it held,
those that waiting longer allocated work could not use because of it, and the short
jobs it started while that work waited (docs/concepts.md, short-job-reserve-cost)."""

from __future__ import annotations

from scheduler.core.engine import Policy, plan
from scheduler.core.engine.reserve_effect import ReserveEffect, reserve_effect
from tests.core.engine.helpers import H, hosts, job, pending, run, snap, tree

NOW = 100 * H


def _trainers(n: int) -> list:
    return [
        run(job(f"t{i}", "a", 8, minrt=4 * H), f"h{i}", tuple(range(8)), started=NOW - H)
        for i in range(n)
    ]


def _effect(s) -> tuple[tuple[str, ...], ReserveEffect]:
    out = plan(s, Policy(), NOW)
    return out.short_reserve, reserve_effect(s, Policy(), out)


def test_an_idle_held_host_costs_its_gpus_while_longer_work_waits():
    long = job("long", "b", 8, minrt=H, submit=NOW)
    s = snap(hosts(64), _trainers(63), pending(long), tree(a=1, b=1))
    assert _effect(s) == (("h63",), ReserveEffect(held_gpus=8, unused_gpus=8, short_starts=0))
    # with nothing longer waiting the same holding costs nothing
    s = snap(hosts(64), _trainers(63), {}, tree(a=1, b=1))
    assert _effect(s) == (("h63",), ReserveEffect(held_gpus=8))


def test_short_work_on_the_held_host_is_no_cost_and_a_short_start_a_wait_saved():
    shorts = [
        run(job(f"d{i}", "a", 1, minrt=10 * 60), "h3", (i,), started=NOW - 60) for i in range(6)
    ]
    long = job("long", "b", 1, minrt=H, submit=NOW)
    debug = job("debug", "b", 2, minrt=5 * 60, submit=NOW)
    s = snap(hosts(4), [*_trainers(3), *shorts], pending(long, debug), tree(a=1, b=1))
    held, effect = _effect(s)
    assert held == ("h3",)  # the debug job's 2 GPUs fill it: 6 + 2 short GPUs of 8
    assert effect == ReserveEffect(held_gpus=8, unused_gpus=0, short_starts=1)


def test_without_a_reserve_there_is_no_effect():
    s = snap(hosts(4), _trainers(3), pending(job("long", "b", 8, submit=NOW)), tree(a=1, b=1))
    out = plan(s, Policy(short_reserve_auto=False), NOW)
    assert out.short_reserve == () and reserve_effect(s, Policy(), out) == ReserveEffect()
