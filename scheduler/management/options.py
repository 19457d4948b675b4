"""Command-line options shared by `cluster_add` and `cluster_set`: the scheduling policy.

`cluster_add` gives them defaults (a new cluster's policy); in `cluster_set` an option
left out leaves that field as it is."""

from __future__ import annotations

import re
from typing import Any

from django.core.management.base import CommandError

from allot_common.durations import parse_duration
from config.errors import ApplicationError
from scheduler.models import RESERVATION_ADMIT_DEFAULT_MIN

# The policy options of `cluster_add` and `cluster_set`, one per policy field: the option
# as the operator types it, and how its text becomes the field's value ("number": argparse
# gives an int; "switch": on/off; "duration": "3d", "15m", "3600", in seconds). The one
# table: the options' parsing (`policy_options`, `idle_options`, `cluster_set`'s
# --lookback and --half-life) and the refusals' wording (`refused`) both read it.
POLICY_OPTIONS: dict[str, tuple[str, str]] = {
    "cycle_s": ("--cycle-s", "number"),
    "grace_s": ("--grace-s", "number"),
    "max_min_runtime_s": ("--max-min-runtime", "duration"),
    "short_reserve_hosts": ("--short-reserve-hosts", "number"),
    "short_reserve_auto": ("--short-reserve-auto", "switch"),
    "share_floor": ("--share-floor", "switch"),
    "consolidate": ("--consolidate", "switch"),
    "reservation_admit_min": ("--reservation-admit-min", "number"),
    "short_job_max_s": ("--short-job-max", "duration"),
    "lookback_s": ("--lookback", "duration"),
    "half_life_s": ("--half-life", "duration"),
    "idle_reclaim": ("--idle-reclaim", "switch"),
    "idle_threshold_pct": ("--idle-threshold-pct", "number"),
    "idle_reclaim_after_s": ("--idle-after", "duration"),
    "idle_notify_owner": ("--idle-notify", "switch"),
}
# The fields `add_policy_arguments` and `add_idle_arguments` add options for, in order.
SHARED_POLICY_FIELDS = (
    "cycle_s",
    "grace_s",
    "short_reserve_hosts",
    "reservation_admit_min",
    "short_reserve_auto",
    "share_floor",
    "consolidate",
    "max_min_runtime_s",
    "short_job_max_s",
)
IDLE_FIELDS = ("idle_reclaim", "idle_threshold_pct", "idle_reclaim_after_s", "idle_notify_owner")
# The option (as typed) of each field the cluster services check, for their refusals.
FIELD_OPTIONS = {
    "name": "NAME",
    "adapter": "--adapter",
    "hosts": "--hosts",
    "gpus_per_host": "--gpus-per-host",
    "speed": "--speed",
    "adapter_url": "--url",
    "slurm_conf": "--slurm-conf",
    **{field: option for field, (option, _) in POLICY_OPTIONS.items()},
}
_DURATION_FIELDS = {field for field, (_, kind) in POLICY_OPTIONS.items() if kind == "duration"}
# Field names inside a message ("at least short_job_max_s"): the snake_case ones only, so
# that plain words ("name", "hosts") of a sentence stay as they are.
_FIELDS_IN_TEXT = re.compile(
    r"\b(" + "|".join(re.escape(f) for f in FIELD_OPTIONS if "_" in f) + r")\b"
)


def refused(exc: ApplicationError) -> CommandError:
    """The CommandError of a service's refusal, naming each field by its option as the
    operator typed it ("--half-life: ...", not "half_life_s: ...")."""
    message = exc.message
    field = exc.field or ""
    if field in FIELD_OPTIONS and message.startswith(f"{field}:"):
        message = FIELD_OPTIONS[field] + message[len(field) :]
        if field in _DURATION_FIELDS:
            message += " (seconds)"
    return CommandError(_FIELDS_IN_TEXT.sub(lambda m: FIELD_OPTIONS[m.group(1)], message))


def duration_option(text: str, option: str) -> int:
    """Seconds of a duration option ("8h", "15m", "3600"); CommandError naming the option."""
    try:
        return parse_duration(text)
    except ValueError as exc:
        raise CommandError(f"{option}: {exc}") from None


