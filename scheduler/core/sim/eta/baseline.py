"""The baseline estimate: Slurm backfill style (`baseline_starts`); see the package
docstring."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace

from scheduler.core.engine import EngineState, plan
from scheduler.core.engine.types import Placement, Policy, Snapshot
from scheduler.core.sim.eta.runtimes import Remaining


def baseline_starts(
    snapshot: Snapshot, policy: Policy, now: float, remaining: Remaining
) -> dict[str, float]:
    """Slurm backfill-style estimates: the engine's queue order (its plan at `now`,
    whose starts count as starting now), each job booked on the GPUs that free up
    first given the running jobs' expected ends and the bookings ahead of it."""
    result = plan(snapshot, replace(policy, explain_queue=True), now, EngineState())
    healthy = {h.name: h.gpus for h in snapshot.hosts if h.healthy}
    avail: dict[str, list[float]] = {h: [now] * g for h, g in healthy.items()}

    def book(placements: Iterable[Placement], end: float) -> None:
        for pl in placements:
            slots = avail.get(pl.host)
            if slots is not None:
                for g in pl.gpu_indices:
                    if 0 <= g < len(slots):
                        slots[g] = max(slots[g], end)

    stopped = {s.workload_id for s in result.stops}
    for rw in snapshot.running:
        if rw.workload.id not in stopped:
            elapsed = max(0.0, now - rw.started_s)
            book(rw.placements, now + max(0.0, remaining(rw.workload, elapsed)))
    by_id = {w.id: w for v in snapshot.pending.values() for w in v}
    out: dict[str, float] = {}
    for st in result.starts:
        w = by_id.get(st.workload_id)
        if w is not None:
            out[w.id] = now
            book(st.placements, now + max(0.0, remaining(w, 0.0)))
    for slots in avail.values():  # from here on only the counts per time matter
        slots.sort()
    max_host = max(healthy.values(), default=0)
    for entry in sorted(result.queue, key=lambda e: e.position):
        w = by_id.get(entry.workload_id)
        if w is None or w.id in out:
            continue
        dur = max(0.0, remaining(w, 0.0))
        if w.gpus <= max_host:
            best: tuple[float, str] | None = None
            k = w.gpus - 1
            for h, slots in avail.items():  # each host's slots stay sorted
                if len(slots) > k and (best is None or slots[k] < best[0]):
                    best = (slots[k], h)
            if best is None:
                continue
            at, h = best
            slots = avail[h]
            slots[: w.gpus] = [at + dur] * w.gpus
            slots.sort()
        else:
            if not max_host:
                continue
            k = w.gpus // max_host
            whole = sorted((max(s), h) for h, s in avail.items() if len(s) == max_host)
            if w.gpus % max_host or k > len(whole):
                continue
            at = whole[k - 1][0]
            for _, h in whole[:k]:
                avail[h] = [at + dur] * max_host
        out[w.id] = max(now, at)
    return out
