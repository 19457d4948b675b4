"""What a request to the simulated cluster may ask: the job states, the cluster's
defaults and limits, the field checks, and `SimError` for a refusal."""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from typing import Any

ACTIVE_STATES = ("starting", "running", "stopping")
ENDED_STATES = ("succeeded", "failed", "stopped", "cancelled", "lost")
ADMIN_HEALTH = ("healthy", "draining", "down")
FORGOTTEN_KEPT_S = 30 * 86400  # how long a forgotten attempt id still blocks a restart
FORGET_EVERY_S = 1.0
NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$")

DEFAULTS = {
    "speed": 1.0,  # simulated seconds per wall second
    "start_delay_s": 1.0,  # simulated: accepted -> running
    "exit_delay_s": 5.0,  # simulated: stop asked -> exited (bounded by the grace period)
    # wall seconds an end is reported after it was first reported (twice Slurm's default
    # MinJobAge): every scheduling cycle lists them, so more costs every cycle
    "retention_s": 600.0,
    "max_ended": 10_000,  # and at most this many ended jobs
}
LIMITS = {
    "speed": (1e-3, 1e6),
    "start_delay_s": (0.0, 86400.0),
    "exit_delay_s": (0.0, 86400.0),
    "retention_s": (1.0, 30 * 86400.0),
    "max_ended": (1, 10_000_000),
}


class SimError(Exception):
    """A refused request: HTTP `status`, a stable `code` and a message for people."""

    def __init__(self, status: int, code: str, detail: str) -> None:
        super().__init__(detail)
        self.status = status
        self.code = code
        self.detail = detail


def _bad(field: str, message: str) -> SimError:
    return SimError(400, "invalid", f"{field}: {message}")


def _number(body: Mapping[str, Any], field: str, default: Any, low: float, high: float) -> Any:
    value = body.get(field, default)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise _bad(field, f"must be a number, got {value!r}")
    if not low <= value <= high:
        raise _bad(field, f"must be between {low:g} and {high:g}, got {value!r}")
    return value


def _integer(body: Mapping[str, Any], field: str, default: Any, low: int, high: int) -> Any:
    value = body.get(field, default)
    if isinstance(value, bool) or not isinstance(value, int):
        raise _bad(field, f"must be an integer, got {value!r}")
    if not low <= value <= high:
        raise _bad(field, f"must be between {low} and {high}, got {value}")
    return value


def _text(body: Mapping[str, Any], field: str, default: str = "", required: bool = False) -> str:
    value = body.get(field, default)
    if not isinstance(value, str) or (required and not value.strip()):
        raise _bad(field, "must be a non-empty string" if required else "must be a string")
    if len(value) > 1000:
        raise _bad(field, "must be at most 1000 characters")
    return value


def _placement_shape(item: Any, field: str, seen_hosts: set[str]) -> tuple[str, list[int]]:
    """One placement's host name (added to `seen_hosts`, once only) and GPU indices,
    checked for shape only (the caller checks them against the cluster)."""
    if not isinstance(item, dict):
        raise _bad(field, "must be an object with host and gpu_indices")
    host_name = _text(item, "host", required=True)
    if host_name in seen_hosts:
        raise _bad(field, f"host {host_name!r} appears twice")
    seen_hosts.add(host_name)
    indices = item.get("gpu_indices")
    if (
        not isinstance(indices, list)
        or not indices
        or not all(isinstance(g, int) and not isinstance(g, bool) for g in indices)
    ):
        raise _bad(f"{field}.gpu_indices", "must be a non-empty list of integers")
    return host_name, indices
