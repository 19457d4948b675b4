"""A database restored in place (a volume snapshot keeps the server's identity, its
timeline and the database's oid) is caught by its cycle ids: Redis remembers the highest
cycle id the database gave, and a database whose cycle sequence is below it pauses
scheduling until `manage.py reconcile_restore`."""

from __future__ import annotations

import io

import pytest
from django.core.management import CommandError, call_command
from django.db import connection

from ops.selectors import cycle_sequence_value, database_identity, high_water_key, scheduling_paused
from scheduler import tasks
from scheduler.cycle_requests import redis_client
from scheduler.models import CycleRecord
from tests.factories import ClusterFactory

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def forget_high_water():
    """No high water from an earlier test of this database; none left for a later one."""
    client, key = redis_client(), high_water_key(database_identity())
    client.delete(key)
    tasks.run_cycle.worker.reset()
    yield
    client.delete(key)


@pytest.fixture
def unreachable(forget_high_water):
    """A cluster whose adapter answers nothing: each cycle is recorded (as unreachable)."""
    return ClusterFactory(
        name="gone", host_count=1, gpus_per_host=8, adapter_url="http://127.0.0.1:9"
    )


def set_cycle_sequence(value: int) -> None:
    """What a volume snapshot taken when the last cycle id was `value` brings back."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT setval(pg_get_serial_sequence(%s, 'id'), %s)",
            [CycleRecord._meta.db_table, value],
        )


def test_cycle_ids_that_went_back_pause_scheduling_until_the_reconcile(
    tree, forget_high_water, make_simulated_cluster
):
    cluster = make_simulated_cluster("snap", hosts=1, gpus_per_host=8, cycle_s=1)
    tasks.run_cycle(cluster.pk)
    snapshot = cycle_sequence_value()
    for _ in range(3):
        assert tasks.run_cycle(cluster.pk) is not None
    remembered = int(redis_client().get(high_water_key(database_identity())))
    assert remembered == cycle_sequence_value() == snapshot + 3
    assert scheduling_paused() == ""

    set_cycle_sequence(snapshot)  # restored in place: same identity, older contents
    CycleRecord.objects.filter(pk__gt=snapshot).delete()
    cycles = CycleRecord.objects.count()
    assert tasks.run_cycle(cluster.pk) is None and tasks.enqueue_due_cycles() == 0
    assert CycleRecord.objects.count() == cycles
    reason = scheduling_paused()
    assert "restored in place" in reason and f"cycle {remembered}" in reason

    call_command("reconcile_restore", stdout=io.StringIO(), stderr=io.StringIO())
    assert scheduling_paused() == ""
    reconciled = CycleRecord.objects.count()  # the reconcile's own cycle
    assert tasks.run_cycle(cluster.pk) is not None  # cycles run again, ids from the restore
    assert CycleRecord.objects.count() == reconciled + 1
    assert scheduling_paused() == ""


def test_deleted_cycle_records_do_not_pause_scheduling(unreachable):
    """Pruning cycle records (retention) does not lower the sequence."""
    for _ in range(2):
        tasks.run_cycle(unreachable.pk)
    CycleRecord.objects.all().delete()
    assert tasks.run_cycle(unreachable.pk) is not None
    assert scheduling_paused() == ""


def test_without_redis_the_cycle_runs_and_nothing_is_paused(unreachable, settings):
    settings.REDIS_URL = "redis://127.0.0.1:1/0"
    assert tasks.run_cycle(unreachable.pk) is not None
    assert scheduling_paused() == ""


def test_an_operator_pauses_scheduling_and_the_reconcile_resumes_it(tree, make_simulated_cluster):
    """`manage.py pause_scheduling` (before restoring a snapshot taken minutes ago, which
    the cycle ids cannot tell apart), then `reconcile_restore`."""
    cluster = make_simulated_cluster("held", hosts=1, gpus_per_host=8, cycle_s=1)
    with pytest.raises(CommandError, match="--reason"):
        call_command("pause_scheduling", "--reason", " ", stdout=io.StringIO())
    assert scheduling_paused() == ""
    out = io.StringIO()
    call_command("pause_scheduling", "--reason", "restoring last night's snapshot", stdout=out)
    assert "restoring last night's snapshot" in scheduling_paused()
    assert "scheduling paused" in out.getvalue()
    assert tasks.run_cycle(cluster.pk) is None
    call_command("reconcile_restore", stdout=io.StringIO(), stderr=io.StringIO())
    assert scheduling_paused() == "" and tasks.run_cycle(cluster.pk) is not None
