"""Scenario model of the window planner and its validating loader.

A scenario is a grid of `gpus` GPUs x `steps` time steps, a list of batch jobs
(training, batch inference, quantization: a power-of-two aligned block held for
`duration` consecutive steps) and a list of real-time services (elastic: any
GPUs each step, at most `demand[t]`, count changing by at most `max_switch`).

`parse_scenario` checks every field and raises `ScenarioError` whose message
starts with the field path (`batch[3].gpus: must be a power of two`).
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = [
    "BATCH_KINDS",
    "BatchJob",
    "RealtimeService",
    "Scenario",
    "ScenarioError",
    "is_power_of_two",
    "load_scenario",
    "parse_scenario",
    "scenario_to_dict",
]

BATCH_KINDS = ("training", "batch_inference", "quantization")


class ScenarioError(ValueError):
    """A scenario file that cannot be planned; `path` names the offending field."""

    def __init__(self, path: str, message: str) -> None:
        super().__init__(f"{path}: {message}" if path else message)
        self.path = path
        self.reason = message


def is_power_of_two(n: int) -> bool:
    """True for 1, 2, 4, 8, ..."""
    return n > 0 and n & (n - 1) == 0


@dataclass(frozen=True, slots=True)
class BatchJob:
    """A batch-shaped job: holds `gpus` aligned contiguous GPUs for `duration` steps."""

    id: str
    kind: str
    gpus: int
    duration: int
    priority: float
    arrival: int = 0


@dataclass(frozen=True, slots=True)
class RealtimeService:
    """An elastic real-time inference service following a demand curve."""

    id: str
    demand: tuple[int, ...]
    max_switch: int

    @property
    def peak(self) -> int:
        """Highest demand over the window (what the FIFO baseline reserves)."""
        return max(self.demand, default=0)


@dataclass(frozen=True, slots=True)
class Scenario:
    """One planning window and everything that wants GPUs in it."""

    name: str
    gpus: int
    steps: int
    batch: tuple[BatchJob, ...]
    realtime: tuple[RealtimeService, ...] = ()
    step_s: int = 3600
    decay: float = 0.97
    penalty: float = 8.0
    gpus_per_host: int = 8
    description: str = ""

    def job_ids(self) -> list[str]:
        """Batch ids then real-time ids, the index order used by the grids."""
        return [j.id for j in self.batch] + [s.id for s in self.realtime]

    @property
    def contended(self) -> bool:
        """True if, with every job started at arrival, some step wants more than the cluster.

        Demand at step t = real-time demand + GPUs of batch jobs whose
        [arrival, arrival + duration) covers t.
        """
        load = [0] * self.steps
        for svc in self.realtime:
            for t, d in enumerate(svc.demand):
                load[t] += d
        for job in self.batch:
            for t in range(job.arrival, min(self.steps, job.arrival + job.duration)):
                load[t] += job.gpus
        return max(load, default=0) > self.gpus


def _int(raw: Mapping[str, Any], key: str, path: str, *, minimum: int | None = None) -> int:
    if key not in raw:
        raise ScenarioError(f"{path}{key}", "is required")
    value = raw[key]
    if isinstance(value, bool) or not isinstance(value, int):
        raise ScenarioError(f"{path}{key}", f"must be an integer, got {value!r}")
    if minimum is not None and value < minimum:
        raise ScenarioError(f"{path}{key}", f"must be >= {minimum}, got {value}")
    return value


def _number(raw: Mapping[str, Any], key: str, path: str, default: float | None = None) -> float:
    if key not in raw:
        if default is None:
            raise ScenarioError(f"{path}{key}", "is required")
        return default
    value = raw[key]
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise ScenarioError(f"{path}{key}", f"must be a number, got {value!r}")
    return float(value)


def _str(raw: Mapping[str, Any], key: str, path: str) -> str:
    if key not in raw:
        raise ScenarioError(f"{path}{key}", "is required")
    value = raw[key]
    if not isinstance(value, str) or not value.strip():
        raise ScenarioError(f"{path}{key}", f"must be a non-empty string, got {value!r}")
    return value


def _list(raw: Mapping[str, Any], key: str, path: str) -> list[Any]:
    value = raw.get(key, [])
    if not isinstance(value, list):
        raise ScenarioError(f"{path}{key}", f"must be a list, got {type(value).__name__}")
    return value


def _parse_batch(raw: Any, path: str, gpus: int, steps: int) -> BatchJob:
    if not isinstance(raw, dict):
        raise ScenarioError(path, "must be an object")
    p = f"{path}."
    job_id = _str(raw, "id", p)
    kind = _str(raw, "kind", p)
    if kind not in BATCH_KINDS:
        raise ScenarioError(f"{p}kind", f"must be one of {', '.join(BATCH_KINDS)}, got {kind!r}")
    size = _int(raw, "gpus", p, minimum=1)
    if not is_power_of_two(size):
        raise ScenarioError(f"{p}gpus", f"must be a power of two, got {size}")
    if size > gpus:
        raise ScenarioError(f"{p}gpus", f"must be <= the cluster's {gpus} GPUs, got {size}")
    duration = _int(raw, "duration", p, minimum=1)
    priority = _number(raw, "priority", p)
    if priority <= 0:
        raise ScenarioError(f"{p}priority", f"must be > 0, got {priority}")
    arrival = _int(raw, "arrival", p, minimum=0) if "arrival" in raw else 0
    if arrival >= steps:
        raise ScenarioError(f"{p}arrival", f"must be < steps ({steps}), got {arrival}")
    return BatchJob(job_id, kind, size, duration, priority, arrival)


def _parse_realtime(raw: Any, path: str, steps: int) -> RealtimeService:
    if not isinstance(raw, dict):
        raise ScenarioError(path, "must be an object")
    p = f"{path}."
    svc_id = _str(raw, "id", p)
    demand = _list(raw, "demand", p)
    if len(demand) != steps:
        raise ScenarioError(
            f"{p}demand", f"must have one value per step ({steps}), got {len(demand)}"
        )
    for t, d in enumerate(demand):
        if isinstance(d, bool) or not isinstance(d, int) or d < 0:
            raise ScenarioError(f"{p}demand[{t}]", f"must be an integer >= 0, got {d!r}")
    max_switch = _int(raw, "max_switch", p, minimum=0)
    return RealtimeService(svc_id, tuple(demand), max_switch)


def parse_scenario(raw: Any) -> Scenario:
    """Build a `Scenario` from decoded JSON, raising `ScenarioError` on the first bad field."""
    if not isinstance(raw, dict):
        raise ScenarioError("", "a scenario must be a JSON object")
    name = _str(raw, "name", "")
    gpus = _int(raw, "gpus", "", minimum=1)
    steps = _int(raw, "steps", "", minimum=1)
    step_s = _int(raw, "step_s", "", minimum=1) if "step_s" in raw else 3600
    decay = _number(raw, "decay", "", 0.97)
    if not 0 < decay <= 1:
        raise ScenarioError("decay", f"must be in (0, 1], got {decay}")
    penalty = _number(raw, "penalty", "", 8.0)
    if penalty < 0:
        raise ScenarioError("penalty", f"must be >= 0, got {penalty}")
    per_host = _int(raw, "gpus_per_host", "", minimum=1) if "gpus_per_host" in raw else 8
    if not is_power_of_two(per_host):
        raise ScenarioError("gpus_per_host", f"must be a power of two, got {per_host}")
    if gpus % per_host and gpus > per_host:
        raise ScenarioError("gpus_per_host", f"must divide gpus ({gpus}), got {per_host}")
    description = raw.get("description", "")
    if not isinstance(description, str):
        raise ScenarioError("description", "must be a string")
    batch = tuple(
        _parse_batch(item, f"batch[{i}]", gpus, steps)
        for i, item in enumerate(_list(raw, "batch", ""))
    )
    realtime = tuple(
        _parse_realtime(item, f"realtime[{i}]", steps)
        for i, item in enumerate(_list(raw, "realtime", ""))
    )
    seen: dict[str, str] = {}
    for path, item_id in [(f"batch[{i}].id", j.id) for i, j in enumerate(batch)] + [
        (f"realtime[{i}].id", s.id) for i, s in enumerate(realtime)
    ]:
        if item_id in seen:
            raise ScenarioError(path, f"duplicate id {item_id!r} (also {seen[item_id]})")
        seen[item_id] = path
    unknown = sorted(
        set(raw)
        - {"name", "gpus", "steps", "step_s", "decay", "penalty", "gpus_per_host"}
        - {"batch", "realtime", "description"}
    )
    if unknown:
        raise ScenarioError(unknown[0], "unknown field")
    return Scenario(
        name=name,
        gpus=gpus,
        steps=steps,
        batch=batch,
        realtime=realtime,
        step_s=step_s,
        decay=decay,
        penalty=penalty,
        gpus_per_host=per_host,
        description=description,
    )


def load_scenario(path: str | Path) -> Scenario:
    """Read and validate a scenario JSON file (`ScenarioError` for bad content or JSON)."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise ScenarioError("", f"cannot read {path}: {exc.strerror or exc}") from exc
    try:
        raw = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ScenarioError("", f"{path} is not valid JSON: {exc}") from exc
    return parse_scenario(raw)


def scenario_to_dict(sc: Scenario) -> dict[str, Any]:
    """The JSON form of a scenario (round-trips through `parse_scenario`)."""
    out: dict[str, Any] = {
        "name": sc.name,
        "gpus": sc.gpus,
        "steps": sc.steps,
        "step_s": sc.step_s,
        "decay": sc.decay,
        "penalty": sc.penalty,
        "gpus_per_host": sc.gpus_per_host,
    }
    if sc.description:
        out["description"] = sc.description
    out["batch"] = [
        {
            "id": j.id,
            "kind": j.kind,
            "gpus": j.gpus,
            "duration": j.duration,
            "priority": j.priority,
            "arrival": j.arrival,
        }
        for j in sc.batch
    ]
    out["realtime"] = [
        {"id": s.id, "demand": list(s.demand), "max_switch": s.max_switch} for s in sc.realtime
    ]
    return out
