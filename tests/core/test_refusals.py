"""The rule that keeps a job off the hosts the cluster refused to start it on
(scheduler.core.refusals): bounded windows that double with each refusal there."""

from __future__ import annotations

from scheduler.core.refusals import (
    AVOID_BASE_S,
    AVOID_MAX_S,
    Refusal,
    avoid_map,
    avoid_texts,
    avoid_window_s,
    avoidances,
    cause,
    expand_nodes,
    memory_s,
    refused_hosts,
)

T0 = 1_800_000_000.0  # 2027-01-15 08:00 UTC


def test_the_window_doubles_with_each_refusal_up_to_the_cap():
    assert avoid_window_s(0) == 0.0
    assert [avoid_window_s(n) for n in (1, 2, 3, 4, 5)] == [900, 1800, 3600, 7200, 14400]
    assert avoid_window_s(6) == avoid_window_s(60) == AVOID_MAX_S
    assert avoid_window_s(3, base_s=60, max_s=100) == 100


def test_a_refused_pair_is_kept_apart_for_its_window_then_planned_again():
    r = Refusal("7", ("gpu03",), T0, "Slurm job 12 PENDING (ReqNodeNotAvail)")
    (kept,) = avoidances([r], T0 + 1)
    assert (kept.job, kept.host, kept.until, kept.refusals) == ("7", "gpu03", T0 + 900, 1)
    assert avoidances([r], T0 + AVOID_BASE_S) == []


def test_repeated_refusals_grow_the_window_and_old_ones_are_forgotten():
    first = Refusal("7", ("gpu03",), T0)
    second = Refusal("7", ("gpu03",), T0 + 1200)
    (kept,) = avoidances([second, first], T0 + 1300)  # any order
    assert (kept.refusals, kept.until) == (2, T0 + 1200 + 1800)
    later = T0 + memory_s() + 1
    assert avoidances([first, Refusal("7", ("gpu03",), later - 10)], later) == [
        avoidances([Refusal("7", ("gpu03",), later - 10)], later)[0]
    ]


def test_pairs_are_per_job_and_host():
    kept = avoidances([Refusal("7", ("gpu03", "gpu04"), T0), Refusal("8", ("gpu03",), T0)], T0 + 1)
    assert avoid_map(kept) == {"7": frozenset({"gpu03", "gpu04"}), "8": frozenset({"gpu03"})}


def test_only_the_nodes_slurm_names_unavailable_are_refused():
    why = "Slurm job 12 PENDING (ReqNodeNotAvail, UnavailableNodes:gpu[04-05])"
    assert refused_hosts(("gpu03", "gpu04"), why) == ("gpu04",)
    assert refused_hosts(("gpu03", "gpu04"), "Slurm job 12 PENDING (Resources)") == (
        "gpu03",
        "gpu04",
    )
    # a list that names none of the start's hosts: all of them
    assert refused_hosts(("gpu03",), "(ReqNodeNotAvail, UnavailableNodes:gpu09)") == ("gpu03",)


def test_expand_nodes():
    assert expand_nodes("gpu[01-03,07],cpu1") == ["gpu01", "gpu02", "gpu03", "gpu07", "cpu1"]
    assert expand_nodes("node7") == ["node7"]


def test_the_text_names_the_hosts_the_time_and_the_cause():
    kept = avoidances(
        [Refusal("7", ("gpu03",), T0, "Slurm job 12 PENDING (ReqNodeNotAvail)")], T0 + 1
    )
    (text,) = avoid_texts(kept).values()
    assert text.startswith("not placed on gpu03 before 08:15 UTC: the cluster refused")
    assert "(1 time)" in text
    assert "not available to it in Slurm" in text
    assert text.endswith("(Slurm job 12 PENDING (ReqNodeNotAvail))")
    assert cause("Slurm job 1 PENDING (BadConstraints)").startswith("its constraints")
    assert cause("") == "the cluster kept it waiting there"
