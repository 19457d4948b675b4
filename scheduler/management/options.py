"""Command-line options shared by `cluster_add` and `cluster_set`: the scheduling policy.

`cluster_add` gives them defaults (a new cluster's policy); in `cluster_set` an option
left out leaves that field as it is."""

from __future__ import annotations

from typing import Any

from django.core.management.base import CommandError

from scheduler.core.durations import parse_duration


def duration_option(text: str, option: str) -> int:
    """Seconds of a duration option ("8h", "15m", "3600"); CommandError naming the option."""
    try:
        return parse_duration(text)
    except ValueError as exc:
        raise CommandError(f"{option}: {exc}") from None


def add_policy_arguments(parser, *, defaults: bool) -> None:
    """--cycle-s, --grace-s, --max-min-runtime, --short-reserve-hosts, --short-job-max;
    with `defaults` those of a new cluster, otherwise None (not given)."""

    def default(value: Any) -> dict[str, Any]:
        return {"default": value if defaults else None}

    def shown(text: str) -> str:
        return f" ({text})" if defaults else ""

    parser.add_argument(
        "--cycle-s",
        type=int,
        help="seconds between scheduling cycles" + shown("10"),
        **default(10),
    )
    parser.add_argument(
        "--grace-s",
        type=int,
        help="seconds a stopped job has to exit" + shown("30"),
        **default(30),
    )
    parser.add_argument(
        "--max-min-runtime",
        help="cap on the minimum runtime a job may declare, e.g. 8h, 90m, 3600" + shown("8h"),
        **default("8h"),
    )
    parser.add_argument(
        "--short-reserve-hosts",
        type=int,
        help="hosts held at least for jobs with a short minimum runtime and unallocated "
        "backfill, on top of the adaptive short-job reserve (ALLOT_SHORT_RESERVE_AUTO, on "
        "by default)" + shown("0: none beyond it"),
        **default(0),
    )
    parser.add_argument(
        "--short-job-max",
        help="the longest minimum runtime a job may declare to start on those hosts" + shown("15m"),
        **default("15m"),
    )


def policy_options(options: dict[str, Any]) -> dict[str, Any]:
    """The policy fields of the options `add_policy_arguments` added that were given
    (durations in seconds)."""
    policy: dict[str, Any] = {
        "cycle_s": options["cycle_s"],
        "grace_s": options["grace_s"],
        "short_reserve_hosts": options["short_reserve_hosts"],
    }
    if options["max_min_runtime"] is not None:
        policy["max_min_runtime_s"] = duration_option(
            options["max_min_runtime"], "--max-min-runtime"
        )
    if options["short_job_max"] is not None:
        policy["short_job_max_s"] = duration_option(options["short_job_max"], "--short-job-max")
    return {name: value for name, value in policy.items() if value is not None}
