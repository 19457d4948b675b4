"""Issue 29's acceptance: a client generated from the served schema with
openapi-python-client (`--fail-on-warning`), installed into a temporary directory
offline, runs the whole scenario through its generated functions only, and every
response validates against the schema (openapi-core, OAS 3.1, formats included) and against
its OpenAPI 3.0.3 form (`?oas=3.0`, config.oas30; strict OAS 3.0) alike."""

from __future__ import annotations

import datetime as dt
import importlib
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from budgets.models import Membership
from scheduler.models import JobState
from tests.api.openapi_check import OPENAPI_BIN, SchemaChecker, generate_client
from tests.dashboards.data import attempt, cluster_hours, hour_ago, job, project_hours
from tests.factories import ClusterFactory, HostFactory

pytestmark = pytest.mark.django_db(transaction=True)


def generate_and_install(schema: dict, tmp: Path) -> None:
    """Generate the client package and pip-install it (no index, no dependencies: httpx,
    attrs and python-dateutil are in the project's environment) into `tmp/site`."""
    package = generate_client(schema, tmp, meta="setup", output="allot-client")
    installed = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--quiet", "--no-index", "--no-deps",
         "--no-build-isolation", "--target", str(tmp / "site"), str(package)],
        env={**os.environ, "PATH": f"{OPENAPI_BIN}{os.pathsep}{os.environ.get('PATH', '')}"},
        capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert installed.returncode == 0, installed.stdout + installed.stderr
    sys.path.insert(0, str(tmp / "site"))
    importlib.invalidate_caches()


def test_a_generated_client_runs_the_whole_scenario(mid_hour, live_server, tree, tmp_path):
    """`mid_hour` first: every row, the tree's import included, is stamped by one clock."""
    cluster = ClusterFactory(name="gpu", host_count=2, gpus_per_host=8)
    for i in range(2):
        HostFactory(cluster=cluster, name=f"node{i}", gpus=8)
    tree.user("lead-a")  # manages prog-a (a1, a2); password "pw"
    history = seed_history(cluster, tree)
    schema = httpx.get(f"{live_server.url}/api/schema/?format=json").json()
    schema_30 = httpx.get(f"{live_server.url}/api/schema/?format=json&oas=3.0").json()
    generate_and_install(schema, tmp_path)
    try:
        run_scenario(live_server.url, schema, tree, history, schema_30)
    finally:
        sys.path.remove(str(tmp_path / "site"))
        for name in [
            m for m in sys.modules if m == "allot_client" or m.startswith("allot_client.")
        ]:
            del sys.modules[name]


def seed_history(cluster, tree) -> dict[str, set]:
    """Ledger hours and started jobs enough for every reporting list to span several pages
    of two (the mid-hour clock keeps their hours in the default window); the keys of the
    rows each list must return: occupancy by hour, usage under prog-a by (hour, project
    id), waits by (hour, kind), and the ids of the jobs (all ended, none in the queue)."""
    cluster_hours(cluster, 5, within_entitlement_gpu_h=4.0)
    a1, a2, b1 = tree.node("a1"), tree.node("a2"), tree.node("b1")
    for project in (a1, a2, b1):  # b1 is outside prog-a: the usage walk leaves it out
        project_hours(cluster, project, 3, allocated_gpu_h=2.0, demand_gpu_h=3.0)
    ann = tree.user("ann")
    started = [("training", 1), ("training", 2), ("training", 3), ("debug", 1), ("debug", 2)]
    jobs = set()
    for kind, hours in started:
        at = hour_ago(hours) + dt.timedelta(minutes=10)
        done = job(cluster, a1, ann, kind=kind, state=JobState.SUCCEEDED,
                   submitted_at=at - dt.timedelta(minutes=5))  # fmt: skip
        attempt(done, started_at=at, ended_at=at + dt.timedelta(minutes=20))
        jobs.add(done.pk)
    return {
        "occupancy": {hour_ago(h) for h in range(1, 6)},
        "usage": {(hour_ago(h), p.pk) for h in range(1, 4) for p in (a1, a2)},
        "waits": {(hour_ago(h), kind) for kind, h in started},
        "jobs": jobs,
    }


