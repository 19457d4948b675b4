"""Server CPU per request: what each API call and page costs gunicorn, on production
settings, with a realistically filled database. Prints JSON.

    .venv/bin/python bench/request_cost.py [--requests 100] [--seconds 10] [--port 8431]

Needs DATABASE_URL (a server where it may create and drop `<name>_cost`) and REDIS_URL.
A fresh database gets 20 projects (one member, `bench`, in all of them; a superuser
`admin` for the pages), a 1,024-GPU cluster (128 hosts x 8) and 10,000 jobs (20 arrays of
500 through the submission service); then a live cluster: 3 scheduling cycles on an
in-memory cluster start what fits (~570 running, ~9,400 pending, events and the stored
explained queue) and the ETAs of every pending job are computed and cached, as a worker
would. The job read is a pending job's (its queue place, blockers and ETA); `database`
in the output gives the counts. `--keep` keeps the database (to profile it). gunicorn
runs with 2 workers. Each
request kind is warmed up, then sent `--requests` times one after the other; its figure
is the user + system CPU of the gunicorn worker processes (read from /proc, so neither
PostgreSQL's nor this load generator's share counts) divided by the requests:

- `submit_cpu_ms`: `POST /api/v1/jobs/`, one job, with an Idempotency-Key;
- `job_get_cpu_ms`: `GET /api/v1/jobs/{id}/`; `queue_cpu_ms`: `GET /api/v1/queue/?cluster=bench&limit=50`;
- `job_page_cpu_ms`: `/jobs/{id}/`; `tree_page_cpu_ms`: `/budgets/`;
- `dashboard_cpu_ms`: what a browser asks for to show `/dashboards/?days=7&step=hour`: the
  page plus every request it makes as it is shown (`hx-get` triggered by `load`,
  `revealed` or `intersect`), read from the page itself (none since the page holds its
  charts: occupancy, efficiency, delivery, fair share, waits); the sum, and each part in
  `dashboard_parts_cpu_ms` (`page` and each such request by the id of the element that
  makes it). The
  database holds a week of ledger hours (cluster and project rows for every complete
  hour), so the charts draw a week, as on a cluster that has run one;
- `queue_page_cpu_ms`: the cluster queue page (`/clusters/<id>/queue/`: 50 pending jobs
  with their ETAs and 50 running ones); `queue_page_deep_cpu_ms`: its pending page 150
  (jobs 7,451-7,500); `queue_page_project_cpu_ms`: filtered to `org/prog-a` (half the
  jobs).

`requests_per_s`: `GET /api/v1/jobs/{id}/` from 4 client threads for `--seconds`.
`--only dashboard queue_page` measures only the kinds whose keys start so.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import sys
import threading
import time
import uuid
from html.parser import HTMLParser
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench._server import (  # noqa: E402
    fresh_database,
    gunicorn,
    manage,
    production_env,
    worker_cpu_s,
)

PROJECTS = 20
JOBS_PER_PROJECT = 500
CYCLES = 3

SETUP = f"""
from importlib import import_module
from django.conf import settings
from django.contrib.auth import BACKEND_SESSION_KEY, HASH_SESSION_KEY, SESSION_KEY, get_user_model
from accounts.services import token_create
from budgets.services import budget_tree_import
from scheduler.models import Cluster, Host, Job
from django.utils import timezone
from scheduler.cycle.worker import CycleWorker
from scheduler.services.eta import cluster_etas
from scheduler.services.jobs import job_submit
from tests.support.memcluster import MemoryCluster
User = get_user_model()
user = User.objects.create_user("bench", password="bench-password-1")
admin = User.objects.create_superuser("admin", password="bench-password-1")
projects = [{{"name": f"p{{i:02d}}", "weight": 1, "members": ["bench"]}} for i in range({PROJECTS})]
budget_tree_import(data={{"name": "org", "children": [
    {{"name": "prog-a", "weight": 1, "children": projects[:10]}},
    {{"name": "prog-b", "weight": 1, "children": projects[10:]}}]}})
cluster = Cluster.objects.create(name="bench", host_count=128, gpus_per_host=8)
Host.objects.bulk_create([Host(cluster=cluster, name=f"h{{i:03d}}", gpus=8) for i in range(128)])
for i in range({PROJECTS}):
    job_submit(actor=user, project=f"org/prog-{{'a' if i < 10 else 'b'}}/p{{i:02d}}",
               cluster="bench", name="bench", gpus=8 if i % 2 else 1, min_runtime_s=600,
               priority=i % 3, spec={{"image": "pytorch:2.5", "command": "python train.py"}},
               duration_s=3600, array={JOBS_PER_PROJECT})
