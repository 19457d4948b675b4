"""A forward run's resumable runs save their work as the live cycle's and the replay's do
(`scheduler.core.engine.runs.last_checkpoint_s`, every `Policy.checkpoint_interval_s`
from the run's start): the engine reads it to choose what a move or a stop loses, so a
run played forward that never saved (the forward runs before 2026-12-07) was never moved
and always looked as costly to stop as its whole run."""

from __future__ import annotations

from scheduler.core.engine import Policy, Workload
from scheduler.core.sim.eta import forward_starts
from tests.core.engine.helpers import H, hosts, job, pending, run, snap, tree

NOW = 100 * H
# consolidation runs only while the short-job reserve holds a host: one fixed host here
POLICY = Policy(consolidate=True, short_reserve_hosts=1, short_reserve_auto=False)


def _runs_long(w: Workload, elapsed: float) -> float:
    return 10 * H if w.id in ("a1", "s1") else H


def _fragmented(a1_started: float, a1_saved: float | None = None):
    """h0: a 2-GPU job of `a` (resumable, protected 10 min), 6 GPUs free; h1: an
    interactive session (not resumable) on 6 GPUs, 2 free; h2: the short-job reserve.
    `b` waits with an 8-GPU job: only a move of a1 to h1 frees a block for it."""
    a1 = job("a1", "a", 2, minrt=600)
    sess = job("s1", "a", 6, minrt=8 * H, resumable=False)
    b8 = job("b8", "b", 8, minrt=H)
    running = [
        run(a1, "h0", (0, 1), started=a1_started, ckpt=a1_saved),
        run(sess, "h1", (0, 1, 2, 3, 4, 5), started=NOW - H),
    ]
    return snap(hosts(3), running, pending(b8), tree(a=1, b=1), usage={"b": 1e9})


def test_a_run_that_saves_its_work_during_the_forward_run_can_be_moved():
    """a1 started 20 minutes ago: nothing saved yet, so it may not move now. Its first
    checkpoint comes 10 minutes on; from then a move frees h0 for b8, long before a1
    or the session ends (10 h)."""
    s = _fragmented(NOW - 1200)
    start = forward_starts(s, POLICY, NOW, _runs_long)["b8"]
    assert NOW + 600 <= start <= NOW + 1800
