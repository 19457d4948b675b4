"""What provisioning a cluster works on, shared by `clusters` (which validates and
stores) and the adapters' provisioning services (`slurm`): the validated draft and the
error when the cluster cannot be reached."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from config.errors import ApplicationError


class ClusterUnreachable(ApplicationError):
    """The cluster (or the simulated cluster process) could not be reached."""

    status_code = 503
    code = "cluster_unreachable"


@dataclass(frozen=True)
class ClusterDraft:
    """A validated cluster about to be provisioned and stored."""

    name: str
    adapter: str
    host_count: int | None
    gpus_per_host: int | None
    adapter_url: str
    adapter_options: dict[str, Any] = field(default_factory=dict)
    reset: bool = False  # forget what the cluster runs (a simulated cluster's jobs)
