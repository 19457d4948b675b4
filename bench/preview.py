"""Benchmark: a what-if preview of 14 days of a 1,024-GPU cluster (target <= 30 s).

The jobs come from `scheduler.core.sim.generate`'s ``ai2-month`` scenario (512 GPUs, 30
days) drawn twice with two seeds (two copies of the demand for twice the GPUs), cut to
the first `--days` days. The proposed change triples the weight of one project.

Prints JSON: ``preview_s`` (the pure what-if: both replays and the summaries, the
figure the target is about), ``jobs`` and ``replay_s`` (each replay). The service
path around it (jobs read from the database, the Celery task, the page) is covered by
tests/scheduler/test_previews.py, not timed here.

With ``--fidelity`` it measures instead whether the preview's replay with unchanged
weights reproduces what the ledger recorded (issue 22, target <= 0.10), through the
service (`scheduler.services.previews.preview_compute`) on a scratch PostgreSQL database
(`DATABASE_URL` with ``_bench_demo`` / ``_bench_philly`` appended, one per case; created
and dropped):

- ``demo``: the demo organisation's 16 x 8-GPU cluster with 14 days of back-filled
  history (`scheduler.services.demo.demo_backfill`, as `make run` does), previewed over
  its last 7 days;
- ``philly``: the first 16 days of the Philly Oct-Nov 2017 trace
  (the shared data folder beside the repository, or ``--data``) replayed on its pooled 64 x 8-GPU cluster with the
  Philly tree by the simulator, stored as jobs, attempts and ledger rollups (the
  back-fill's code), previewed over its last 14 days.

Each prints ``fidelity_worst`` (the largest per-project relative difference of delivered
GPU-hours between the unchanged replay and the ledger, over the projects that made 90%
of the recorded delivery), its project, the per-project differences, and what the
replay could not reproduce (jobs carried into the window, unknown runtimes).

The figure depends on the clock the history ends at (which jobs run when the window
opens): ``--now ISO`` pins that clock and ``--minute M [M ...]`` runs each case once per
minute M of its hour (seconds 0), printed as ``<case>@<MM>``; ``fidelity_worst`` is then
the worst of all.

Usage: python bench/preview.py [--days 14] [--serial]
       python bench/preview.py --fidelity [--only demo|philly] [--data DIR]
                                          [--now ISO] [--minute M [M ...]]
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import sys
import time
from pathlib import Path
from typing import Any

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from scheduler.core.engine.budget_tree import budget_node, parse_tree_document  # noqa: E402
from scheduler.core.engine.types import BudgetNode  # noqa: E402
from scheduler.core.sim.generate import generate  # noqa: E402
from scheduler.core.sim.model import ClusterSpec, HostSpec, SimConfig  # noqa: E402
from scheduler.core.sim.whatif import JobRecord, run_whatif  # noqa: E402

DAY = 86400.0
HOSTS = 128
TAIL_DAYS = 3


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


def _django(db_suffix: str = "_bench") -> tuple[Any, str]:
    """Django set up on a fresh scratch database (migrated) named after the configured
    one; returns its connection and the configured name (to restore when it is dropped)."""
    import os

    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings.test")
    import django
    from django.conf import settings

    django.setup()
    from django.db import connection

    configured = settings.DATABASES["default"]["NAME"]
    settings.DATABASES["default"].setdefault("TEST", {})
    settings.DATABASES["default"]["TEST"]["NAME"] = configured + db_suffix
    connection.creation.create_test_db(verbosity=0, autoclobber=True, keepdb=False)
    return connection, configured


def _fidelity_of(cluster: Any, days: int, now: Any) -> dict[str, Any]:
    """The preview's unchanged replay against the ledger over the `days` days before `now`."""
    from budgets.selectors import tree_index
    from scheduler.services.previews import preview_compute, preview_window

    since, until = preview_window(now, days)
    t0 = time.perf_counter()
    result = preview_compute(
        cluster=cluster, index=tree_index(), edits={}, since=since, until=until, parallel=True
    )
    judged = result["fidelity"]["judged"]
    rows = {r["project"]: r for r in result["projects"]}
    return {
        "fidelity_worst": _round(result["fidelity"]["worst"]),
        "worst_project": result["fidelity"]["worst_project"],
        "days": days,
        "jobs_replayed": result["jobs"],
        "not_reproduced": {k: _round(v) for k, v in result["not_reproduced"].items()},
        "projects": {
            name: {
                "recorded_gpu_h": _round(rows[name]["delivered_gpu_h_recorded"], 1),
                "replay_gpu_h": _round(rows[name].get("delivered_gpu_h_before"), 1),
                "difference": _round(rows[name]["replay_difference"]),
            }
            for name in judged
        },
        "preview_s": round(time.perf_counter() - t0, 1),
    }


