"""Small builders for engine tests."""

from __future__ import annotations

from scheduler.core.engine import (
    BudgetNode,
    Host,
    Placement,
    Policy,
    RunningWorkload,
    Snapshot,
    Workload,
    plan,
)

H = 3600.0


def tree(**weights: float) -> BudgetNode:
    """A flat tree: one leaf per keyword argument."""
    return BudgetNode("root", children=tuple(BudgetNode(n, w) for n, w in weights.items()))


def hosts(n: int, gpus: int = 8, unhealthy: tuple[int, ...] = ()) -> list[Host]:
    return [Host(f"h{i}", gpus, healthy=i not in unhealthy) for i in range(n)]


def job(
    jid: str,
    project: str,
    gpus: int = 1,
    *,
    minrt: float = H,
    submit: float = 0.0,
    prio: int = 0,
    resumable: bool = True,
) -> Workload:
    return Workload(jid, project, gpus, submit, minrt, resumable, prio)


def run(
    w: Workload,
    host: str,
    idx: tuple[int, ...] | list[tuple[str, tuple[int, ...]]],
    started: float,
    ckpt: float | None = None,
) -> RunningWorkload:
    if isinstance(idx, list):
        pls = tuple(Placement(h, i) for h, i in idx)
    else:
        pls = (Placement(host, tuple(idx)),)
    return RunningWorkload(w, pls, started, w.min_runtime_s > 0, ckpt)


def pending(*jobs: Workload) -> dict[str, list[Workload]]:
    out: dict[str, list[Workload]] = {}
    for j in jobs:
        out.setdefault(j.project, []).append(j)
    for lst in out.values():
        lst.sort(key=lambda w: (-w.priority, w.submit_s, w.id))
    return out


def snap(hs, running, pend, tr, usage=None) -> Snapshot:
    return Snapshot(hosts=hs, running=list(running), pending=pend, tree=tr, usage=usage or {})


def cycle(s: Snapshot, now: float = 100 * H, **policy):
    """One cycle. These unit tests pin one rule each on tiny clusters, so the adaptive
    short-job reserve (on by default) is off unless a test asks for it; its own tests
    (`test_short_reserve*.py`) and the property tests run the default policy. The share
    floor (on by default) is off too unless a test asks for it (`test_share_floor.py`), and
    so is consolidation (on by default; `test_consolidate.py`)."""
    policy.setdefault("short_reserve_auto", False)
    policy.setdefault("share_floor", False)
    policy.setdefault("consolidate", False)
    return plan(s, Policy(**policy), now)


def gpus_of(start) -> set[tuple[str, int]]:
    return {(p.host, i) for p in start.placements for i in p.gpu_indices}


def apply_plan(result, running: dict, waiting: dict, now: float) -> None:
    """Apply a cycle's stops then starts to a test's running/waiting state, as a caller does."""
    for st in result.stops:
        rw = running.pop(st.workload_id)
        if st.requeue:
            waiting[rw.workload.project].append(rw.workload)
            waiting[rw.workload.project].sort(key=lambda w: (-w.priority, w.submit_s, w.id))
    by_id = {w.id: w for v in waiting.values() for w in v}
    for st in result.starts:
        w = by_id[st.workload_id]
        waiting[w.project].remove(w)
        running[w.id] = RunningWorkload(w, st.placements, now, st.allocated, None)
