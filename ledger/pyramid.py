"""The efficiency pyramid's lower three figures (pure: no Django), one function each
(docs/concepts.md#the-efficiency-pyramid); the top, utilization, is
`ledger.utilization.utilization`. Each is None (undefined, shown "–") when its
denominator is 0."""

from __future__ import annotations


def _share(part: float, whole: float) -> float | None:
    return part / whole if whole > 0 else None


def availability(healthy_gpu_h: float, capacity_gpu_h: float) -> float | None:
    """Healthy capacity / capacity."""
    return _share(healthy_gpu_h, capacity_gpu_h)


def occupancy(run_gpu_h: float, healthy_gpu_h: float) -> float | None:
    """GPU-time of runs (allocated and unallocated) / healthy capacity."""
    return _share(run_gpu_h, healthy_gpu_h)


def impact(within_entitlement_gpu_h: float, entitled_gpu_h: float) -> float | None:
    """Within-entitlement GPU-hours / demand-capped entitlement, summed over projects
    and hours."""
    return _share(within_entitlement_gpu_h, entitled_gpu_h)