def run_scenario(
    base_url: str, schema: dict, tree, history: dict[str, set], schema_30: dict
) -> None:
    """The whole scenario through the generated functions, every response validated
    against `schema` (3.1) and `schema_30` (its 3.0 form)."""
    checker, checker_30 = SchemaChecker(schema, base_url), SchemaChecker(schema_30, base_url)
    api = _sign_in(base_url, [checker, checker_30])
    prog_a, a1 = _check_reads(api)
    submitted = _check_submit(api)
    _check_lists(api, submitted, history)
    _check_budget_changes(api, prog_a, a1)
    _check_cancel(api, submitted[0])
    _check_error(api, a1)
    operations = {re.sub(r"/\d+/", "/{id}/", exchange) for exchange in checker.checked}
    assert len(operations) == 20, sorted(operations)  # each one's every response validated
    assert checker_30.checked == checker.checked  # ... by the 3.0 document too


def _sign_in(base_url: str, checkers: list[SchemaChecker]):
    """A client signed in as lead-a, its responses checked against the schemas."""
    from allot_client import AuthenticatedClient, Client
    from allot_client.api.v1 import auth_token_create
    from allot_client.models import TokenCreateInputRequest

    hooks = {"event_hooks": {"response": [checker.check for checker in checkers]}}
    anonymous = Client(base_url=base_url, httpx_args=hooks, raise_on_unexpected_status=True)
    signed_in = auth_token_create.sync_detailed(
        client=anonymous, body=TokenCreateInputRequest(username="lead-a", password="pw")
    )
    assert signed_in.status_code == 200
    return AuthenticatedClient(  # the generator's default prefix: Bearer
        base_url=base_url, token=signed_in.parsed.token, httpx_args=hooks,
        raise_on_unexpected_status=True,
    )  # fmt: skip


def _check_reads(api) -> tuple:
    """Clusters, the tree, memberships and nodes; (prog-a, a1) of the tree."""
    from allot_client.api.v1 import clusters_list, memberships_list, nodes_list, tree_retrieve

    (gpu,) = clusters_list.sync(client=api)
    assert gpu.name == "gpu" and gpu.last_cycle is None
    root = tree_retrieve.sync(client=api).tree
    prog_a = next(c for c in root.children if c.name == "prog-a")
    a1 = next(c for c in prog_a.children if c.name == "a1")
    assert a1.children is not None or a1.kind.value == "project"
    memberships = _walk(api, memberships_list)
    assert len(memberships) == Membership.objects.count() > 4  # more than two pages
    assert {m.user for m in memberships} >= {"ann", "lead-a"}
    assert len(nodes_list.sync(client=api)) == 6
    return prog_a, a1


def _check_submit(api) -> list[int]:
    """Submit with an Idempotency-Key, replay it, reuse it with another body, dry run;
    the ids of the jobs submitted."""
    from allot_client.api.v1 import jobs_create, jobs_retrieve
    from allot_client.models import Error, JobSubmitInputRequest

    body = JobSubmitInputRequest(project="org/prog-a/a1", cluster="gpu", gpus=1, min_runtime_s=60, array=3)  # fmt: skip
    first = jobs_create.sync_detailed(client=api, body=body, idempotency_key="k-1")
    assert first.status_code == 201 and first.parsed.count == 3 and not first.parsed.replayed
    again = jobs_create.sync_detailed(client=api, body=body, idempotency_key="k-1")
    assert again.status_code == 201 and again.parsed.replayed
    assert again.headers["Idempotent-Replayed"] == "true"
    assert [j.id for j in again.parsed.jobs] == [j.id for j in first.parsed.jobs]
    other = JobSubmitInputRequest(project="org/prog-a/a1", cluster="gpu", gpus=2, min_runtime_s=60)  # fmt: skip
    reused = jobs_create.sync_detailed(client=api, body=other, idempotency_key="k-1")
    assert reused.status_code == 422 and isinstance(reused.parsed, Error)
    dry = jobs_create.sync_detailed(client=api, body=other, dry_run=True)
    assert dry.status_code == 200 and dry.parsed.dry_run and dry.parsed.count == 1
    job_id = first.parsed.jobs[0].id
    detail = jobs_retrieve.sync(client=api, job_id=job_id)
    assert detail.state.value == "pending" and detail.spec is not None
    return [j.id for j in first.parsed.jobs]


def _walk(api, operation, **query) -> list:
    """Every row of a list operation, page by page (two a page) to its last page, each
    page's `count` the same; no row returned twice (compared by its whole content)."""
    rows, offset, counts = [], 0, set()
    while True:
        page = operation.sync(client=api, limit=2, offset=offset, **query)
        rows += page.results
        counts.add(page.count)
        if page.next_ is None:
            break
        assert len(page.results) == 2, (operation.__name__, offset, page)
        offset += 2
    assert counts == {len(rows)}, (operation.__name__, counts, len(rows))
    contents = [json.dumps(row.to_dict(), sort_keys=True) for row in rows]
    assert len(set(contents)) == len(contents), (operation.__name__, contents)
    return rows


