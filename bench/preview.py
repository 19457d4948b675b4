"""Benchmark: a what-if preview of 14 days of a 1,024-GPU cluster (target <= 30 s).

The jobs come from `scheduler.core.sim.generate`'s ``ai2-month`` scenario (512 GPUs, 30
days) drawn twice with two seeds (two copies of the demand for twice the GPUs), cut to
the first `--days` days. The proposed change triples the weight of one project.

Prints JSON: ``preview_s`` (the pure what-if: both replays and the summaries, the
figure the target is about), ``jobs`` and ``replay_s`` (each replay). The service
path around it (jobs read from the database, the Celery task, the page) is covered by
tests/scheduler/test_previews.py, not timed here.

Usage: python bench/preview.py [--days 14] [--serial]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from scheduler.core.engine.budget_tree import budget_node, parse_tree_document  # noqa: E402
from scheduler.core.engine.types import BudgetNode  # noqa: E402
from scheduler.core.sim.generate import generate  # noqa: E402
from scheduler.core.sim.model import ClusterSpec, HostSpec, SimConfig  # noqa: E402
from scheduler.core.sim.whatif import JobRecord, run_whatif  # noqa: E402

DAY = 86400.0
HOSTS = 128


def scenario(days: float) -> tuple[ClusterSpec, BudgetNode, list[JobRecord]]:
    """1,024 GPUs, the ai2 tree, and two seeds' worth of ai2-month jobs in `days` days."""
    records: list[JobRecord] = []
    tree_doc = None
    for seed in (0, 1):
        sc = generate("ai2-month", seed)
        tree_doc = sc.tree
        for r in sc.jobs:
            if r.submit_s < days * DAY:
                records.append(
                    JobRecord(
                        job_id=f"s{seed}-{r.job_id}",
                        project=r.project,
                        submit_s=float(r.submit_s),
                        gpus=r.gpus,
                        runtime_s=float(r.duration_s),
                        min_runtime_s=float(r.min_runtime_s),
                        resumable=r.resumable,
                        kind=r.kind,
                        priority=r.priority,
                        user=r.user,
                    )
                )
    tree = budget_node(parse_tree_document(tree_doc))
    cluster = ClusterSpec("bench", tuple(HostSpec(f"h{i:03d}") for i in range(HOSTS)))
    return cluster, tree, records


def with_weight(tree: BudgetNode, leaf: str, factor: float) -> BudgetNode:
    """The tree with one leaf's weight multiplied by `factor`."""
    children = tuple(with_weight(c, leaf, factor) for c in tree.children)
    weight = tree.weight * factor if tree.name == leaf and not tree.children else tree.weight
    return BudgetNode(name=tree.name, weight=weight, children=children)


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--days", type=float, default=14.0)
    p.add_argument("--serial", action="store_true", help="one process, both replays in turn")
    args = p.parse_args()
    cluster, tree, records = scenario(args.days)
    after = with_weight(tree, "safety", 3.0)
    t0 = time.perf_counter()
    result = run_whatif(
        cluster,
        tree,
        after,
        records,
        start_s=0.0,
        end_s=args.days * DAY,
        config=SimConfig(),
        parallel=not args.serial,
    )
    preview_s = time.perf_counter() - t0
    out = {
        "preview_s": round(preview_s, 2),
        "days": args.days,
        "gpus": cluster.total_gpus,
        "jobs": result["jobs"],
        "parallel": not args.serial,
        "replay_s": [round(s, 2) for s in result.get("replay_s", [])],
    }
    print(json.dumps(out))


if __name__ == "__main__":
    main()
