"""Restore without reruns, end to end with the simulated cluster process: back up, run,
finish and cancel jobs, restore the backup into a fresh database, start: scheduling stays
paused until `manage.py reconcile_restore` has reconciled the cluster, after which no job
runs again and no cancelled job comes back."""

from __future__ import annotations

import functools
import io
import subprocess
import time

import psycopg
import pytest
from django.core.management import call_command
from django.db import connection
from django.utils import timezone

from ops.selectors import scheduling_health, scheduling_paused
from scheduler import tasks
from scheduler.models import CycleRecord, Job, JobEvent, JobState
from scheduler.services.jobs import job_cancel
from tests.support.live import submit_job
from tests.support.postgres import conninfo, pg_tool

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]


def settle(cluster, predicate, *, what: str, timeout_s: float = 60):
    """Run cycles (as beat would ask for them) until `predicate()` holds."""
    deadline = time.monotonic() + timeout_s
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        tasks.run_cycle(cluster.pk)
        time.sleep(0.2)


def states(*jobs: Job) -> list[str]:
    return [Job.objects.get(pk=j.pk).state for j in jobs]


def runs_on_cluster(control) -> dict[str, str]:
    """attempt id -> state of every Allot run the cluster reports."""
    return {j["attempt_id"]: j["state"] for j in control.jobs() if j["attempt_id"]}


@pytest.fixture
def restored_database():
    """`backup()` dumps the test database; `restore()` restores the dump into a new
    database and points Django at it; the test database is used again afterwards."""
    server_major = connection.pg_version // 10000
    pg_dump, pg_restore = pg_tool("pg_dump", server_major), pg_tool("pg_restore", server_major)
    if not (pg_dump and pg_restore):
        pytest.skip(f"no pg_dump/pg_restore for PostgreSQL {server_major} on this machine")
    source = connection.settings_dict["NAME"]
    restored = f"{source}_restored"
    dump: list[bytes] = []

    class Steps:
        def backup(self) -> None:
            dump.append(
                subprocess.run(
                    [pg_dump, "--format=custom", "--no-owner", f"--dbname={conninfo(source)}"],
                    check=True,
                    capture_output=True,
                ).stdout
            )

        def restore(self) -> None:
            with psycopg.connect(conninfo(source), autocommit=True) as admin:
                admin.execute(f'DROP DATABASE IF EXISTS "{restored}" WITH (FORCE)')
                admin.execute(f'CREATE DATABASE "{restored}"')
            subprocess.run(
                [pg_restore, "--no-owner", "--exit-on-error", f"--dbname={conninfo(restored)}"],
                input=dump[0],
                check=True,
                capture_output=True,
            )
            connection.close()
            connection.settings_dict["NAME"] = restored
            tasks.run_cycle.worker.reset()  # a restarted worker starts cold

    try:
        yield Steps()
    finally:
        connection.close()
        connection.settings_dict["NAME"] = source
        with psycopg.connect(conninfo(source), autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{restored}" WITH (FORCE)')


def _submit(cluster, tree, user, name: str, duration_s: int, priority: int) -> Job:
    """A protected 8-GPU job of a1 (`duration_s` simulated seconds)."""
    return submit_job(
        cluster=cluster,
        project=tree.node("a1"),
        user=user,
        at=timezone.now(),
        gpus=8,
        min_runtime_s=3600,  # protected: nothing is preempted in this test
        duration_s=duration_s,  # simulated seconds; the cluster runs 60x faster
        priority=priority,
        name=name,
    )


def test_backup_work_restore_reconcile_reruns_nothing_and_resurrects_nothing(
    tree, make_simulated_cluster, sim_control, restored_database
):
    cluster = make_simulated_cluster("sim", hosts=2, gpus_per_host=8, speed=60, cycle_s=1)
    control = sim_control("sim")
    ann = tree.user("ann")
    submit = functools.partial(_submit, cluster, tree, ann)

    # before the backup: F finished; C and A run; D and E wait for a host
    f = submit("f", 60, 9)
    settle(cluster, lambda: states(f) == ["succeeded"], what="f to finish")
    c, a = submit("c", 36_000, 8), submit("a", 240, 7)
    d, e = submit("d", 120, 6), submit("e", 36_000, 5)
    settle(cluster, lambda: states(c, a) == ["running", "running"], what="c and a to run")
    assert states(d, e) == ["pending", "pending"]
    restored_database.backup()

    # after it: A finishes and D runs and finishes in its place; C is cancelled running
    # and E starts in its place, and is cancelled too; G, submitted now, runs
    settle(cluster, lambda: states(a, d) == ["succeeded", "running"], what="a, then d")
    job_cancel(actor=ann, job_id=c.pk)
    settle(cluster, lambda: states(c, e) == ["cancelled", "running"], what="c cancelled, e")
    job_cancel(actor=ann, job_id=e.pk)
    g = submit("g", 36_000, 0)
    settle(
        cluster,
        lambda: states(d, e, g) == ["succeeded", "cancelled", "running"],
        what="d to finish, e cancelled, g running",
    )
    truth = runs_on_cluster(control)
    assert len(truth) == 6  # one run each of a, c, d, e, f, g

    restored_database.restore()
    assert states(f, c, a, d, e) == ["succeeded", "running", "running", "pending", "pending"]
    # a cycle asked for on the restored database does nothing: scheduling is paused
    cycles = CycleRecord.objects.count()
    assert tasks.run_cycle(cluster.pk) is None and tasks.enqueue_due_cycles() == 0
    assert CycleRecord.objects.count() == cycles
    assert "restored" in scheduling_paused()
    assert "paused" in scheduling_health().stale

    out = io.StringIO()
    call_command("reconcile_restore", stdout=out)
    report = out.getvalue()
    assert "scheduling resumed" in report and not scheduling_paused()
    assert any(run.startswith(f"allot-{g.pk}-1-") for run in report.split()), report

    # scheduling again, for a while: nothing starts that already ran
    settle(
        cluster,
        lambda: (
            states(a, d) == ["succeeded", "succeeded"]
            and states(c, e) == ["cancelled", "cancelled"]
        ),
        what="the restored jobs to reach the cluster's truth",
    )
    for _ in range(10):
        tasks.run_cycle(cluster.pk)
        time.sleep(0.2)
    after = runs_on_cluster(control)
    reruns = set(after) - set(truth)
    assert reruns == set(), f"runs started again after the restore: {reruns}"
    assert states(f, a, d, c, e) == ["succeeded"] * 3 + ["cancelled"] * 2
    resurrected = Job.objects.filter(pk__in=[c.pk, e.pk]).exclude(state=JobState.CANCELLED)
    assert not resurrected.exists()
    assert not Job.objects.filter(pk=g.pk).exists()  # submitted after the backup: not here
    adopted = JobEvent.objects.filter(reason_code="adopted_after_restore")
    assert {ev.job_id for ev in adopted} == {d.pk, e.pk}  # started after the backup
    # new jobs are numbered after the lost one, whose run the cluster still reports
    assert submit("h", 60, 0).pk > g.pk
