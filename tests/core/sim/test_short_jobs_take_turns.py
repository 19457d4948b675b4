"""Short jobs (a min runtime within the short-job limit) that run long past their
protection, in two projects on a small cluster: the short-job reserve must not let them
take each other's GPUs in turn. When it did, each preempted short job was a waiting
short job the next cycle and took another one back: a 6-hour trace of 80 jobs on 3
hosts ran for 2,298 simulated hours with 52,148 reserve preemptions (found by
`test_idle_replay.py`'s random busy traces, seed 2)."""

from __future__ import annotations

import pytest

from scheduler.core.engine.types import BudgetNode, Policy
from scheduler.core.sim.model import ClusterSpec, HostSpec, SimConfig
from scheduler.core.sim.replay import simulate
from tests.support.sim import busy_trace

H = 3600.0
TREE = BudgetNode("org", children=(BudgetNode("a", 1.0), BudgetNode("b", 1.0)))
SHORT_LIMIT = Policy().short_job_max_s


@pytest.mark.parametrize("seed", range(6))
def test_short_jobs_never_take_each_other_on_the_reserve(seed: int) -> None:
    jobs = busy_trace(seed)
    cluster = ClusterSpec("c", tuple(HostSpec(f"h{i}", 8) for i in range(3)))
    result = simulate(cluster, TREE, jobs, SimConfig())
    min_runtime = {j.job_id: j.min_runtime_s for j in jobs}
    taken = [p for p in result.preemptions if p.reason_code == "short_reserve"]
    assert all(min_runtime[p.job_id] > SHORT_LIMIT for p in taken)
    # every job ends within a day of the last submission (24 GPUs, ~6 h of work each)
    assert max(iv.end_s for iv in result.intervals) < 30 * H
    assert len(result.preemptions) < 2 * len(jobs)
