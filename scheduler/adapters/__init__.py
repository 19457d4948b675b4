"""Cluster adapters (see `base` for the protocol).

`for_cluster(cluster)` returns a new adapter for a `scheduler.models.Cluster` row,
from the factory its kind names in `ADAPTER_FACTORIES`.
"""

from __future__ import annotations

from collections.abc import Callable
from importlib import import_module
from typing import Any

from scheduler.adapters.base import (
    AdapterError,
    AdapterUnavailable,
    ClusterAdapter,
    ClusterHost,
    ClusterJob,
    ClusterJobState,
    ClusterPlacement,
    HostHealthState,
    StartRequest,
)

__all__ = [
    "AdapterError",
    "AdapterUnavailable",
    "ClusterAdapter",
    "ClusterHost",
    "ClusterJob",
    "ClusterJobState",
    "ClusterPlacement",
    "HostHealthState",
    "StartRequest",
    "for_cluster",
]


# Adapter kind -> "module:factory"; imported on first use so that a kind's client
# libraries are needed only where that kind runs. A factory takes the `Cluster` row.
ADAPTER_FACTORIES: dict[str, str] = {
    "simulated": "scheduler.adapters.simulated:adapter_for_cluster",
    "slurm": "scheduler.adapters.slurm:adapter_for_cluster",
}


def for_cluster(cluster: Any) -> ClusterAdapter:
    """A new adapter for a `Cluster` row (by its `adapter` kind)."""
    target = ADAPTER_FACTORIES.get(cluster.adapter)
    if target is None:
        raise AdapterUnavailable(f"there is no adapter of kind {cluster.adapter!r}")
    module_name, _, attr = target.partition(":")
    factory: Callable[[Any], ClusterAdapter] = getattr(import_module(module_name), attr)
    return factory(cluster)
