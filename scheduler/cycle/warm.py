"""What a worker keeps per cluster between cycles, and the plan made with it."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field, replace

from scheduler.core.engine import CyclePlan, EngineState, plan
from scheduler.selectors.snapshot import ClusterSnapshot, SnapshotCache


@dataclass
class ClusterWarm:
    """The engine objects a worker can reuse while nothing they depend on changed
    (dropped after an error), and what it last told the cluster and stored."""

    hosts: tuple = ()
    engine: EngineState = field(default_factory=EngineState)
    engine_key: tuple | None = None
    # attempt id -> (when this worker last sent its stop, whether with no grace left):
    # a stop is resent when this worker has not sent it yet (a crash may have lost
    # it), once its grace is over (forced), and every STOP_RESEND_S.
    stops_sent: dict[str, tuple[dt.datetime, bool]] = field(default_factory=dict)
    queue_json: str = ""  # the queue entries this worker stored last
    queue_cycle: int | None = None  # and the cycle that stored them
    snapshot_cache: SnapshotCache = field(default_factory=SnapshotCache)


def warm_plan(cs: ClusterSnapshot, warm: ClusterWarm) -> CyclePlan:
    """plan() with the worker's warm `EngineState` of the cluster, reset whenever the
    tree version, the hosts or the policy changed (its caches would only hold objects
    that no longer come back). The hosts tuple is reused while unchanged, so the
    engine's layout cache hits (the snapshot cache keeps the tree and running work)."""
    snap = cs.snapshot
    if warm.hosts != snap.hosts:
        warm.hosts = tuple(snap.hosts)
    key = (cs.tree_version, warm.hosts, cs.policy)
    if warm.engine_key != key:
        warm.engine.reset()
        warm.engine_key = key
    return plan(replace(snap, hosts=warm.hosts), cs.policy, cs.now, state=warm.engine)
