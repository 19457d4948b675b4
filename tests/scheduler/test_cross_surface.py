"""One figure, one value: after live cycles on the simulated cluster (real PostgreSQL),
every surface that shows a figure of a project or a job shows the same value: the
dashboard selectors, the API (`usage`, `fairshare`, `queue`, `jobs/{id}`), the job page
and the what-if preview's recorded column."""

from __future__ import annotations

import datetime as dt
import html

import pytest
from rest_framework.test import APIClient

from budgets.selectors import tree_index
from dashboards.selectors import delivery
from ledger.selectors import Period, fairshare, floor_hour, recorded_delivery
from ledger.services import rollups_refresh
from scheduler.selectors.jobs import job_page
from tests.factories import SuperUserFactory
from tests.live.conftest import live  # noqa: F401  (the live fixture)

pytestmark = pytest.mark.django_db


@pytest.fixture
def world(live):  # noqa: F811
    """a2 fills the cluster for two hours; an a1 job and a b1 job wait behind it."""
    for _ in range(4):
        live.submit("a2", gpus=8, min_runtime_s=3 * 3600, duration_s=6 * 3600)
    live.cycle()
    waiting = [live.submit("a1", gpus=8, min_runtime_s=3600), live.submit("b1", gpus=4)]
    for _ in range(4):
        live.cycle(advance_s=1800)
    root = SuperUserFactory(username="root")
    client = APIClient()
    client.force_authenticate(root)
    return live, waiting, root, client


def test_a_waiting_job_reads_the_same_on_the_queue_job_api_and_job_page(world):
    lv, waiting, root, client = world
    queue = client.get("/api/v1/queue/", {"cluster": lv.cluster.name}).json()["results"]
    by_job = {row["job"]: row for row in queue}
    for job in waiting:
        row = by_job[job.pk]
        detail = client.get(f"/api/v1/jobs/{job.pk}/").json()["queue"]
        page = job_page(actor=root, job_id=job.pk)["queue"]
        for name, value in (
            ("position", row["position"]),
            ("fairshare_factor", row["fairshare_factor"]),
            ("reason", row["reason"]),
        ):
            assert detail[name] == value, (name, detail[name], value)
            assert page[name] == value, (name, page[name], value)
        client.force_login(root)
        text = html.unescape(client.get(f"/jobs/{job.pk}/").content.decode())
        assert row["reason"].removeprefix("waiting: ") in text


def test_a_project_reads_the_same_on_the_fairshare_api_and_dashboard(world):
    lv, _waiting, root, client = world
    api = {
        n["path"]: n
        for n in client.get("/api/v1/fairshare/", {"cluster": lv.cluster.name}).json()["nodes"]
    }
    board = {n["path"]: n for n in fairshare(viewer=root, cluster=lv.cluster)["nodes"]}
    assert set(api) == set(board)
    for path, node in api.items():
        for name in ("entitled_share", "norm_shares", "rank", "fairshare"):
            assert (
                node[name] == pytest.approx(board[path][name])
                if node[name] is not None
                else board[path][name] is None
            ), (path, name)


def test_delivery_reads_the_same_on_the_usage_api_dashboard_and_preview_record(world):
    lv, _waiting, root, client = world
    until = floor_hour(lv.now.astimezone(dt.UTC))
    since = until - dt.timedelta(days=7)
    rollups_refresh(cluster_id=lv.cluster.pk, since=since, until=until, now=lv.now)
    index = tree_index()
    api: dict[str, dict[str, float]] = {}
    rows = client.get(
        "/api/v1/usage/",
        {
            "cluster": lv.cluster.name,
            "since": since.isoformat(),
            "until": until.isoformat(),
            "step": "day",
            "limit": 500,
        },
    ).json()["results"]
    for row in rows:
        sums = api.setdefault(row["project_path"], {"delivered_gpu_h": 0.0, "entitled_gpu_h": 0.0})
        sums["delivered_gpu_h"] += row["delivered_gpu_h"]
        sums["entitled_gpu_h"] += row["entitled_gpu_h"]
    board = {
        p["path"]: p
        for p in delivery(
            Period(since=since, until=until, step="day", cluster=lv.cluster), user=root
        )["projects"]
    }
    record = {
        index.path(pid): figures
        for pid, figures in recorded_delivery(cluster=lv.cluster, since=since, until=until).items()
    }
    a2 = "org/prog-a/a2"
    assert api[a2]["delivered_gpu_h"] > 0
    for path, sums in api.items():
        for name in ("delivered_gpu_h", "entitled_gpu_h"):
            assert board[path][name] == pytest.approx(sums[name]), (path, name)
            assert record[path][name] == pytest.approx(sums[name]), (path, name)
        assert (
            board[path]["ratio"] == pytest.approx(record[path]["ratio"])
            if record[path]["ratio"] is not None
            else board[path]["ratio"] is None
        )