def _round(value: Any, digits: int = 3) -> Any:
    return round(value, digits) if isinstance(value, float) else value


def _cluster(name: str, hosts: int, gpus: int) -> Any:
    from scheduler.models import Cluster, Host

    cluster = Cluster.objects.create(name=name, host_count=hosts, gpus_per_host=gpus)
    Host.objects.bulk_create(
        Host(cluster=cluster, name=f"h{i:03d}", gpus=gpus) for i in range(hosts)
    )
    return cluster


def demo_fidelity(now: Any) -> dict[str, Any]:
    """The demo organisation after `make run`'s 14-day back-fill, previewed over 7 days."""
    from budgets.models import BudgetNode
    from budgets.services import budget_tree_import
    from scheduler.management.commands.seed_demo import DEMO_TREE
    from scheduler.services.demo import (
        DEMO_CLUSTER,
        DEMO_GPUS_PER_HOST,
        DEMO_HOSTS,
        demo_backfill,
    )

    budget_tree_import(data=DEMO_TREE, reason="Demo organisation")
    root = BudgetNode.objects.get(parent=None, name=DEMO_TREE["name"])
    cluster = _cluster(DEMO_CLUSTER, DEMO_HOSTS, DEMO_GPUS_PER_HOST)
    t0 = time.perf_counter()
    # The back-fill stores every job it played (those going at its end as running and
    # pending jobs); it runs TAIL_DAYS past the window. No simulated cluster here: the
    # runs handed over are stored, not started.
    counts = demo_backfill(
        root=root,
        cluster=cluster,
        days=14 + TAIL_DAYS,
        now=now + dt.timedelta(days=TAIL_DAYS),
        start_runs=False,
    )
    out = _fidelity_of(cluster, 7, now)
    out["history"] = {
        "days": 14,
        "tail_days": TAIL_DAYS,
        "jobs": counts.get("jobs"),
        "load_s": round(time.perf_counter() - t0, 1),
    }
    return out