# A live cluster: cycles start what fits (running attempts, events, a stored explained
# queue) and the ETAs of every pending job are computed and cached, as a worker would.
memory = MemoryCluster({{h.name: h.gpus for h in cluster.hosts.all()}}, timezone.now())
worker = CycleWorker()
for _ in range({CYCLES}):
    worker.run(cluster_id=cluster.pk, now=memory.now, adapter=memory)
    memory.advance(1)
cluster_etas(cluster=cluster, fresh=True)
# A week of ledger hours (what the rollups would have written), for the dashboards' charts.
import datetime as dt
from budgets.models import BudgetNode
from ledger.models import ClusterHour, ProjectHour
last = timezone.now().replace(minute=0, second=0, microsecond=0)
leaves = list(BudgetNode.objects.filter(kind="project").order_by("pk"))
cluster_rows, project_rows = [], []
for h in range(1, 7 * 24 + 1):
    hour = last - dt.timedelta(hours=h)
    used = 1024.0 * (0.5 + 0.4 * ((h % 24) / 24))
    cluster_rows.append(ClusterHour(cluster=cluster, hour=hour, capacity_gpu_h=1024.0,
        healthy_gpu_h=1024.0, within_entitlement_gpu_h=used * 0.9, borrowed_gpu_h=used * 0.1,
        unallocated_gpu_h=0.0, idle_demand_gpu_h=0.0, idle_gpu_h=1024.0 - used,
        draining_gpu_h=0.0, down_gpu_h=0.0, computed_at=timezone.now()))
    for leaf in leaves:
        project_rows.append(ProjectHour(cluster=cluster, project=leaf, hour=hour,
            allocated_gpu_h=used / len(leaves), demand_gpu_h=1.5 * used / len(leaves),
            entitled_gpu_h=1024.0 / len(leaves)))
