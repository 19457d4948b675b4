"""A small simulator scenario (tree, cluster, trace) and the CLI arguments that run it."""

from __future__ import annotations

import json
import random
from pathlib import Path

from scheduler.core.sim.model import TraceJob

HEADER = "job_id,project,user,submit_s,gpus,duration_s,min_runtime_s,resumable,priority,kind"
TREE = {
    "name": "org",
    "children": [
        {"name": "prog", "weight": 3, "children": [{"name": "a1", "weight": 1}]},
        {"name": "b1", "weight": 1},
    ],
}
CLUSTER = {"name": "tiny", "host_count": 2, "gpus_per_host": 8}
TRACE_ROWS = [
    "j1,a1,ann,0,8,3600,600,1,0,training",
    "j2,b1,bob,0,8,1800,0,1,0,sweep",
    "j3,a1,ann,60,4,600,600,0,0,debug",
    "j4,b1,bob,120,16,3600,3600,1,0,training",
]


def scenario(tmp_path: Path, rows: list[str] | None = None, tree: dict | None = None,
             cluster: dict | None = None) -> list[str]:  # fmt: skip
    (tmp_path / "tree.json").write_text(json.dumps(tree or TREE))
    (tmp_path / "cluster.json").write_text(json.dumps(cluster or CLUSTER))
    (tmp_path / "trace.csv").write_text("\n".join([HEADER, *(rows or TRACE_ROWS)]) + "\n")
    return [
        "run",
        "--tree", str(tmp_path / "tree.json"),
        "--cluster", str(tmp_path / "cluster.json"),
        "--trace", str(tmp_path / "trace.csv"),
        "--out", str(tmp_path / "report.json"),
    ]  # fmt: skip


def busy_trace(seed: int, jobs: int = 80, hours: float = 6.0) -> list[TraceJob]:
    """`jobs` random jobs of projects a and b submitted over `hours` (1-8 GPUs, 0.2-3 h
    each, min runtime 0 or 600 s, half resumable, training or interactive): about twice
    what 3 hosts of 8 GPUs run in that time."""
    rng = random.Random(seed)
    return [
        TraceJob(
            f"j{i}",
            rng.choice("ab"),
            "u",
            rng.uniform(0, hours * 3600.0),
            rng.choice((1, 2, 4, 8)),
            rng.uniform(0.2 * 3600.0, 3 * 3600.0),
            rng.choice((0.0, 600.0)),
            rng.random() < 0.5,
            0,
            rng.choice(("training", "interactive")),
        )
        for i in range(jobs)
    ]
