"""`PreemptibleWork`: the counters the fair-share pass reads to skip searches that
cannot succeed stay exact while victims are stopped."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from scheduler.core.engine.preemption import PreemptibleWork, Victim
from scheduler.core.engine.types import RunningWorkload, Workload


@settings(max_examples=200, deadline=None)
@given(
    jobs=st.lists(
        st.tuples(st.integers(0, 7), st.sampled_from([1, 2, 4, 8]), st.booleans()),
        max_size=40,
    ),
    stop_order=st.randoms(use_true_random=False),
)
def test_gpus_from_an_order_index_on_match_a_plain_sum_as_victims_are_stopped(jobs, stop_order):
    rank = {f"p{i}": i for i in range(6)}  # p6 and p7 are not in the order
    runs = [
        RunningWorkload(
            workload=Workload(
                id=f"j{n}", project=f"p{proj}", gpus=gpus, submit_s=0.0, min_runtime_s=60.0
            ),
            placements=(),
            started_s=0.0,
            allocated=allocated,
        )
        for n, (proj, gpus, allocated) in enumerate(jobs)
    ]
    work = PreemptibleWork(((rw, (), None, 0.0, None) for rw in runs), set(), rank)
    victims = []
    for rw in runs:
        v = Victim(rw, (), 100.0, 3600.0)
        v.rank = rank.get(v.project, len(rank))
        victims.append(v)
    stop_order.shuffle(victims)

    def check() -> None:
        for r in range(len(rank) + 3):
            assert work.allocated_gpus_from(r) == sum(work.gpus_at_rank[r:])

    check()
    assert work.allocated_gpus_from(0) == sum(g for _, g, a in jobs if a)
    while victims:
        work.forget([victims.pop()])
        check()
    assert work.allocated_gpus_from(0) == 0
