"""The ledger's REST endpoints (usage, occupancy, fair share) against rollups built from
raw attempts, jobs and host events, recomputed here from those raw rows (issue 10
acceptance 1): the figures the API returns equal them, the buckets sum to the capacity in
every step, an empty cluster gives empty rows; bad input gets a 400 naming the field."""

from __future__ import annotations

import datetime as dt
from collections import defaultdict

import pytest
from rest_framework.test import APIClient

from budgets.selectors import tree_index
from ledger.models import ClusterHour
from ledger.periods import report_end
from ledger.services import rollups_refresh
from scheduler.models import Attempt
from tests.factories import ClusterFactory, HostFactory
from tests.support.ledger import HOURS, H, overlap_h

pytestmark = pytest.mark.django_db
# The world's hosts (tests/ledger/conftest.py): 3 x 8 GPUs; their health as
# (host, first hour, end hour or None = still), hours counted from its base hour.
GPUS_PER_HOST = 8
DRAINING = [("h2", 1, None)]
DOWN = [("h3", 2, 3)]
FIGURES = ("allocated", "unallocated", "demand", "entitled", "delivered", "within_entitlement")


@pytest.fixture
def api(tree):
    client = APIClient()
    client.force_authenticate(tree.user("ann"))
    return client


@pytest.fixture
def refreshed(world):
    cluster, base, jobs = world
    rollups_refresh(cluster_id=cluster.pk, since=base, until=base + HOURS * H)
    return cluster, base, jobs


def read_all(api, path, **params):
    """Every row of a paginated list, 3 at a time (so paging is exercised too)."""
    response = api.get(path, {**params, "limit": 3})
    assert response.status_code == 200, response.content
    body = response.json()
    rows = list(body["results"])
    while body["next"]:
        body = api.get(body["next"]).json()
        rows.extend(body["results"])
    assert len(rows) == response.json()["count"]
    return rows


def _state_hours(segments, h):
    """GPUs of the hosts in those (host, first, end) segments during hour h."""
    return sum(GPUS_PER_HOST for _, first, end in segments if first <= h < (end or HOURS))


def recompute(base, jobs):
    """Per hour from the raw rows: each project's figures and the cluster's buckets."""
    shares = tree_index().shares
    projects: dict[tuple[int, int], dict[str, float]] = {}
    cluster: list[dict[str, float]] = []
    for h in range(HOURS):
        lo, hi = base + h * H, base + (h + 1) * H
        capacity = 3 * GPUS_PER_HOST
        down = _state_hours(DOWN, h)
        draining = _state_hours(DRAINING, h)
        healthy = capacity - down - draining
        per: dict[int, dict[str, float]] = defaultdict(lambda: dict.fromkeys(FIGURES, 0.0))
        busy_on_draining = 0.0
        for job in jobs:
            row = per[job.project_id]
            if job.min_runtime_s > 0:
                row["demand"] += job.gpus * overlap_h(job.submitted_at, job.ended_at, lo, hi)
            for a in Attempt.objects.filter(job=job):
                run = a.gpus * overlap_h(a.started_at, a.ended_at, lo, hi)
                row["allocated" if a.allocated else "unallocated"] += run
                if any(a.placements[0]["host"] == host for host, first, end in DRAINING
                       if first <= h < (end or HOURS)):  # fmt: skip
                    busy_on_draining += run
        for pid, row in per.items():
            row["entitled"] = min(shares[pid].entitled * healthy, row["demand"])
            row["delivered"] = row["allocated"]
            row["within_entitlement"] = min(row["allocated"], row["entitled"])
            if any(row.values()):
                projects[(pid, h)] = row
        allocated = sum(r["allocated"] for r in per.values())
        unallocated = sum(r["unallocated"] for r in per.values())
        demand = sum(r["demand"] for r in per.values())
        within = sum(r["within_entitlement"] for r in per.values())
        draining_idle = draining - busy_on_draining
        free = capacity - down - draining_idle - allocated - unallocated
        idle_demand = min(free, max(0.0, demand - allocated))
        cluster.append(
            {
                "capacity_gpu_h": capacity,
                "healthy_gpu_h": healthy,
                "within_entitlement_gpu_h": within,
                "borrowed_gpu_h": allocated - within,
                "unallocated_gpu_h": unallocated,
                "idle_demand_gpu_h": idle_demand,
                "idle_gpu_h": free - idle_demand,
                "draining_gpu_h": draining_idle,
                "down_gpu_h": down,
            }
        )
    return projects, cluster


