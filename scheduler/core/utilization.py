"""GPU utilization profiles of simulated work (pure: no Django, no I/O, no clocks).

The simulated cluster serves DCGM-exporter metrics from these profiles, and the
simulator and the tests compare against them, so all of them see the same numbers.
A profile is a name; every figure is a function of (profile, seconds since the run
started), in simulated seconds, and nothing else:

| profile | what it resembles | GPU utilization |
|---|---|---|
| `training` | steady training | 20% while loading (first 60 s), then 92% with a data-loading dip to 45% for 60 s every 600 s |
| `sweep` | hyper-parameter sweeps, batch | a triangle wave between 45% and 75% (period 300 s) |
| `inference` | serving | 35% |
| `interactive` | notebooks, debug sessions | idle (0%) but a 70% burst of 120 s every 1800 s (from 300 s on) |
| `hung` | a job stuck on a lock or a dead peer | 0% |
| `idle` | a GPU no job holds | 0% |

API (kept small on purpose; the reclaim policy and the simulator may use it):

- `profile_for(kind=..., spec=..., key=...) -> str`: the profile of a job: the spec's
  `utilization_profile` (or `simulate.profile`) when it names one, else from the job's
  kind; one training-like job in 20 (chosen by `key`, e.g. the job's name, stably) is
  `hung`.
- `utilization_at(profile, seconds_since_start) -> float`: GPU utilization, 0-100
  (`DCGM_FI_DEV_GPU_UTIL`).
- `sm_active_at(profile, seconds_since_start) -> float`: 0-1 (`DCGM_FI_PROF_SM_ACTIVE`).
- `memory_used_mib(profile) -> float`: frame buffer used (`DCGM_FI_DEV_FB_USED`).
- `mean_utilization(profile, start_s, end_s, step_s=1) -> float`: the mean of
  `utilization_at` over `[start_s, end_s]` (sampled every `step_s` seconds).
"""

from __future__ import annotations

import zlib
from collections.abc import Mapping
from typing import Any

TRAINING = "training"
SWEEP = "sweep"
INFERENCE = "inference"
INTERACTIVE = "interactive"
HUNG = "hung"
IDLE = "idle"
PROFILES: tuple[str, ...] = (TRAINING, SWEEP, INFERENCE, INTERACTIVE, HUNG, IDLE)

# a job's kind -> its profile (unknown kinds train)
KIND_PROFILES: Mapping[str, str] = {
    "training": TRAINING,
    "batch": SWEEP,
    "sweep": SWEEP,
    "inference": INFERENCE,
    "interactive": INTERACTIVE,
    "debug": INTERACTIVE,
}
HUNG_ONE_IN = 20  # one training-like job in this many hangs
GPU_MEMORY_MIB = 81_559.0  # an 80 GB H100's frame buffer as DCGM reports it
_MEMORY_SHARE: Mapping[str, float] = {
    TRAINING: 0.86,
    SWEEP: 0.55,
    INFERENCE: 0.40,
    INTERACTIVE: 0.12,
    HUNG: 0.70,  # a hung job keeps its memory
    IDLE: 0.0,
}


def profile_for(*, kind: str = "", spec: Mapping[str, Any] | None = None, key: str = "") -> str:
    """The utilization profile of a job (see the module docstring)."""
    spec = spec or {}
    simulate = spec.get("simulate")
    for named in (
        spec.get("utilization_profile"),
        simulate.get("profile") if isinstance(simulate, Mapping) else None,
    ):
        if isinstance(named, str) and named in PROFILES:
            return named
    profile = KIND_PROFILES.get(kind, TRAINING)
    if profile in (TRAINING, SWEEP) and key and zlib.crc32(key.encode()) % HUNG_ONE_IN == 0:
        return HUNG
    return profile


def utilization_at(profile: str, seconds_since_start: float) -> float:
    """GPU utilization (0-100) of a run of `profile` at `seconds_since_start`."""
    t = max(0.0, seconds_since_start)
    if profile == TRAINING:
        if t < 60.0:
            return 20.0
        return 45.0 if (t - 60.0) % 600.0 >= 540.0 else 92.0
    if profile == SWEEP:
        phase = (t % 300.0) / 150.0  # 0..2
        return 45.0 + 30.0 * (phase if phase <= 1.0 else 2.0 - phase)
    if profile == INFERENCE:
        return 35.0
    if profile == INTERACTIVE:
        return 70.0 if t >= 300.0 and (t - 300.0) % 1800.0 < 120.0 else 0.0
    return 0.0  # hung, idle, or a name this version does not know


def sm_active_at(profile: str, seconds_since_start: float) -> float:
    """Share of the time SMs were active (0-1): a little under utilization / 100."""
    return round(0.85 * utilization_at(profile, seconds_since_start) / 100.0, 4)


def memory_used_mib(profile: str) -> float:
    """Frame buffer the run of `profile` holds, in MiB."""
    return round(GPU_MEMORY_MIB * _MEMORY_SHARE.get(profile, 0.0))


def mean_utilization(profile: str, start_s: float, end_s: float, step_s: float = 1.0) -> float:
    """Mean of `utilization_at` over [start_s, end_s], sampled every `step_s` seconds
    (the value at `start_s` when the interval is shorter)."""
    if end_s <= start_s + step_s:
        return utilization_at(profile, start_s)
    steps = int((end_s - start_s) / step_s)
    total = sum(utilization_at(profile, start_s + i * step_s) for i in range(steps + 1))
    return total / (steps + 1)
