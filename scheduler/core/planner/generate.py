"""Scenario generators: diurnal real-time demand, seeded job mixes, the shipped seven.

The seven scenarios under `scenarios/` are written by `python -m
scheduler.core.planner.generate` from the recipes in `SHIPPED` (fixed seeds), so they can
be regenerated and read as code. `generate_scenario` builds large random ones for
the benchmark and the tests.

Design rules of the shipped scenarios (fixed before looking at any result):

- a day of 24 hourly steps, decay 0.97 per hour, penalty 8 (priorities are 1-3,
  so an unmet real-time GPU-step costs 2.7-8x a batch GPU-step);
- real-time services follow a cosine diurnal curve, trough about a third of the
  peak, peaking in the afternoon; they scale by 1 GPU per hour (2 above 4 GPUs);
- peak real-time share of the cluster: training-heavy and quantization-burst
  1/2, mixed-control 3/4 (the issue's service: 6 GPUs at 14:00, 2 at night),
  inference-heavy 3/4 over two services, scale about 40 % over three;
- contended scenarios draw jobs (seeded) until the batch GPU-steps asked for
  reach twice what real-time demand leaves free (SPEC: demand 2-3x capacity);
  quantization-burst is 3 training runs and a burst of 30 quantization jobs
  (about 85 GPU-steps asked within 4 hours); scale has exactly 30 jobs;
  no-contention five hand-written jobs.
"""

from __future__ import annotations

import json
import math
import random
from pathlib import Path
from typing import Any

__all__ = [
    "SCENARIO_DIR",
    "SHIPPED",
    "diurnal",
    "generate_scenario",
    "random_jobs",
    "write_shipped",
]

SCENARIO_DIR = Path(__file__).with_name("scenarios")

KIND_SIZES = {
    # (sizes, weights) and (min, max) duration in steps, per kind
    "training": ((1, 2, 4, 8, 16), (2, 4, 4, 2, 1), (4, 12)),
    "batch_inference": ((1, 2, 4), (5, 3, 1), (1, 5)),
    "quantization": ((1, 2), (3, 2), (1, 3)),
}


def diurnal(
    steps: int,
    trough: int,
    peak: int,
    peak_step: int,
    *,
    period: int = 24,
    jitter: int = 0,
    rng: random.Random | None = None,
) -> list[int]:
    """A daily demand curve: `peak` at `peak_step`, `trough` half a period away (cosine),
    plus an optional +-`jitter` GPU of noise."""
    out = []
    for t in range(steps):
        phase = 2 * math.pi * (t - peak_step) / period
        v = trough + (peak - trough) * (1 + math.cos(phase)) / 2
        if jitter and rng is not None:
            v += rng.randint(-jitter, jitter)
        out.append(max(0, round(v)))
    return out


