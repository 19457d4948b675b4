"""One figure, one value over random budget trees and job mixes (issue 22): after live
cycles on the simulated cluster (real PostgreSQL), each project's fair-share factor,
rank and usage read the same on the fairshare API, the fair-share dashboard's selector,
the queue API (its fair-share factor, project rank and the numbers its reasons say) and
the job page's queue info, all at the moment of the last cycle."""

from __future__ import annotations

import datetime as dt
import re
from unittest import mock

import pytest
from django.db import transaction
from django.utils import timezone
from hypothesis import HealthCheck, Phase, example, given, note
from hypothesis import settings as run_settings
from hypothesis import strategies as st
from rest_framework.test import APIClient

from budgets.models import BudgetNode
from budgets.services import budget_tree_import
from dashboards.selectors import fairshare_now
from scheduler.models import Cluster, Job
from scheduler.selectors.jobs import job_queue_info
from scheduler.tasks import run_cycle
from tests.factories import ClusterFactory, SuperUserFactory, UserFactory
from tests.support.live import submit_job
from tests.support.memcluster import MemoryCluster

pytestmark = pytest.mark.django_db

HOSTS, GPUS = 2, 8

# org -> 1..3 programs (weight 1..100) -> 1..2 projects each (weight 0..100): 1..6 projects
programs = st.lists(
    st.tuples(st.integers(1, 100), st.lists(st.integers(0, 100), min_size=1, max_size=2)),
    min_size=1,
    max_size=3,
).filter(lambda ps: sum(len(p[1]) for p in ps) >= 2)
# (project index, GPUs, min runtime s, submitted before the first cycle)
job = st.tuples(
    st.integers(0, 5), st.sampled_from([1, 2, 4, 8]), st.sampled_from([0, 600, 7200]), st.booleans()
)

STANDING = re.compile(
    r"is at (\d+)% of its entitled share over (\d+) days \(fair-share rank (\d+) of (\d+)\); "
    r"(\d+) projects? ranks? above it"
)


def _tree(program_weights) -> tuple[dict, list[str]]:
    children, projects = [], []
    for g, (weight, project_weights) in enumerate(program_weights):
        leaves = []
        for w in project_weights:
            name = f"p{len(projects)}"
            projects.append(name)
            leaves.append({"name": name, "weight": w})
        children.append({"name": f"g{g}", "weight": weight, "children": leaves})
    return {"name": "org", "children": children}, projects