def philly_fidelity(
    now: Any, data: Path, history_days: float = 16, days: int = 14
) -> dict[str, Any]:
    """The Philly Oct-Nov trace's first `history_days` days loaded into the ledger as
    the back-fill stores a simulated history, previewed over its last `days` days."""
    from dataclasses import replace

    from django.contrib.auth import get_user_model

    from budgets.models import BudgetNode
    from budgets.services import budget_tree_import
    from scheduler.core.sim.io import load_cluster, load_trace, parse_tree
    from scheduler.core.sim.replay import simulate
    from scheduler.services import demo
    from scheduler.services.demo_handover import finished_runs
    from scheduler.services.previews import sim_config_for_cluster

    t0 = time.perf_counter()
    document = json.loads((data / "philly-tree.json").read_text())
    budget_tree_import(data=document, reason="Philly 2017")
    get_user_model().objects.create_superuser("bench", "bench@example.com", "bench")
    root = BudgetNode.objects.get(parent=None, name=document["name"])
    spec = load_cluster(data / "philly-cluster.json")
    cluster = _cluster(spec.name, len(spec.hosts), spec.hosts[0].gpus)
    tree, _ = parse_tree(document)
    # The jobs submitted up to the window's end, played until the last of them ends, so
    # that every run of the window is stored (a live ledger records runs still going;
    # the back-fill's code keeps only jobs that ended).
    span = history_days
    trace = [
        j
        for j in load_trace(data / "philly-octnov-2017.csv", tree, spec)
        if j.submit_s < span * DAY
    ]
    cfg = replace(sim_config_for_cluster(cluster), until_s=None, seed=0)
    result = simulate(spec.__class__(cluster.name, spec.hosts), tree, trace, cfg)
    hosts = {h.name: h.gpus for h in spec.hosts}
    done, runs_by_job, rules = finished_runs(result, hosts)
    origin = now - dt.timedelta(days=history_days)
    end = origin + dt.timedelta(seconds=max((o.end_s or 0.0) for o in result.jobs) + 3600)
    counts, _ = demo._store_history(
        cluster=cluster,
        projects=demo._projects(root),
        trace={t.job_id: t for t in trace},
        outcomes=done,
        runs_by_job=runs_by_job,
        rules=rules,
        at=lambda s: origin + dt.timedelta(seconds=s),
    )
    demo._refresh_ledger(cluster, origin, end)
    out = _fidelity_of(cluster, days, now)
    out["history"] = {
        "days": history_days,
        "played_until_all_ended": True,
        "jobs": counts["jobs"],
        "load_s": round(time.perf_counter() - t0, 1),
    }
    return out


def _clocks(now: str | None, minutes: list[int] | None) -> list[tuple[str, dt.datetime]]:
    """The clocks the cases run at, each with its label suffix: `now` (ISO; default the
    current time), or that hour at each of `minutes` (seconds 0)."""
    base = dt.datetime.fromisoformat(now) if now else dt.datetime.now(dt.UTC)
    if base.tzinfo is None:
        base = base.replace(tzinfo=dt.UTC)
    if not minutes:
        return [("", base)]
    return [(f"@{m:02d}", base.replace(minute=m, second=0, microsecond=0)) for m in minutes]


def fidelity_main(
    only: str | None, data: Path, now: str | None = None, minutes: list[int] | None = None
) -> None:
    """Each case on its own scratch database: the preview replays the tree of the
    database's first root (`engine_tree`), so the Philly case on the demo's database
    replayed no job (every project 1.0, 2026-12-06)."""
    cases = {"demo": demo_fidelity, "philly": lambda now: philly_fidelity(now, data)}
    out: dict[str, Any] = {"target": 0.10}
    for name, case in cases.items():
        if only not in (None, name):
            continue
        for label, clock in _clocks(now, minutes):
            connection, old_name = _django(f"_bench_{name}")
            try:
                out[name + label] = {"now": clock.isoformat(), **case(clock)}
            finally:
                connection.creation.destroy_test_db(old_name, verbosity=0)
    worst = [v["fidelity_worst"] for k, v in out.items() if isinstance(v, dict)]
    out["fidelity_worst"] = max((w for w in worst if w is not None), default=None)
    print(json.dumps(out))


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--days", type=float, default=14.0)
    p.add_argument("--serial", action="store_true", help="one process, both replays in turn")
    p.add_argument("--fidelity", action="store_true", help="the replay against the ledger")
    p.add_argument("--only", choices=("demo", "philly"), help="with --fidelity: one case")
    p.add_argument("--now", help="with --fidelity: the clock the history ends at (ISO)")
    p.add_argument(
        "--minute", type=int, nargs="+", help="with --fidelity: each case at these minutes"
    )
    p.add_argument(
        "--data", type=Path, default=Path(__file__).resolve().parents[1].parent / "shared" / "data"
    )
    args = p.parse_args()
    if args.fidelity:
        fidelity_main(args.only, args.data, args.now, args.minute)
        return
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
