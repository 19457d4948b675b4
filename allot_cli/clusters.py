"""`allot clusters` and `allot hosts` (like sinfo -N): the clusters, their hosts and
health."""

from typing import Any

from allot_cli import render
from allot_cli.app import Context, Parser, api, cluster_option, command, json_flag


def add_clusters(commands: Any) -> Parser:
    parser = command(commands, clusters)
    json_flag(parser)
    return parser


def add_hosts(commands: Any) -> Parser:
    parser = command(commands, hosts)
    cluster_option(parser)
    json_flag(parser)
    return parser


def clusters(ctx: Context, as_json: bool = False) -> None:
    """Clusters with their GPUs, hosts by health and jobs."""
    rows = api(ctx).get("clusters/")
    if as_json:
        render.print_json(rows)
        return
    render.table(
        [
            "NAME",
            "ADAPTER",
            "HOSTS",
            "GPUS",
            "HEALTHY",
            "DRAIN",
            "DOWN",
            "PEND",
            "RUN",
            "LAST_CYCLE",
        ],
        (
            [
                c["name"],
                c["adapter"],
                c["hosts"],
                c["gpus"],
                c["healthy_gpus"],
                c["draining_hosts"],
                c["down_hosts"],
                c["pending_jobs"],
                c["running_jobs"],
                render.ago(c["last_cycle"]["started_at"]) if c["last_cycle"] else "never",
            ]
            for c in rows
        ),
        crop=("NAME",),
    )


def hosts(ctx: Context, cluster: str | None = None, as_json: bool = False) -> None:
    """Hosts with their health and GPUs in use (like sinfo -N)."""
    rows = api(ctx).get_all("hosts/", cluster=cluster)
    if as_json:
        render.print_json(rows)
        return
    render.table(
        ["CLUSTER", "HOST", "GPUS", "IN_USE", "HEALTH", "SINCE", "REASON"],
        (
            [
                h["cluster_name"],
                h["name"],
                h["gpus"],
                h["gpus_in_use"],
                h["health"],
                render.when(h["health_changed_at"]),
                h["health_reason"],
            ]
            for h in rows
        ),
        wrap=("REASON",),
    )
