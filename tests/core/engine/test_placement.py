"""Placement: aligned power-of-two blocks, best fit, whole hosts, all-or-nothing."""

from __future__ import annotations

from scheduler.core.engine.blocks import FreeIndex, Shape, block_info

from .helpers import H, cycle, gpus_of, hosts, job, pending, run, snap, tree


def test_block_info_prefers_the_tightest_aligned_block():
    # free GPUs 1, 4..7: a 1-GPU job should take GPU 1 (its buddy 0 is busy), not break 4..7
    mb, best = block_info(8, 0b11110010)
    assert mb == 4
    assert best[1] == 1
    assert best[4] == 4
    assert 8 not in best


def test_free_index_best_fit_prefers_fullest_host():
    idx = FreeIndex([8, 8, 8])
    idx.set(0, 0xFF)
    idx.set(1, 0b11000000)
    idx.set(2, 0b11110000)
    assert idx.find_block(2) == 1
    assert idx.find_block(4) == 2
    assert idx.find_block(8) == 0
    idx.set(0, 0)
    assert idx.find_block(8) == -1


def test_shapes():
    assert Shape(3, [8, 8]).block == 4
    assert Shape(16, [8, 8]).whole == [(8, 2)]
    assert "whole hosts" in Shape(12, [8, 8]).reason
    assert Shape(24, [8, 8]).reason  # needs 3 hosts, only 2 exist
    assert Shape(6, [6]).whole == [(6, 1)]


def test_jobs_get_aligned_blocks_and_small_jobs_pack_tightly():
    t = tree(a=1)
    busy = run(job("r", "a", 1), "h0", (0,), 0.0)  # h0 has 7 free, h1 all free
    p = pending(
        job("j4", "a", 4, submit=1), job("j2", "a", 2, submit=2), job("j1", "a", 1, submit=3)
    )
    out = cycle(snap(hosts(2), [busy], p, t))
    where = {s.workload_id: s.placements for s in out.starts}
    assert len(where) == 3
    for s in out.starts:
        (pl,) = s.placements
        size = 1 << (len(pl.gpu_indices) - 1).bit_length()
        assert pl.gpu_indices[0] % size == 0
    # everything fits on h0 (best fit) so h1 stays whole for a large job
    assert all(pl.host == "h0" for pls in where.values() for pl in pls)


def test_non_power_of_two_job_uses_an_aligned_block_and_leaves_the_rest():
    out = cycle(
        snap(hosts(1), [], pending(job("j3", "a", 3), job("j1", "a", 1, submit=1)), tree(a=1))
    )
    got = {s.workload_id: s.placements[0].gpu_indices for s in out.starts}
    assert got["j3"] == (0, 1, 2)
    assert got["j1"] == (3,)


def test_multi_host_job_takes_whole_hosts_all_or_nothing():
    t = tree(a=1, b=1)
    # h0 has one busy protected GPU, so only h1 and h2 are whole
    busy = run(job("r", "b", 1, minrt=8 * H), "h0", (0,), 99 * H)
    out = cycle(snap(hosts(3), [busy], pending(job("big", "a", 24)), t))
    assert out.starts == ()  # cannot take 3 whole hosts: nothing partial
    out = cycle(snap(hosts(3), [busy], pending(job("big", "a", 16)), t))
    (s,) = out.starts
    assert {p.host for p in s.placements} == {"h1", "h2"}
    assert all(p.gpu_indices == tuple(range(8)) for p in s.placements)


def test_impossible_sizes_never_start_and_say_why():
    t = tree(a=1)
    out = cycle(snap(hosts(2), [], pending(job("odd", "a", 12), job("huge", "a", 64)), t))
    assert out.starts == ()
    why = {q.workload_id: q.reason for q in out.queue}
    assert "whole hosts" in why["odd"]
    assert "cannot run" in why["huge"]


def test_no_gpu_is_given_twice_when_the_cluster_fills():
    t = tree(a=1)
    jobs = [job(f"j{i}", "a", g, submit=i) for i, g in enumerate([1, 2, 4, 8, 1, 1, 2, 4, 16, 3])]
    out = cycle(snap(hosts(4), [], pending(*jobs), t))
    seen = set()
    for s in out.starts:
        g = gpus_of(s)
        assert not g & seen
        seen |= g
    assert len(seen) == sum(w.gpus for w in jobs if any(s.workload_id == w.id for s in out.starts))


def test_start_reasons_name_a_single_gpu_without_a_range():
    """'h0[3]' for one GPU, 'h0[0-1]' for several: never the range 'h0[3-3]'."""
    out = cycle(
        snap(hosts(1), [], pending(job("j3", "a", 3), job("j1", "a", 1, submit=1)), tree(a=1))
    )
    reasons = {s.workload_id: s.reason for s in out.starts}
    assert reasons["j1"].startswith("started on h0[3] using "), reasons["j1"]
    assert reasons["j3"].startswith("started on h0[0-2] using "), reasons["j3"]