def add_policy_arguments(parser, *, defaults: bool) -> None:
    """--cycle-s, --grace-s, --max-min-runtime, --short-reserve-hosts, --short-reserve-auto,
    --share-floor, --consolidate, --reservation-admit-min, --short-job-max;
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
        "backfill, on top of the adaptive short-job reserve" + shown("0: none beyond it"),
        **default(0),
    )
    parser.add_argument(
        "--short-reserve-auto",
        choices=["on", "off"],
        help="the adaptive short-job reserve: hosts held for short jobs as the short work "
        "observed needs them; off: only --short-reserve-hosts" + shown("on"),
        **default("on"),
    )
    parser.add_argument(
        "--share-floor",
        choices=["on", "off"],
        help="the share floor: a project under its entitled share keeps its oldest jobs, up "
        "to that share, from the fair-share preemption of projects served clearly better; "
        "off: Fair Tree's rank alone decides" + shown("on"),
        **default("on"),
    )
    parser.add_argument(
        "--consolidate",
        choices=["on", "off"],
        help="consolidation: move a few resumable jobs past their protection to other hosts "
        "to free a block for a waiting job; off: never" + shown("on"),
        **default("on"),
    )
    parser.add_argument(
        "--reservation-admit-min",
        type=int,
        help="reservation admission: hosts held for a job waiting for work it may not preempt "
        "admit allocated jobs it may preempt whose protection ends within this many minutes; "
        "0: off, only unallocated backfill" + shown(str(RESERVATION_ADMIT_DEFAULT_MIN)),
        **default(RESERVATION_ADMIT_DEFAULT_MIN),
    )
    parser.add_argument(
        "--short-job-max",
        help="the longest minimum runtime a job may declare to start on those hosts" + shown("15m"),
        **default("15m"),
    )


def _on_off(text: str, option: str) -> bool:
    value = text.strip().lower()
    if value not in ("on", "off"):
        raise CommandError(f"{option}: must be on or off, got {text!r}")
    return value == "on"


def add_idle_arguments(parser) -> None:
    """--idle-reclaim, --idle-threshold-pct, --idle-after, --idle-notify (idle-GPU
    reclaim; left out: as they are)."""
    parser.add_argument(
        "--idle-reclaim",
        help="on: a job past its minimum runtime whose GPUs stay idle is preempted first "
        "when GPUs are needed; off: not",
    )
    parser.add_argument(
        "--idle-threshold-pct",
        type=int,
        help="GPU utilization (%%) below which a job's GPUs count as idle",
    )
    parser.add_argument(
        "--idle-after", help="how long GPUs must stay idle before they are reclaimed, e.g. 30m"
    )
    parser.add_argument(
        "--idle-notify", help="on: tell a job's owner when its idle GPUs are reclaimed; off: not"
    )


def option_dest(option: str) -> str:
    """The key of an option in the options argparse gives ("--idle-after": "idle_after")."""
    return option.removeprefix("--").replace("-", "_")


def given_policy(options: dict[str, Any], fields: tuple[str, ...]) -> dict[str, Any]:
    """The values of `fields` whose options were given (`POLICY_OPTIONS`: durations in
    seconds, switches True or False); CommandError naming the option when one cannot be
    read."""
    policy: dict[str, Any] = {}
    for field in fields:
        option, kind = POLICY_OPTIONS[field]
        value = options[option_dest(option)]
        if value is None:
            continue
        if kind == "duration":
            value = duration_option(value, option)
        elif kind == "switch":
            value = _on_off(value, option)
        policy[field] = value
    return policy


def idle_options(options: dict[str, Any]) -> dict[str, Any]:
    """The idle-reclaim policy fields of the options `add_idle_arguments` added that were
    given."""
    return given_policy(options, IDLE_FIELDS)


def policy_options(options: dict[str, Any]) -> dict[str, Any]:
    """The policy fields of the options `add_policy_arguments` added that were given
    (durations in seconds)."""
    return given_policy(options, SHARED_POLICY_FIELDS)