@run_settings(
    max_examples=10,
    phases=[Phase.explicit, Phase.generate],  # no shrinking: each example runs cycles
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(program_weights=programs, jobs=st.lists(job, min_size=1, max_size=8))
# found by this property: a job waiting for its victims to exit had the engine's order
# index as its project's rank (a project without entitlement counted), not the rank
@example(
    program_weights=[(100, [17, 22]), (84, [91, 81]), (72, [0, 71])],
    jobs=[
        (2, 2, 600, False), (3, 4, 7200, True), (0, 8, 0, True), (0, 2, 0, True),
        (1, 2, 600, True), (2, 2, 7200, False), (5, 1, 7200, False), (1, 1, 600, False),
    ],
)  # fmt: skip
def test_a_projects_figures_agree_on_every_surface(db, program_weights, jobs):
    with transaction.atomic():  # each example on an empty database
        _check(program_weights, jobs)
        transaction.set_rollback(True)


def _check(program_weights, jobs) -> None:
    """One example: live cycles, then every surface's figures compared."""
    cluster, memory = _run_cycles(program_weights, jobs)
    api, board, queue, pages = _surfaces(cluster, memory)
    ranked = sum(1 for n in api.values() if n["rank"] is not None)
    _assert_board_agrees(api, board, ranked)
    _assert_queue_agrees(api, queue, pages, ranked)


def _run_cycles(program_weights, jobs) -> tuple[Cluster, MemoryCluster]:
    """Import the tree, submit the early jobs, run two cycles an hour apart (the first
    runs are charged), submit the rest and run a last cycle half an hour later."""
    data, projects = _tree(program_weights)
    budget_tree_import(data=data)
    nodes = {n.name: n for n in BudgetNode.objects.all()}
    run_cycle.worker.reset()
    t0 = timezone.now().replace(microsecond=0) - dt.timedelta(hours=3)
    cluster = ClusterFactory(name="prop", host_count=HOSTS, gpus_per_host=GPUS)
    memory = MemoryCluster.of(HOSTS, GPUS, t0)
    user = UserFactory(username="ann")

    def submit(spec) -> None:
        index, gpus, min_runtime_s, _early = spec
        project = nodes[projects[index % len(projects)]]
        if project.weight == 0:  # no budget: the submit service takes free work only
            min_runtime_s = 0
        submit_job(
            cluster=cluster,
            project=project,
            user=user,
            at=memory.now,
            gpus=gpus,
            min_runtime_s=min_runtime_s,
            duration_s=4 * 3600,
        )

    def cycle(advance_s: float = 0.0) -> None:
        if advance_s:
            memory.advance(advance_s)
        run_cycle.worker.run(cluster_id=cluster.pk, now=memory.now, adapter=memory)

    for spec in (j for j in jobs if j[3]):
        submit(spec)
    cycle()
    cycle(advance_s=3600)  # the first runs are charged
    for spec in (j for j in jobs if not j[3]):
        submit(spec)
    cycle(advance_s=1800)
    return cluster, memory


def _surfaces(cluster: Cluster, memory: MemoryCluster) -> tuple[dict, dict, dict, dict]:
    """(fairshare API nodes by path, dashboard rows by path, the queue API's page, the
    job pages' queue info by job), all at the moment of the last cycle."""
    viewer = SuperUserFactory(username="root")
    client = APIClient()
    client.force_authenticate(viewer)
    # every surface at the moment of the last cycle (usage grows while jobs run)
    with mock.patch.object(timezone, "now", lambda: memory.now):
        api = {
            n["path"]: n
            for n in client.get("/api/v1/fairshare/", {"cluster": cluster.name}).json()["nodes"]
        }
        board = {r["path"]: r for r in fairshare_now(viewer=viewer, cluster=cluster)["rows"]}
        queue = client.get("/api/v1/queue/", {"cluster": cluster.name, "limit": 500}).json()
        pages = {row["job"]: job_queue_info(_job(row["job"])) for row in queue["results"]}
    return api, board, queue, pages


def _assert_board_agrees(api: dict, board: dict, ranked: int) -> None:
    """The fair-share dashboard reads each node as the fairshare API does."""
    for path, row in board.items():
        node = api[path]
        assert row["factor"] == node["fairshare"], path
        assert row["rank"] == node["rank"], path
        assert row["ranked"] == ranked
        assert row["usage_gpu_h"] == pytest.approx(node["raw_usage"]), path
        assert row["usage_share"] == node["effective_usage"], path
        assert row["entitled_share"] == node["entitled_share"], path


def _assert_queue_agrees(api: dict, queue: dict, pages: dict, ranked: int) -> None:
    """The queue API, its reasons and the job pages agree with the fairshare API."""
    healthy = HOSTS * GPUS
    note(f"fairshare API: {[(p, n['rank'], n['fairshare']) for p, n in api.items()]}")
    for row in queue["results"]:
        note(f"queue row: {row}")
        node = api[row["project_path"]]
        page = pages[row["job"]]
        assert page["position"] == row["position"]
        assert page["fairshare_factor"] == row["fairshare_factor"]
        assert page["reason"] == row["reason"]
        if node["rank"] is None:  # no entitlement: no factor, no rank
            assert node["entitled_share"] == 0.0 and node["fairshare"] is None
            assert row["fairshare_factor"] is None and row["project_rank"] is None
            assert "no entitlement" in row["reason"], row["reason"]
            continue
        # the stored queue keeps six decimals of the factor
        assert row["fairshare_factor"] == pytest.approx(node["fairshare"], abs=1e-6), row
        assert row["project_rank"] == node["rank"], row
        if "unallocated job" in row["reason"]:
            assert f"(fair-share rank {node['rank']} of {ranked})" in row["reason"], row
            continue
        said = STANDING.search(row["reason"])
        if node["rank"] == 1:  # behind no better-ranked project: no standing quoted
            assert said is None and "of its entitled share" not in row["reason"], row
            continue
        if said is None:  # a job-specific reason (starting next, reserved hosts)
            continue
        percent, days, rank, of, ahead = map(int, said.groups())
        assert (rank, of, ahead) == (node["rank"], ranked, node["rank"] - 1), row["reason"]
        window_s = days * 86400
        relative = 100.0 * node["raw_usage"] * 3600 / (node["entitled_share"] * healthy * window_s)
        assert abs(percent - relative) <= 0.5 + 1e-6, (row["reason"], relative)


def _job(pk: int) -> Job:
    return Job.objects.select_related("cluster", "project").get(pk=pk)
