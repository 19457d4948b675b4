"""The usage ledger: hourly rollups of what each cluster's GPUs did and what each
project asked for, was entitled to and received.

Rows are computed from attempts, jobs and host events by `ledger.services` with the
pure `ledger.accounting` code the simulator uses, so live and simulated figures mean
the same thing. An hour is `[hour, hour + 1 h)` in UTC; all quantities are GPU-hours.
A rollup is recomputed while its hour can still change (it is derived data, not audit:
the attempts and events it is made of are the append-only record).
"""

from __future__ import annotations

from django.db import models

from budgets.models import BudgetNode
from scheduler.models import Cluster


class ProjectHour(models.Model):
    """One project's hour on one cluster (SPEC 1.2, 1.6).

    - allocated_gpu_h: GPU-time of the project's allocated runs (charged to its budget);
      this is also what it was *delivered*.
    - unallocated_gpu_h: GPU-time of its unallocated runs (free, preemptible).
    - demand_gpu_h: GPU-time of its allocated jobs present (pending or running).
    - entitled_gpu_h: min(entitled share x healthy capacity, demand).
    """

    cluster = models.ForeignKey(Cluster, on_delete=models.CASCADE, related_name="+")
    project = models.ForeignKey(BudgetNode, on_delete=models.PROTECT, related_name="+")
    hour = models.DateTimeField()
    allocated_gpu_h = models.FloatField(default=0.0)
    unallocated_gpu_h = models.FloatField(default=0.0)
    demand_gpu_h = models.FloatField(default=0.0)
    entitled_gpu_h = models.FloatField(default=0.0)
    # GPU-time with a known utilization, and that time x utilization (ledger.utilization)
    measured_gpu_h = models.FloatField(default=0.0)
    utilized_gpu_h = models.FloatField(default=0.0)

    class Meta:
        ordering = ["cluster", "hour", "project"]
        constraints = [
            models.UniqueConstraint(
                fields=["cluster", "project", "hour"], name="project_hour_unique"
            )
        ]
        indexes = [models.Index(fields=["cluster", "hour"], name="project_hour_cluster_hour")]

    def __str__(self) -> str:
        return f"{self.cluster_id}/{self.project_id}@{self.hour:%Y-%m-%d %H}:00"

    @property
    def delivered_gpu_h(self) -> float:
        return self.allocated_gpu_h


class ClusterHour(models.Model):
    """One cluster's hour split into the occupancy buckets of `sreport cluster
    utilization`, the way SPEC 1.2 needs them. The buckets sum to `capacity_gpu_h`
    (every GPU of every host the cluster has, whatever its health):

    - within_entitlement_gpu_h: allocated runs up to each project's entitlement;
    - borrowed_gpu_h: allocated runs above the project's entitlement;
    - unallocated_gpu_h: unallocated runs;
    - idle_demand_gpu_h: healthy GPUs idle while allocated work waited;
    - idle_gpu_h: healthy GPUs idle with no work waiting;
    - draining_gpu_h: idle GPUs of draining hosts;
    - down_gpu_h: GPUs of hosts that were down.
    """

    cluster = models.ForeignKey(Cluster, on_delete=models.CASCADE, related_name="+")
    hour = models.DateTimeField()
    capacity_gpu_h = models.FloatField(default=0.0)
    healthy_gpu_h = models.FloatField(default=0.0)
    within_entitlement_gpu_h = models.FloatField(default=0.0)
    borrowed_gpu_h = models.FloatField(default=0.0)
    unallocated_gpu_h = models.FloatField(default=0.0)
    idle_demand_gpu_h = models.FloatField(default=0.0)
    idle_gpu_h = models.FloatField(default=0.0)
    draining_gpu_h = models.FloatField(default=0.0)
    down_gpu_h = models.FloatField(default=0.0)
    computed_at = models.DateTimeField()

    BUCKETS = (
        "within_entitlement_gpu_h",
        "borrowed_gpu_h",
        "unallocated_gpu_h",
        "idle_demand_gpu_h",
        "idle_gpu_h",
        "draining_gpu_h",
        "down_gpu_h",
    )

    class Meta:
        ordering = ["cluster", "hour"]
        constraints = [
            models.UniqueConstraint(fields=["cluster", "hour"], name="cluster_hour_unique")
        ]

    def __str__(self) -> str:
        return f"{self.cluster_id}@{self.hour:%Y-%m-%d %H}:00"
