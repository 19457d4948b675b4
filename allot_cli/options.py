"""Checks of command-line values before they go to the server: durations, the cluster
named (or the only one) and a minimum runtime within that cluster's cap."""

from __future__ import annotations

from typing import Any

from allot_cli import render
from allot_cli.client import EXIT_BAD_INPUT, Api, CliError
from allot_common.durations import parse_duration


def duration_s(value: str, *, flag: str) -> int:
    """'15m', '1h30m', '8h', '1:30:00' or plain seconds -> whole seconds >= 0."""
    try:
        return parse_duration(value)
    except ValueError as exc:
        raise CliError(str(exc), code=EXIT_BAD_INPUT).with_flag(flag) from None


def only_cluster(client: Api, given: str | None) -> str:
    if given:
        return given
    return cluster_row(client, None)["name"]


def cluster_row(client: Api, given: str | None) -> dict[str, Any]:
    """The cluster named (by name or id) or, with none named, the only one."""
    clusters = client.get("clusters/")
    names = ", ".join(c["name"] for c in clusters) or "none"
    if given:
        for c in clusters:
            if given in (c["name"], str(c["id"])):
                return c
        raise CliError(
            f"there is no cluster {given!r} (clusters: {names})",
            code=EXIT_BAD_INPUT,
            field="cluster",
        )
    if len(clusters) == 1:
        return clusters[0]
    raise CliError(f"choose a cluster with --cluster (clusters: {names})", code=EXIT_BAD_INPUT)


def capped_min_runtime(value: str, cluster: dict[str, Any]) -> int:
    """--min-runtime in seconds, within the cluster's cap (said in hours, not seconds)."""
    seconds = duration_s(value, flag="--min-runtime")
    cap = (cluster.get("policy") or {}).get("max_min_runtime_s")
    if cap is not None and seconds > cap:
        raise CliError(
            f"min runtime {value} is {render.span(seconds)}; cluster {cluster['name']!r} "
            f"protects a job for at most {render.span(cap)} (use -t {render.seconds(cap)} or "
            "less, or 0 for unallocated work)",
            code=EXIT_BAD_INPUT,
            field="min_runtime_s",
        )
    return seconds