def _day(at: dt.datetime) -> dt.datetime:
    return at.astimezone(dt.UTC).replace(hour=0, minute=0, second=0, microsecond=0)


def _iso(at: dt.datetime) -> str:
    return at.astimezone(dt.UTC).isoformat().replace("+00:00", "Z")


def test_usage_per_hour_equals_the_raw_attempts(api, refreshed, tree):
    cluster, base, jobs = refreshed
    projects, _ = recompute(base, jobs)
    rows = read_all(
        api,
        "/api/v1/usage/",
        cluster=cluster.name,
        since=_iso(base),
        until=_iso(base + HOURS * H),
    )
    got = {(r["project"], (dt.datetime.fromisoformat(r["start"]) - base) // H): r for r in rows}
    assert set(got) == set(projects)
    index = tree_index()
    for key, expected in projects.items():
        row = got[key]
        assert row["cluster_name"] == cluster.name
        assert row["project_path"] == index.path(key[0])
        for figure, value in expected.items():
            name = "delivered" if figure == "allocated" else figure  # one figure, one name
            assert row[f"{name}_gpu_h"] == pytest.approx(value, abs=1e-9), (key, figure)
        assert "allocated_gpu_h" not in row
    # a1 was above its entitlement in hour 0 (borrowed), a2 got nothing of what it asked
    a1, a2 = tree.node("a1"), tree.node("a2")
    assert got[(a1.pk, 0)]["delivered_gpu_h"] > got[(a1.pk, 0)]["within_entitlement_gpu_h"]
    assert got[(a2.pk, 1)]["capped_entitled_gpu_h"] > 0 and got[(a2.pk, 1)]["delivered_gpu_h"] == 0


def test_usage_per_day_sums_the_hours_and_filters_by_node(api, refreshed, tree):
    cluster, base, jobs = refreshed
    projects, _ = recompute(base, jobs)
    expected: dict[tuple[int, dt.datetime], dict[str, float]] = {}
    for (pid, h), figures in projects.items():
        row = expected.setdefault((pid, _day(base + h * H)), dict.fromkeys(FIGURES, 0.0))
        for figure, value in figures.items():
            row[figure] += value
    rows = read_all(
        api, "/api/v1/usage/", since=_iso(base), until=_iso(base + HOURS * H), step="day"
    )  # every cluster
    got = {(r["project"], dt.datetime.fromisoformat(r["start"])): r for r in rows}
    assert set(got) == set(expected)
    for key, figures in expected.items():
        for figure, value in figures.items():
            name = "delivered" if figure == "allocated" else figure  # one figure, one name
            assert got[key][f"{name}_gpu_h"] == pytest.approx(value, abs=1e-9)
    program = read_all(
        api, "/api/v1/usage/", project="org/prog-a", since=_iso(base), until=_iso(base + 4 * H)
    )
    assert {r["project_path"] for r in program} == {"org/prog-a/a1", "org/prog-a/a2"}
    by_id = read_all(api, "/api/v1/usage/", project=str(tree.node("b1").pk), since=_iso(base))
    assert {r["project_path"] for r in by_id} == {"org/prog-b/b1"}


@pytest.mark.parametrize("step", ["hour", "day"])
def test_occupancy_equals_the_raw_rows_and_sums_to_capacity(api, refreshed, step):
    cluster, base, jobs = refreshed
    _, hours = recompute(base, jobs)
    expected: dict[dt.datetime, dict[str, float]] = {}
    for h, buckets in enumerate(hours):
        at = base + h * H if step == "hour" else _day(base + h * H)
        row = expected.setdefault(at, dict.fromkeys(buckets, 0.0))
        for name, value in buckets.items():
            row[name] += value
    rows = read_all(
        api,
        "/api/v1/occupancy/",
        cluster=str(cluster.pk),
        since=_iso(base),
        until=_iso(base + HOURS * H),
        step=step,
    )
    got = {dt.datetime.fromisoformat(r["start"]): r for r in rows}
    assert set(got) == set(expected)
    for at, buckets in expected.items():
        for name, value in buckets.items():
            assert got[at][name] == pytest.approx(value, abs=1e-9), (at, name)
        total = sum(got[at][b] for b in ClusterHour.BUCKETS)
        assert total == pytest.approx(got[at]["capacity_gpu_h"], abs=1e-9)


def test_an_empty_cluster_gives_empty_rows(api, tree):
    cluster = ClusterFactory(name="empty", host_count=1)
    HostFactory(cluster=cluster, name="n1", gpus=8)
    for path in ("/api/v1/usage/", "/api/v1/occupancy/"):
        response = api.get(path, {"cluster": "empty", "days": 30, "step": "day"})
        assert response.status_code == 200, response.content
        body = response.json()
        end = report_end().isoformat().replace("+00:00", "Z")
        assert body == {
            "count": 0,
            "next": None,
            "previous": None,
            "window_start": (report_end() - dt.timedelta(days=30))
            .isoformat()
            .replace("+00:00", "Z"),
            "window_end": end,
            "results": [],
        }
    shares = api.get("/api/v1/fairshare/", {"cluster": "empty"}).json()
    assert shares["cluster_name"] == "empty"
    assert {n["raw_usage"] for n in shares["nodes"]} == {0.0}
    assert all(n["level_fs_infinite"] for n in shares["nodes"] if n["depth"])


def test_fairshare_is_sshare_for_every_node(api, refreshed, tree):
    cluster, _, _ = refreshed
    body = api.get("/api/v1/fairshare/", {"cluster": cluster.name}).json()
    nodes = {n["path"]: n for n in body["nodes"]}
    assert list(nodes)[0] == "org" and nodes["org"]["depth"] == 0
    assert nodes["org"]["raw_shares"] is None  # the root has no weight (docs/concepts.md)
    assert set(nodes) == {"org", "org/prog-a", "org/prog-a/a1", "org/prog-a/a2",
                          "org/prog-b", "org/prog-b/b1"}  # fmt: skip
    a1, a2, prog_a = nodes["org/prog-a/a1"], nodes["org/prog-a/a2"], nodes["org/prog-a"]
    assert (a1["raw_shares"], a1["norm_shares"]) == (70.0, pytest.approx(0.7))
    assert a1["entitled_share"] == pytest.approx(0.35)
    # only a1 ran allocated work in the window: all of prog-a's and the cluster's usage
    assert a1["raw_usage"] > 0 and a1["raw_usage"] == pytest.approx(nodes["org"]["raw_usage"])
    assert a1["norm_usage"] == pytest.approx(1) and a1["effective_usage"] == pytest.approx(1)
    assert a1["level_fs"] == pytest.approx(a1["norm_shares"] / a1["effective_usage"])
    assert a2["level_fs"] is None and a2["level_fs_infinite"] and a2["raw_usage"] == 0
    assert a2["fairshare"] > a1["fairshare"] and a2["rank"] < a1["rank"]
    assert prog_a["rank"] is None and prog_a["level_fs"] == pytest.approx(0.5)
    assert {n["rank"] for n in nodes.values() if n["kind"] == "project"} == {1, 2, 3}


def test_a_project_without_entitlement_has_no_factor_and_no_rank(api, tree):
    """A weight of 0 on a project or on a program above it: no entitlement, so its jobs
    run only unallocated; it is not ranked among funded projects (once it showed factor
    0.80 and rank 3 of 10), and the funded ones are ranked 1..N without it."""
    from budgets import services

    lead_a = tree.user("lead-a")
    services.node_create(actor=lead_a, parent_id=tree.node("prog-a").pk, name="sandbox",
                         weight=0, reason="free runs only")  # fmt: skip
    ClusterFactory(name="empty", host_count=1)
    body = api.get("/api/v1/fairshare/", {"cluster": "empty"}).json()
    nodes = {n["path"]: n for n in body["nodes"]}
    sandbox = nodes["org/prog-a/sandbox"]
    assert sandbox["entitled_share"] == 0.0
    assert sandbox["fairshare"] is None and sandbox["rank"] is None
    ranks = sorted(n["rank"] for n in nodes.values() if n["kind"] == "project" and n["rank"])
    assert ranks == [1, 2, 3]  # a1, a2, b1
    assert all(nodes[p]["fairshare"] is not None for p in ("org/prog-a/a1", "org/prog-b/b1"))


@pytest.mark.parametrize(
    ("path", "params", "field"),
    [
        ("/api/v1/usage/", {"step": "week"}, "step"),
        ("/api/v1/usage/", {"since": "yesterday"}, "since"),
        ("/api/v1/usage/", {"until": "2026-13-01"}, "until"),
        ("/api/v1/usage/", {"cluster": "nowhere"}, "cluster"),
        ("/api/v1/usage/", {"project": "org/nowhere"}, "project"),
        ("/api/v1/usage/", {"project": "999999"}, "project"),
        ("/api/v1/usage/", {"days": "5"}, "days"),
        ("/api/v1/occupancy/", {}, "cluster"),
        (
            "/api/v1/occupancy/",
            {"cluster": "gpu", "since": "2026-02-01T00:00:00Z", "until": "2026-01-01T00:00:00Z"},
            "since",
        ),  # fmt: skip
        (
            "/api/v1/occupancy/",
            {"cluster": "gpu", "since": "2020-01-01T00:00:00Z", "until": "2026-01-01T00:00:00Z"},
            "since",
        ),  # fmt: skip
        ("/api/v1/occupancy/", {"cluster": "gpu", "until": "0001-01-03T00:00:00Z"}, "until"),
        ("/api/v1/occupancy/", {"cluster": "gpu", "since": "9999-12-31T00:00:00Z"}, "since"),
        ("/api/v1/occupancy/", {"cluster": "gpu", "step": "minute"}, "step"),
        ("/api/v1/fairshare/", {}, "cluster"),
        ("/api/v1/fairshare/", {"cluster": "nowhere"}, "cluster"),
        # the fuzzer's finding: "²".isdigit() is true but int("²") fails (was a 500)
        ("/api/v1/fairshare/", {"cluster": "\u00b2"}, "cluster"),
        ("/api/v1/usage/", {"project": "\u00b2"}, "project"),
        # empty is refused (the schema's minLength 1), not read as "every cluster" (fuzzer)
        ("/api/v1/usage/", {"cluster": ""}, "cluster"),
        ("/api/v1/usage/", {"project": ""}, "project"),
        ("/api/v1/occupancy/", {"cluster": ""}, "cluster"),
    ],
)
def test_bad_input_is_a_400_naming_the_field(api, path, params, field):
    ClusterFactory(name="gpu")
    response = api.get(path, params)
    assert response.status_code == 400, response.content
    body = response.json()
    assert body["code"] == "invalid" and body["field"] == field, body


@pytest.mark.parametrize(
    ("params", "field", "choices"),
    [({"days": "14"}, "days", "7, 30, 90"), ({"step": "week"}, "step", "hour, day")],
)
def test_a_wrong_choice_says_which_are_allowed(api, params, field, choices):
    ClusterFactory(name="gpu")
    body = api.get("/api/v1/occupancy/", {"cluster": "gpu", **params}).json()
    assert body["field"] == field and choices in body["detail"], body


def test_an_old_until_alone_is_a_period_before_it(api):
    """Regression: `occupancy/?until=2000-01-01T00:00:00Z` answered 500 once."""
    ClusterFactory(name="gpu")
    response = api.get("/api/v1/occupancy/", {"cluster": "gpu", "until": "2000-01-01T00:00:00Z"})
    assert response.status_code == 200 and response.json()["count"] == 0
    usage = api.get("/api/v1/usage/", {"until": "2000-01-01T00:00:00Z", "step": "day"})
    assert usage.status_code == 200 and usage.json()["results"] == []


@pytest.mark.parametrize("path", ["/api/v1/usage/", "/api/v1/occupancy/", "/api/v1/fairshare/"])
def test_anonymous_is_refused(path, tree):
    ClusterFactory(name="gpu")
    response = APIClient().get(path, {"cluster": "gpu"})
    assert response.status_code == 401
    assert response.json()["code"] == "not_authenticated"


def test_the_schema_documents_the_400s(api):
    schema = api.get("/api/schema/", {"format": "json"}).json()
    for path in ("/api/v1/usage/", "/api/v1/occupancy/", "/api/v1/fairshare/"):
        responses = schema["paths"][path]["get"]["responses"]
        assert {"200", "400", "401", "403"} <= set(responses), path
        assert "period longer than 366 days" in responses["400"]["description"]