def random_jobs(
    rng: random.Random,
    n: int,
    *,
    max_gpus: int,
    steps: int,
    kinds: dict[str, float],
    priorities: tuple[float, ...] = (1, 2, 3),
    arrival_span: tuple[int, int] | None = None,
    prefix: str = "",
) -> list[dict[str, Any]]:
    """`n` batch jobs drawn from the kind mix (sizes, durations per `KIND_SIZES`)."""
    names = list(kinds)
    weights = [kinds[k] for k in names]
    lo, hi = arrival_span or (0, max(0, steps // 2))
    jobs = []
    for i in range(n):
        kind = rng.choices(names, weights)[0]
        sizes, size_w, (dmin, dmax) = KIND_SIZES[kind]
        allowed = [(s, w) for s, w in zip(sizes, size_w, strict=True) if s <= max_gpus]
        size = rng.choices([s for s, _ in allowed], [w for _, w in allowed])[0]
        jobs.append(
            {
                "id": f"{prefix}{kind[0]}{i + 1}",
                "kind": kind,
                "gpus": size,
                "duration": rng.randint(dmin, dmax),
                "priority": rng.choice(priorities),
                "arrival": rng.randint(lo, min(hi, steps - 1)),
            }
        )
    return jobs


def generate_scenario(
    name: str,
    *,
    gpus: int,
    jobs: int,
    steps: int,
    services: int,
    seed: int,
    gpus_per_host: int = 8,
    penalty: float = 8.0,
    decay: float = 0.97,
) -> dict[str, Any]:
    """A random scenario (JSON form): `services` diurnal services using about a third
    of the cluster at their peaks, and `jobs` batch jobs of mixed kinds. Job sizes
    grow with the cluster (x gpus/64 from 128 GPUs up) so a large cluster is as
    contended as a small one."""
    rng = random.Random(seed)
    realtime = []
    for s in range(services):
        peak = max(1, round(gpus * rng.uniform(0.15, 0.35) / max(1, services)))
        realtime.append(
            {
                "id": f"rt{s + 1}",
                "demand": diurnal(
                    steps, max(0, peak // 3), peak, rng.randrange(24), jitter=1, rng=rng
                ),
                "max_switch": max(1, peak // 4),
            }
        )
    batch = random_jobs(
        rng,
        jobs,
        max_gpus=min(gpus, 8 * gpus_per_host),
        steps=steps,
        kinds={"training": 0.45, "batch_inference": 0.35, "quantization": 0.2},
        priorities=(1, 2, 3, 4),
        arrival_span=(0, steps * 2 // 3),
    )
    scale = 1 << max(0, (gpus // 64).bit_length() - 1) if gpus >= 128 else 1
    for job in batch:
        job["gpus"] = min(gpus, job["gpus"] * scale)
    return {
        "name": name,
        "gpus": gpus,
        "steps": steps,
        "step_s": 3600,
        "decay": decay,
        "penalty": penalty,
        "gpus_per_host": min(gpus_per_host, gpus),
        "batch": batch,
        "realtime": realtime,
    }


def _fill_jobs(
    rng: random.Random,
    *,
    gpus: int,
    realtime: list[dict[str, Any]],
    kinds: dict[str, float],
    arrival_span: tuple[int, int],
    max_gpus: int = 4,
    priorities: tuple[float, ...] = (1, 2, 3),
    prefix: str = "",
    load: float = 2.0,
    steps: int = 24,
) -> list[dict[str, Any]]:
    """Draw jobs until their GPU-steps reach `load` x what real-time demand leaves free."""
    free = gpus * steps - sum(sum(svc["demand"]) for svc in realtime)
    jobs: list[dict[str, Any]] = []
    asked = 0
    while asked < load * free:
        (job,) = random_jobs(
            rng,
            1,
            max_gpus=max_gpus,
            steps=steps,
            kinds=kinds,
            priorities=priorities,
            arrival_span=arrival_span,
        )
        job["id"] = f"{prefix}{job['kind'][0]}{len(jobs) + 1}"
        jobs.append(job)
        asked += job["gpus"] * min(job["duration"], steps - job["arrival"])
    return jobs


def _scenario(
    name: str,
    description: str,
    gpus: int,
    batch: list[dict[str, Any]],
    realtime: list[dict[str, Any]],
) -> dict[str, Any]:
    return {
        "name": name,
        "description": description,
        "gpus": gpus,
        "steps": 24,
        "step_s": 3600,
        "decay": 0.97,
        "penalty": 8,
        "gpus_per_host": 8,
        "batch": batch,
        "realtime": realtime,
    }


def _service(name: str, peak: int, peak_step: int) -> dict[str, Any]:
    return {
        "id": name,
        "demand": diurnal(24, max(0, round(peak / 3)), peak, peak_step),
        "max_switch": 1 if peak <= 4 else 2,
    }


def _training_heavy() -> dict[str, Any]:
    rt = [_service("chat", 4, 14)]
    jobs = _fill_jobs(
        random.Random(11),
        gpus=8,
        realtime=rt,
        kinds={"training": 0.8, "batch_inference": 0.2},
        arrival_span=(0, 12),
    )
    return _scenario(
        "training-heavy",
        f"8 GPUs, a chat service (1 GPU at night, 4 at 14:00), {len(jobs)} jobs, mostly training.",
        8,
        jobs,
        rt,
    )


def _inference_heavy() -> dict[str, Any]:
    rt = [_service("chat", 4, 14), _service("search", 2, 10)]
    jobs = _fill_jobs(
        random.Random(23),
        gpus=8,
        realtime=rt,
        kinds={"batch_inference": 0.6, "training": 0.2, "quantization": 0.2},
        arrival_span=(0, 16),
    )
    return _scenario(
        "inference-heavy",
        f"8 GPUs, chat (peak 4 at 14:00) and search (peak 2 at 10:00) services, "
        f"{len(jobs)} jobs, mostly batch inference.",
        8,
        jobs,
        rt,
    )


def _quantization_burst() -> dict[str, Any]:
    rng = random.Random(37)
    rt = [_service("chat", 4, 13)]
    training = random_jobs(
        rng,
        3,
        max_gpus=4,
        steps=24,
        kinds={"training": 1.0},
        priorities=(1, 2),
        arrival_span=(0, 2),
        prefix="base-",
    )
    burst = random_jobs(
        rng,
        30,
        max_gpus=4,
        steps=24,
        kinds={"quantization": 1.0},
        priorities=(2, 3),
        arrival_span=(6, 10),
        prefix="burst-",
    )
    return _scenario(
        "quantization-burst",
        f"8 GPUs, a chat service (peak 4 at 13:00), 3 training runs, then a burst of "
        f"{len(burst)} quantization jobs between 06:00 and 10:00.",
        8,
        training + burst,
        rt,
    )


def _mixed_jobs(rt: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return _fill_jobs(
        random.Random(5),
        gpus=8,
        realtime=rt,
        kinds={"training": 0.4, "batch_inference": 0.4, "quantization": 0.2},
        arrival_span=(0, 14),
    )


def _mixed_control() -> dict[str, Any]:
    rt = [_service("chat", 6, 14)]
    jobs = _mixed_jobs(rt)
    return _scenario(
        "mixed-control",
        f"8 GPUs, a chat service (2 GPUs at night, 6 at 14:00), {len(jobs)} jobs of all "
        "three kinds.",
        8,
        jobs,
        rt,
    )


def _uniform_priority() -> dict[str, Any]:
    rt = [_service("chat", 6, 14)]
    jobs = [{**job, "priority": 1} for job in _mixed_jobs(rt)]
    return _scenario(
        "uniform-priority",
        "mixed-control with every priority set to 1: only packing and real-time elasticity "
        "can gain.",
        8,
        jobs,
        rt,
    )


def _scale() -> dict[str, Any]:
    rng = random.Random(64)
    jobs = random_jobs(
        rng,
        30,
        max_gpus=16,
        steps=24,
        kinds={"training": 0.5, "batch_inference": 0.3, "quantization": 0.2},
        arrival_span=(0, 16),
    )
    rt = [_service("chat", 12, 14), _service("search", 8, 11), _service("code", 6, 16)]
    return _scenario(
        "scale",
        "64 GPUs (8 hosts), three services peaking at 11:00, 14:00 and 16:00 (26 GPUs in "
        "all at most), 30 jobs of 1 to 16 GPUs.",
        64,
        jobs,
        rt,
    )


def _no_contention() -> dict[str, Any]:
    jobs = [
        {"id": "t1", "kind": "training", "gpus": 4, "duration": 8, "priority": 2, "arrival": 0},
        {
            "id": "b1",
            "kind": "batch_inference",
            "gpus": 2,
            "duration": 3,
            "priority": 1,
            "arrival": 2,
        },
        {"id": "q1", "kind": "quantization", "gpus": 1, "duration": 2, "priority": 3, "arrival": 9},
        {"id": "t2", "kind": "training", "gpus": 2, "duration": 6, "priority": 1, "arrival": 10},
        {
            "id": "b2",
            "kind": "batch_inference",
            "gpus": 4,
            "duration": 2,
            "priority": 2,
            "arrival": 18,
        },
    ]
    return _scenario(
        "no-contention",
        "8 GPUs, a small chat service (peak 2) and five jobs that never want more than the "
        "cluster: every mode should do the same.",
        8,
        jobs,
        [_service("chat", 2, 14)],
    )


SHIPPED = {
    "mixed-control": _mixed_control,
    "training-heavy": _training_heavy,
    "inference-heavy": _inference_heavy,
    "quantization-burst": _quantization_burst,
    "uniform-priority": _uniform_priority,
    "scale": _scale,
    "no-contention": _no_contention,
}


def write_shipped(directory: Path = SCENARIO_DIR) -> list[Path]:
    """(Re)write the seven shipped scenario files from their recipes."""
    directory.mkdir(parents=True, exist_ok=True)
    paths = []
    for name, recipe in SHIPPED.items():
        path = directory / f"{name}.json"
        path.write_text(json.dumps(recipe(), indent=1) + "\n", encoding="utf-8")
        paths.append(path)
    return paths


if __name__ == "__main__":
    for written in write_shipped():
        print(written)