def _check_lists(api, submitted: list[int], history: dict[str, set]) -> None:
    """Every list to its last page, its rows those written (`submitted` and `history`,
    `seed_history`): jobs, hosts, queue, usage, occupancy, waits; and the fair-share nodes."""
    from allot_client.api.v1 import (
        fairshare_retrieve,
        hosts_list,
        jobs_list,
        occupancy_list,
        queue_list,
        usage_list,
        waits_list,
    )  # fmt: skip

    jobs = _walk(api, jobs_list, cluster="gpu")
    assert sorted(j.id for j in jobs) == sorted([*submitted, *history["jobs"]])
    assert len(_walk(api, hosts_list, cluster="gpu")) == 2
    _walk(api, queue_list, cluster="gpu")
    usage = _walk(api, usage_list, cluster="gpu", project="org/prog-a")
    assert [(u.start, u.project) for u in usage] == sorted(history["usage"])
    occupancy = _walk(api, occupancy_list, cluster="gpu")
    assert [o.start for o in occupancy] == sorted(history["occupancy"])
    waits = _walk(api, waits_list, cluster="gpu")
    assert [(w.at, w.kind) for w in waits] == sorted(history["waits"])
    assert {w.jobs for w in waits} == {1}
    shares = fairshare_retrieve.sync(client=api, cluster="gpu")
    assert {n.path for n in shares.nodes} >= {"org/prog-a/a1"}


def _check_budget_changes(api, prog_a, a1) -> None:
    """A what-if preview, a scheduled budget change and its cancellation."""
    from allot_client.api.v1 import (
        budget_changes_cancel,
        budget_changes_create,
        budget_changes_list,
        previews_create,
        previews_retrieve,
    )  # fmt: skip
    from allot_client.models import (
        BudgetCancelInputRequest,
        BudgetChangeInputRequest,
        PreviewInputRequest,
        PreviewWeightInputRequest,
        WeightChangeInputRequest,
    )  # fmt: skip

    preview = previews_create.sync(
        client=api,
        body=PreviewInputRequest(
            node=prog_a.id, cluster="gpu", weights=[PreviewWeightInputRequest(node=a1.id, weight=3)]
        ),
    )
    assert previews_retrieve.sync(client=api, preview_id=preview.id).node == prog_a.id
    (proposed,) = preview.weights  # the node named as a budget change's items name it
    named = (proposed.node, proposed.node_path, proposed.node_name)
    assert named == (a1.id, "org/prog-a/a1", "a1")
    scheduled = budget_changes_create.sync(
        client=api,
        body=BudgetChangeInputRequest(
            reason="next quarter",
            changes=[WeightChangeInputRequest(node=a1.id, weight="60")],
            effective_at=dt.datetime.now(dt.UTC) + dt.timedelta(days=90),
        ),
    )
    assert scheduled.kind.value == "scheduled"
    assert named in {(i.node, i.node_path, i.node_name) for i in scheduled.items}
    cancelled = budget_changes_cancel.sync(
        client=api, event_id=scheduled.id, body=BudgetCancelInputRequest(reason="not yet")
    )
    assert cancelled.scheduled_event == scheduled.id
    history = _walk(api, budget_changes_list)
    assert [e.id for e in history[:2]] == [cancelled.id, scheduled.id]


def _check_cancel(api, job_id: int) -> None:
    """Cancelling a job returns it cancelled."""
    from allot_client.api.v1 import jobs_cancel

    assert jobs_cancel.sync(client=api, job_id=job_id).state.value == "cancelled"


def _check_error(api, a1) -> None:
    """A 400 parsed into the error model, naming the field."""
    from allot_client.api.v1 import budget_changes_create
    from allot_client.models import BudgetChangeInputRequest, Error, WeightChangeInputRequest

    bad = budget_changes_create.sync_detailed(
        client=api,
        body=BudgetChangeInputRequest(reason="r", changes=[WeightChangeInputRequest(node=a1.id, weight="-5")]),
    )  # fmt: skip
    assert bad.status_code == 400 and isinstance(bad.parsed, Error)
    assert bad.parsed.field == "changes[0].weight"
