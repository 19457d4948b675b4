"""The explained queue (`ExplainedQueue`): stored as per-project blocks, read as a plain
sequence of `QueueEntry` with positions 1, 2, ...; `columns()` gives the same entries in
bulk, as the live worker stores them."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from scheduler.core.engine import ExplainedQueue, Host, Policy, QueueBlock, QueueEntry, plan

from .helpers import job, snap, tree


@st.composite
def _blocks(draw: st.DrawFn) -> list[QueueBlock]:
    blocks = []
    n = 0
    for _ in range(draw(st.integers(0, 6))):
        k = draw(st.integers(0, 5))  # empty blocks are dropped
        ids = [f"j{n + i}" for i in range(k)]
        n += k
        project = draw(st.sampled_from(["a", "b", "c"]))
        shared = draw(st.booleans())
        reason: str | list[str] = (
            f"why {project}" if shared else [f"why {project} {i}" for i in ids]
        )
        blocks.append(
            QueueBlock(project, draw(st.integers(1, 3)), draw(st.floats(0, 1)), ids, reason)
        )
    return blocks


def _expanded(blocks: list[QueueBlock]) -> list[QueueEntry]:
    """The entries the blocks stand for, written out plainly."""
    out = []
    for b in blocks:
        for i, wid in enumerate(b.workload_ids):
            reason = b.reason if isinstance(b.reason, str) else b.reason[i]
            out.append(QueueEntry(wid, b.project, len(out) + 1, b.project_rank, b.metric, reason))
    return out


@given(_blocks())
def test_a_queue_reads_as_its_entries_in_every_way(blocks: list[QueueBlock]) -> None:
    q = ExplainedQueue(blocks)
    entries = _expanded(blocks)
    assert len(q) == len(entries)
    assert list(q) == entries
    assert [q[i] for i in range(len(q))] == entries
    assert [q[-i] for i in range(1, len(q) + 1)] == entries[::-1]
    assert q[1:3] == tuple(entries[1:3])
    assert q == entries and q == tuple(entries) and entries == list(q)
    assert hash(q) == hash(tuple(entries))
    assert ExplainedQueue.of(entries) == q
    ids, projects, ranks, metrics, reasons = q.columns()
    assert list(zip(ids, projects, range(1, len(q) + 1), ranks, metrics, reasons, strict=True)) == [
        tuple(e) for e in entries
    ]


def test_out_of_range_index_and_inconsistent_blocks_are_refused() -> None:
    q = ExplainedQueue([QueueBlock("a", 1, 0.5, ["x", "y"], "why")])
    with pytest.raises(IndexError):
        q[2]
    with pytest.raises(IndexError):
        q[-3]
    assert q != ExplainedQueue([QueueBlock("a", 1, 0.5, ["x", "z"], "why")])
    assert q != [QueueEntry("x", "a", 1, 1, 0.5, "why")]
    with pytest.raises(ValueError, match="one reason per job"):
        ExplainedQueue([QueueBlock("a", 1, 0.5, ["x", "y"], ["only one"])])
    with pytest.raises(ValueError, match="position 2, not 1"):
        ExplainedQueue.of([QueueEntry("x", "a", 2, 1, 0.5, "why")])


def test_of_groups_consecutive_entries_of_one_project_into_one_block() -> None:
    entries = [
        QueueEntry("x", "a", 1, 1, 0.5, "r1"),
        QueueEntry("y", "a", 2, 1, 0.5, "r2"),
        QueueEntry("z", "b", 3, 2, 0.2, "r3"),
        QueueEntry("w", "a", 4, 1, 0.5, "r4"),
    ]
    q = ExplainedQueue.of(entries)
    assert [b.workload_ids for b in q.blocks] == [["x", "y"], ["z"], ["w"]]
    assert list(q) == entries


def test_the_engine_queue_splits_each_project_into_allocated_then_unallocated_jobs() -> None:
    """Blocks follow the queue order: every project's allocated jobs (project order),
    then every project's unallocated ones; a project with both has two blocks."""
    hosts = (Host("h0", 1),)
    pending = {
        "a": [job("a1", "a", 1), job("a2", "a", 1, minrt=0), job("a3", "a", 1)],
        "b": [job("b1", "b", 1, minrt=0), job("b2", "b", 1)],
    }
    s = snap(hosts, [], pending, tree(a=1, b=1), {"a": 10.0, "b": 0.0})
    out = plan(s, Policy(), 0.0)
    started = {st.workload_id for st in out.starts}
    assert started == {"b2"}  # b ranks first (no usage); one GPU
    assert [q.workload_id for q in out.queue] == ["a1", "a3", "b1", "a2"]
    assert [(b.project, list(b.workload_ids)) for b in out.queue.blocks] == [
        ("a", ["a1", "a3"]),
        ("b", ["b1"]),
        ("a", ["a2"]),
    ]