ClusterHour.objects.bulk_create(cluster_rows)
ProjectHour.objects.bulk_create(project_rows, batch_size=1000)
session = import_module(settings.SESSION_ENGINE).SessionStore()
session[SESSION_KEY] = str(admin.pk)
session[BACKEND_SESSION_KEY] = "django.contrib.auth.backends.ModelBackend"
session[HASH_SESSION_KEY] = admin.get_session_auth_hash()
session.create()
pending = Job.objects.filter(state="pending").order_by("pk")
running = Job.objects.filter(state__in=["starting", "running"]).count()
job = pending[pending.count() // 2]  # a pending job: its queue place and ETA are read
print(token_create(user=user, name="bench")[1], session.session_key, job.pk, running, pending.count(),
      cluster.pk)
"""

DASHBOARD = "/dashboards/?days=7&step=hour"

BODY = {
    "project": "org/prog-a/p01",
    "cluster": "bench",
    "name": "bench",
    "gpus": 8,
    "min_runtime_s": 600,
    "kind": "training",
    "spec": {"image": "pytorch:2.5", "command": "python train.py", "env": {"SEED": "1"}},
    "duration_s": 3600,
}


def request(port: int, method: str, path: str, headers: dict, body: bytes | None = None) -> int:
    """One request on its own connection (gunicorn's sync workers close each); the status."""
    return fetch(port, method, path, headers, body)[0]


def fetch(
    port: int, method: str, path: str, headers: dict, body: bytes | None = None
) -> tuple[int, bytes]:
    """One request on its own connection; the status and the body."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    try:
        conn.request(method, path, body=body, headers=headers)
        response = conn.getresponse()
        return response.status, response.read()
    finally:
        conn.close()


class _LoadedParts(HTMLParser):
    """The elements of a page that htmx fetches without a click: `hx-get` with a trigger
    that fires as the page loads or as it is scrolled into view (`load`, `load delay:1s`,
    `revealed`, `intersect`); polls (`every 5s`) repeat a request, they do not show the page."""

    EVENTS = {"load", "revealed", "intersect"}

    def __init__(self) -> None:
        super().__init__()
        self.parts: dict[str, str] = {}

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        found = dict(attrs)
        path, trigger = found.get("hx-get"), found.get("hx-trigger") or ""
        events = {t.split()[0] for t in trigger.split(",") if t.strip()}
        if path and events & self.EVENTS:
            self.parts[found.get("id") or f"{tag}-{len(self.parts) + 1}"] = path


def loaded_parts(page: str) -> dict[str, str]:
    """The requests a page makes as it is shown (`_LoadedParts`), by the id of the element
    that asks: {id: path}."""
    parser = _LoadedParts()
    parser.feed(page)
    return parser.parts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=100, help="requests per kind")
    parser.add_argument("--seconds", type=float, default=10.0, help="of the throughput run")
    parser.add_argument("--port", type=int, default=8431)
    parser.add_argument(
        "--keep", action="store_true", help="keep the database `<name>_cost` (to profile it)"
    )
    parser.add_argument(
        "--only",
        nargs="+",
        metavar="KIND",
        help="measure only these kinds (JSON keys or their starts: `dashboard`, `queue_page`)",
    )
    args = parser.parse_args()
    with fresh_database("cost", keep=args.keep) as database_url:
        env = production_env(database_url, port=args.port, workers=2, var_dir=ROOT / "var" / "cost")
        manage(env, "migrate", "--noinput", "-v0")
        manage(env, "collectstatic", "--noinput", "-v0")  # the pages' hashed static names
        token, session_key, job_id, running, pending, cluster_id = manage(
            env, "shell", "-c", SETUP
        ).split()[-6:]
        api = {"Authorization": f"Token {token}"}
        page = {"Cookie": f"sessionid={session_key}"}
        post = {**api, "Content-Type": "application/json"}
        kinds = {
            "submit_cpu_ms": ("POST", "/api/v1/jobs/", post),
            "job_get_cpu_ms": ("GET", f"/api/v1/jobs/{job_id}/", api),
            "queue_cpu_ms": ("GET", "/api/v1/queue/?cluster=bench&limit=50", api),
            "job_page_cpu_ms": ("GET", f"/jobs/{job_id}/", page),
            "tree_page_cpu_ms": ("GET", "/budgets/", page),
            "dashboard_cpu_ms": ("GET", DASHBOARD, page),
            "queue_page_cpu_ms": ("GET", f"/clusters/{cluster_id}/queue/", page),
            "queue_page_deep_cpu_ms": (
                "GET",
                f"/clusters/{cluster_id}/queue/?state=pending&page=150",
                page,
            ),
            "queue_page_project_cpu_ms": (
                "GET",
                f"/clusters/{cluster_id}/queue/?project=org/prog-a",
                page,
            ),
        }
        result: dict = {}
        statuses: dict = {}
        with gunicorn(env, ROOT / "var" / "cost" / "gunicorn.log") as server:
            status, body = fetch(args.port, "GET", DASHBOARD, page)
            charts = loaded_parts(body.decode())
            figures = body.decode().count('class="chart" data-figure=')
            if status != 200 or not (charts or figures):
                sys.exit(f"{DASHBOARD} answered {status} with no chart and naming none")
            dashboard_parts = {"dashboard_page": ("GET", DASHBOARD, page)} | {
                f"dashboard_{chart}": ("GET", path, page) for chart, path in charts.items()
            }
            del kinds["dashboard_cpu_ms"]
            kinds = {**dashboard_parts, **kinds}
            if args.only:
                kinds = {k: v for k, v in kinds.items() if k.startswith(tuple(args.only))}
            for key, (method, path, headers) in kinds.items():

                def send(method=method, path=path, headers=headers) -> int:
                    if method == "POST":
                        return request(
                            args.port,
                            method,
                            path,
                            {**headers, "Idempotency-Key": str(uuid.uuid4())},
                            json.dumps(BODY).encode(),
                        )
                    return request(args.port, method, path, headers)

                for _ in range(10):  # both workers: imports, connections, caches
                    send()
                before = worker_cpu_s(server.pid)
                answers = [send() for _ in range(args.requests)]
                result[key] = round(1000 * (worker_cpu_s(server.pid) - before) / args.requests, 2)
                statuses[key] = {str(s): answers.count(s) for s in sorted(set(answers))}
                if any(s >= 300 for s in answers):
                    sys.exit(f"{method} {path} answered {statuses[key]}; see var/cost/gunicorn.log")
            parts = {
                k.removeprefix("dashboard_"): result.pop(k) for k in dashboard_parts if k in result
            }
            if parts:
                result = {
                    "dashboard_cpu_ms": round(sum(parts.values()), 2),
                    "dashboard_parts_cpu_ms": parts,
                    **result,
                }
            if not args.only or "requests_per_s".startswith(tuple(args.only)):
                result["requests_per_s"] = throughput(
                    args.port, f"/api/v1/jobs/{job_id}/", api, args.seconds
                )
    result.update(
        statuses=statuses,
        requests_per_kind=args.requests,
        gunicorn_workers=2,
        cpus=os.cpu_count(),
        database={
            "projects": PROJECTS,
            "gpus": 1024,
            "jobs": PROJECTS * JOBS_PER_PROJECT,
            "cycles": CYCLES,
            "running": int(running),
            "pending": int(pending),
        },
    )
    print(json.dumps(result, indent=2))


def throughput(port: int, path: str, headers: dict, seconds: float) -> float:
    """Answers with 200 per second from 4 threads sending `GET path` for `seconds`."""
    done = [0]
    lock = threading.Lock()
    until = time.monotonic() + seconds

    def loop() -> None:
        while time.monotonic() < until:
            ok = request(port, "GET", path, headers) == 200
            with lock:
                done[0] += ok

    started = time.monotonic()
    threads = [threading.Thread(target=loop) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return round(done[0] / (time.monotonic() - started), 1)


if __name__ == "__main__":
    main()
