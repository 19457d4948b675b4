"""Server time of the dashboards' occupancy and delivery views on a large ledger.

    .venv/bin/python bench/dashboard.py [--days 90] [--projects 200] [--clusters 2]
                                        [--repeat 5]

Needs DATABASE_URL (a server where it may create and drop `<name>_dashbench`). Fills a
throwaway database with `--days` x 24 hourly ledger rows for `--projects` projects on
each of `--clusters` clusters (ProjectHour and ClusterHour, written with COPY), then
times each chart's own URL (its htmx partial: the selector's queries, the Plotly figure
and the template) through Django's test client, `--repeat` times after one warm-up.

Prints JSON: `occupancy_page_ms` and `delivery_page_ms` (median over the repeats, hour
steps over the whole period; target <= 300 ms each), the day-step figures, the row
counts and the details.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench._server import fresh_database  # noqa: E402


def _fill(days: int, projects: int, clusters: int) -> dict[str, int]:
    """The tree (org -> 10 programs -> projects), the clusters and the ledger rows."""
    from django.db import connection
    from django.utils import timezone

    from budgets.models import BudgetNode, NodeKind
    from ledger.models import ClusterHour, ProjectHour
    from scheduler.models import Cluster

    root = BudgetNode.objects.create(name="org", slug="org", kind=NodeKind.ORGANISATION)
    programs = [
        BudgetNode.objects.create(
            parent=root, name=f"prog-{i}", slug=f"prog-{i}", kind=NodeKind.PROGRAM
        )
        for i in range(10)
    ]
    leaves = BudgetNode.objects.bulk_create(
        [
            BudgetNode(
                parent=programs[i % 10],
                name=f"project-{i:03d}",
                slug=f"project-{i:03d}",
                kind=NodeKind.PROJECT,
                weight=1 + i % 7,
            )
            for i in range(projects)
        ]
    )
    end = timezone.now().replace(minute=0, second=0, microsecond=0)
    hours = [end - dt.timedelta(hours=h) for h in range(days * 24)]
    made = {"project_hours": 0, "cluster_hours": 0}
    for c in range(clusters):
        cluster = Cluster.objects.create(name=f"bench-{c}", host_count=128, gpus_per_host=8)
        capacity = float(cluster.gpu_capacity)
        with connection.cursor() as cursor:
            columns = (
                "cluster_id, project_id, hour, allocated_gpu_h, unallocated_gpu_h, "
                "demand_gpu_h, entitled_gpu_h"
            )
            table = ProjectHour._meta.db_table
            with cursor.cursor.copy(f"COPY {table} ({columns}) FROM STDIN") as copy:
                for h, at in enumerate(hours):
                    for i, leaf in enumerate(leaves):
                        entitled = 5.0 + (i * 7 + h) % 11
                        copy.write_row(
                            (cluster.pk, leaf.pk, at, entitled * 0.9, 0.5, entitled * 1.4, entitled)
                        )
        made["project_hours"] += len(hours) * len(leaves)
        ClusterHour.objects.bulk_create(
            [
                ClusterHour(
                    cluster=cluster,
                    hour=at,
                    capacity_gpu_h=capacity,
                    healthy_gpu_h=capacity,
                    within_entitlement_gpu_h=capacity * 0.6,
                    borrowed_gpu_h=capacity * 0.1,
                    unallocated_gpu_h=capacity * 0.1,
                    idle_demand_gpu_h=capacity * 0.05,
                    idle_gpu_h=capacity * 0.15,
                    computed_at=end,
                )
                for at in hours
            ],
            batch_size=5000,
        )
        made["cluster_hours"] += len(hours)
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE")
    return made


def _time(client, url: str, repeat: int, cold: bool = True) -> list[float]:
    """Milliseconds per request; `cold` empties the cache before each (the delivery
    sums are cached for a few minutes, see dashboards.selectors)."""
    from django.core.cache import cache

    client.get(url)  # warm-up
    times = []
    for _ in range(repeat):
        if cold:
            cache.clear()
        started = time.perf_counter()
        response = client.get(url)
        times.append((time.perf_counter() - started) * 1000)
        assert response.status_code == 200, (url, response.status_code)
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--days", type=int, default=90)
    parser.add_argument("--projects", type=int, default=200)
    parser.add_argument("--clusters", type=int, default=2)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--keep", action="store_true", help="keep the database (to profile)")
    args = parser.parse_args()
    with fresh_database("dashbench", keep=args.keep) as database_url:
        os.environ["DATABASE_URL"] = database_url
        os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings.dev")
        try:
            print(json.dumps(_measure(args), indent=2))
        finally:
            from django.db import connections

            connections.close_all()


def _measure(args) -> dict:
    import django

    django.setup()
    from django.contrib.auth import get_user_model
    from django.core.management import call_command
    from django.test import Client

    call_command("migrate", verbosity=0)
    started = time.perf_counter()
    made = _fill(args.days, args.projects, args.clusters)
    fill_s = time.perf_counter() - started
    user = get_user_model().objects.create_user("bench", password="bench-password-1")
    client = Client(HTTP_HOST="localhost")
    client.force_login(user)
    query = f"cluster=bench-0&days={args.days}"
    results = {}
    for chart in ("occupancy", "delivery"):
        for step in ("hour", "day"):
            times = _time(client, f"/dashboards/{chart}/?{query}&step={step}", args.repeat)
            key = f"{chart}_page_ms" if step == "hour" else f"{chart}_day_step_ms"
            results[key] = round(statistics.median(times), 1)
            results[f"{key}_all"] = [round(t, 1) for t in times]
    cached = _time(client, f"/dashboards/delivery/?{query}&step=hour", args.repeat, cold=False)
    results["delivery_page_cached_ms"] = round(statistics.median(cached), 1)
    return {
        **{k: v for k, v in results.items() if not k.endswith("_all")},
        "days": args.days,
        "projects": args.projects,
        "clusters": args.clusters,
        **made,
        "fill_s": round(fill_s, 1),
        "details": results,
    }


if __name__ == "__main__":
    main()
