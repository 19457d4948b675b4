"""Drain: unhealthy hosts take no new work and are emptied without a human.

Decides which jobs on unhealthy hosts stop now: unallocated ones at once, allocated
ones once their (capped) min runtime is over; and which unhealthy hosts are empty,
hence ready for repair.
"""

from __future__ import annotations

from allot_common.figures import runtime_text
from scheduler.core.engine.cluster import ClusterState, Decisions
from scheduler.core.engine.runs import protected_until, protection_s
from scheduler.core.engine.types import HostReady, StopReason

__all__ = ["drain"]


def drain(cluster: ClusterState, decisions: Decisions, cap: float, now: float) -> None:
    """Stop what may stop on unhealthy hosts; report the unhealthy hosts left empty."""
    healthy = cluster.healthy
    unhealthy = [h for h, ok in enumerate(healthy) if not ok]
    if not unhealthy:
        return
    jobs_left = dict.fromkeys(unhealthy, 0)
    for rw, host_masks, _, _, _ in cluster.on_unhealthy:
        w = rw.workload
        bad_hosts = [cluster.hosts[h].name for h, _ in host_masks if not healthy[h]]
        if protected_until(rw, cap) <= now:
            if rw.allocated:
                why = (
                    f"drained: host {', '.join(bad_hosts)} is unhealthy and the job's "
                    f"{runtime_text(protection_s(w, cap))} protected minimum runtime is over"
                )
            else:
                why = (
                    f"drained: host {', '.join(bad_hosts)} is unhealthy; unallocated jobs "
                    "are stopped at once"
                )
            decisions.stop(w, StopReason.DRAIN, why, None)
            for h, m in host_masks:
                if healthy[h]:
                    cluster.release(h, m)
        else:
            for h, _ in host_masks:
                if not healthy[h]:
                    jobs_left[h] += 1
    for h in unhealthy:
        if not jobs_left[h]:
            name = cluster.hosts[h].name
            decisions.ready.append(
                HostReady(host=name, reason=f"host {name} is unhealthy and empty: ready for repair")
            )
