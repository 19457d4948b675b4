"""Slurm clusters in Allot: adding one, and checking its accounts against the budget tree.

A Slurm cluster is a `Cluster` row with `adapter="slurm"` and
`adapter_options={"slurm_conf": PATH, ...}` (see `scheduler.adapters.slurm`); its
hosts are Slurm's nodes with GPUs (`slurm_provision`, used by
`scheduler.services.clusters.cluster_create` and so by `manage.py cluster_add
--adapter slurm`). Projects map to Slurm accounts by name: the project's slug (the
last part of its path) is the `--account` of its jobs.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from allot_common.durations import parse_duration
from budgets.selectors import tree_index
from config.errors import ValidationFailed
from scheduler.adapters import AdapterError, AdapterUnavailable, ClusterHost
from scheduler.adapters.slurm import SlurmAdapter, SlurmClient, adapter_for_cluster
from scheduler.models import Cluster
from scheduler.services.cluster_drafts import ClusterDraft, ClusterUnreachable

ADAPTER_OPTION_KEYS = (
    "slurm_conf",
    "bin_dir",
    "timeout_s",
    "partition",
    "workdir",
    "output",
    "use_accounts",
    "sbatch_min_runtime_s",  # governed sbatch without --time-min (slurm_adoption)
)


# the options with a flag of their own in `cluster_add`
OWN_FLAG_OPTIONS = {"slurm_conf": "--slurm-conf", "partition": "--partition"}
_ON = ("on", "true", "yes", "1")
_OFF = ("off", "false", "no", "0")


def slurm_option_value(key: str, text: str) -> Any:
    """An adapter option given as text (`cluster_add --slurm-option KEY=VALUE`), typed as
    the adapter reads it: `sbatch_min_runtime_s` a duration ("30m"), `timeout_s` seconds
    (0-600], `use_accounts` on or off, `bin_dir` and `workdir` absolute paths, `output` a
    file name pattern. ValidationFailed naming the option."""
    field_name = f"adapter_options.{key}"
    if key in OWN_FLAG_OPTIONS:
        raise ValidationFailed(f"{key}: give it with {OWN_FLAG_OPTIONS[key]}", field=field_name)
    if key not in ADAPTER_OPTION_KEYS:
        raise ValidationFailed(
            f"{key}: no such Slurm option (one of "
            f"{', '.join(k for k in ADAPTER_OPTION_KEYS if k not in OWN_FLAG_OPTIONS)})",
            field=field_name,
        )
    value = text.strip()
    try:
        if key == "sbatch_min_runtime_s":
            return parse_duration(value)
        if key == "timeout_s":
            seconds = float(value)
            if not 0 < seconds <= 600:
                raise ValueError(f"must be seconds > 0 and <= 600, got {text!r}")
            return seconds
        if key == "use_accounts":
            if value.lower() not in _ON + _OFF:
                raise ValueError(f"must be on or off, got {text!r}")
            return value.lower() in _ON
        if key in ("bin_dir", "workdir") and not value.startswith("/"):
            raise ValueError(f"must be an absolute path, got {text!r}")
        if not value:
            raise ValueError("must not be empty")
    except ValueError as exc:
        message = str(exc)
        if message.startswith("could not convert"):
            message = f"must be a number of seconds, got {text!r}"
        raise ValidationFailed(f"{key}: {message}", field=field_name) from None
    return value


def slurm_provision(draft: ClusterDraft) -> list[ClusterHost]:
    """The hosts of a Slurm cluster about to be added (`cluster_create(adapter="slurm",
    adapter_options={"slurm_conf": PATH, ...})`): Slurm's nodes with GPUs, with the
    health Slurm reports. Refuses unknown options, a missing slurm.conf, a host count
    (Slurm has the hosts) and a Slurm with no GPU node."""
    options = draft.adapter_options
    unknown = sorted(set(options) - set(ADAPTER_OPTION_KEYS))
    if unknown:
        raise ValidationFailed(
            f"adapter_options: unknown Slurm option(s) {', '.join(unknown)}",
            field="adapter_options",
        )
    if draft.host_count is not None:
        raise ValidationFailed(
            "hosts: a Slurm cluster's hosts are its nodes (leave it out)", field="hosts"
        )
    conf = options.get("slurm_conf")
    if not conf:
        raise ValidationFailed(
            "slurm_conf: none given (cluster_add --slurm-conf PATH, or SLURM_CONF)",
            field="slurm_conf",
        )
    if not Path(conf).is_file():
        raise ValidationFailed(
            f"slurm_conf: there is no Slurm configuration at {conf!r}", field="slurm_conf"
        )
    adapter = adapter_for_cluster(draft)
    try:
        hosts = adapter.hosts()
    except AdapterUnavailable as exc:
        raise ClusterUnreachable(
            f"slurm_conf: slurmctld cannot be reached ({exc})", field="slurm_conf"
        ) from None
    except AdapterError as exc:
        raise ValidationFailed(
            f"slurm_conf: Slurm could not be read ({exc})", field="slurm_conf"
        ) from None
    finally:
        adapter.close()
    if not hosts:
        raise ValidationFailed(
            "slurm_conf: Slurm reports no node with GPUs (gres gpu)", field="slurm_conf"
        )
    return hosts


@dataclass
class AccountsDrift:
    """Budget-tree projects against Slurm accounts (`slurm_accounts --check`)."""

    source: str  # where Slurm's accounts were read from
    accounts: set[str]
    projects: dict[str, list[str]]  # account name -> project paths mapping to it
    projects_without_account: list[str] = field(default_factory=list)
    accounts_without_project: list[str] = field(default_factory=list)
    shared_accounts: dict[str, list[str]] = field(default_factory=dict)  # two projects, one name

    @property
    def drift(self) -> bool:
        return bool(
            self.projects_without_account or self.accounts_without_project or self.shared_accounts
        )


def project_accounts() -> dict[str, list[str]]:
    """Slurm account name -> the budget tree's project paths using it
    (`TreeIndex.slurm_account`)."""
    index = tree_index()
    by_account: dict[str, list[str]] = defaultdict(list)
    for node_id in index.nodes:
        account = index.slurm_account(node_id)
        if account is not None:
            by_account[account].append(index.path(node_id))
    return {account: sorted(paths) for account, paths in sorted(by_account.items())}


def slurm_accounts_drift(
    *, cluster: Cluster | None = None, client: SlurmClient | None = None
) -> AccountsDrift:
    """Drift both ways between the budget tree's projects and Slurm's accounts."""
    if client is None:
        if cluster is None:
            raise ValidationFailed("Name a Slurm cluster.", field="cluster")
        adapter = adapter_for_cluster(cluster)
        assert isinstance(adapter, SlurmAdapter)
        client = adapter.client
    try:
        source, accounts = client.accounts()
    except AdapterError as exc:
        raise ValidationFailed(f"Slurm could not be read: {exc}", field="cluster") from exc
    projects = project_accounts()
    return AccountsDrift(
        source=source,
        accounts=accounts,
        projects=projects,
        projects_without_account=sorted(
            p for a, ps in projects.items() if a not in accounts for p in ps
        ),
        accounts_without_project=sorted(a for a in accounts if a not in projects),
        shared_accounts={a: ps for a, ps in projects.items() if len(ps) > 1},
    )
