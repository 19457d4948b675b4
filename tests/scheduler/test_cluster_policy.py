"""Changing a cluster's scheduling policy: `cluster_policy_update` (validated, audited,
staff only), `GET`/`PATCH /api/v1/clusters/{id}/`, `manage.py cluster_set`, and the
admin, where the policy of an existing cluster is read-only."""

from __future__ import annotations

import dataclasses
import datetime as dt
import re
from io import StringIO

import pytest
from django.core.management import CommandError, call_command, load_command_class
from django.db import DatabaseError, connection, transaction
from django.test import Client
from django.utils import timezone
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from rest_framework.test import APIClient

from config.errors import NotFound, PermissionDenied, ValidationFailed
from scheduler.core.engine.types import Policy
from scheduler.core.sim.model import SimConfig
from scheduler.management.options import POLICY_OPTIONS, SHARED_POLICY_FIELDS
from scheduler.models import Cluster, ClusterPolicyEvent, CycleRecord, HostHealth, QueueSnapshot
from scheduler.selectors.now import short_reserve_cost
from scheduler.selectors.translate import policy_for_cluster
from scheduler.services.clusters import (
    POLICY_FIELDS,
    POLICY_RULES,
    cluster_operators_set,
    cluster_policy_update,
)
from scheduler.services.previews import sim_config_for_cluster
from tests.commands import run_manage
from tests.factories import ClusterFactory, HostFactory, SuperUserFactory, UserFactory
from tests.roles import participant

pytestmark = pytest.mark.django_db

# ClusterFactory's policy: the model's defaults
DEFAULTS = {
    "cycle_s": 10,
    "grace_s": 30,
    "max_min_runtime_s": 8 * 3600,
    "lookback_s": 7 * 86400,
    "half_life_s": None,
    "short_reserve_hosts": 0,
    "short_reserve_auto": True,
    "short_job_max_s": 900,
    "share_floor": True,
    "consolidate": True,
    "reservation_admit_min": 60,
    "idle_reclaim": False,
    "idle_threshold_pct": 5,
    "idle_reclaim_after_s": 1800,
    "idle_notify_owner": True,
}


@pytest.fixture
def cluster() -> Cluster:
    cluster = ClusterFactory(name="gpu", host_count=2, gpus_per_host=8)
    HostFactory(cluster=cluster, name="node0")
    HostFactory(cluster=cluster, name="node1", health=HostHealth.DRAINING)
    return cluster


@pytest.fixture
def ops():
    return UserFactory(username="ops", is_staff=True)


def policy(cluster: Cluster) -> dict:
    cluster.refresh_from_db()
    return {name: getattr(cluster, name) for name in POLICY_FIELDS}


def client_as(user) -> APIClient:
    client = APIClient()
    if user is not None:
        client.force_authenticate(user)
    return client


# ---------------------------------------------------------------- the service


def test_a_change_saves_the_fields_and_records_one_event_with_before_and_after(cluster, ops):
    assert policy(cluster) == DEFAULTS
    cluster_policy_update(
        actor=ops,
        cluster_id=cluster.pk,
        changes={"short_reserve_hosts": 1, "cycle_s": 10, "half_life_s": 3 * 86400},
        reason="  debug jobs wait too long  ",
    )
    assert policy(cluster) == {**DEFAULTS, "short_reserve_hosts": 1, "half_life_s": 259200}
    event = ClusterPolicyEvent.objects.get(cluster=cluster)
    # only what changed (cycle_s was already 10)
    assert event.changes == {"short_reserve_hosts": [0, 1], "half_life_s": [None, 259200]}
    assert (event.reason, event.actor, event.actor_name) == ("debug jobs wait too long", ops, "ops")


def test_a_change_asks_for_a_cycle_of_the_cluster_after_commit(
    cluster, ops, django_capture_on_commit_callbacks, monkeypatch
):
    from scheduler import cycle_requests

    asked: list[int] = []
    monkeypatch.setattr(cycle_requests, "enqueue_cycle", asked.append)
    with django_capture_on_commit_callbacks(execute=True):
        cluster_policy_update(actor=ops, cluster_id=cluster.pk, changes={"grace_s": 60}, reason="r")
    assert asked == [cluster.pk]
    with django_capture_on_commit_callbacks(execute=True):  # no change, no cycle
        cluster_policy_update(actor=ops, cluster_id=cluster.pk, changes={"grace_s": 60}, reason="r")
    assert asked == [cluster.pk]


def test_setting_the_values_it_has_records_nothing(cluster, ops):
    returned = cluster_policy_update(
        actor=ops, cluster_id=cluster.pk, changes={"cycle_s": 10, "half_life_s": None}, reason="r"
    )
    assert returned.pk == cluster.pk
    assert policy(cluster) == DEFAULTS
    assert not ClusterPolicyEvent.objects.exists()


def test_the_system_may_change_it_and_is_recorded_as_such(cluster):
    cluster_policy_update(actor=None, cluster_id=cluster.pk, changes={"grace_s": 0}, reason="r")
    event = ClusterPolicyEvent.objects.get()
    assert (event.actor, event.actor_name, event.changes) == (None, "system", {"grace_s": [30, 0]})
    assert policy(cluster)["grace_s"] == 0


def test_a_superuser_may_change_it(cluster):
    root = SuperUserFactory(username="root", is_staff=False)
    cluster_policy_update(actor=root, cluster_id=cluster.pk, changes={"cycle_s": 5}, reason="r")
    assert policy(cluster)["cycle_s"] == 5
    assert ClusterPolicyEvent.objects.get().actor_name == "root"


def test_a_user_who_is_not_staff_may_not_and_nothing_is_stored(cluster):
    operator = UserFactory(username="operator")
    cluster.operators.add(operator)  # operators drain hosts; the policy is staff's
    with pytest.raises(PermissionDenied, match="Only staff may change the policy of cluster 'gpu'"):
        cluster_policy_update(
            actor=operator, cluster_id=cluster.pk, changes={"cycle_s": 5}, reason="r"
        )
    assert policy(cluster) == DEFAULTS
    assert not ClusterPolicyEvent.objects.exists()


def test_a_missing_cluster_is_not_found(ops):
    with pytest.raises(NotFound, match="There is no cluster with id 999999."):
        cluster_policy_update(actor=ops, cluster_id=999999, changes={"cycle_s": 5}, reason="r")


@pytest.mark.parametrize(
    ("changes", "field", "message"),
    [
        ({"cycles": 5}, "cycles", "cycles: not a policy field; the policy fields are cycle_s, "),
        ({}, "changes", "nothing to change"),
        ({"cycle_s": "abc"}, "cycle_s", "must be a whole number between 1 and 86400, got 'abc'"),
        ({"cycle_s": True}, "cycle_s", "cycle_s: must be a whole number between 1 and 86400"),
        ({"cycle_s": 2.5}, "cycle_s", "got 2.5"),
        ({"cycle_s": None}, "cycle_s", "must be a whole number"),
        ({"cycle_s": 0}, "cycle_s", "cycle_s: must be between 1 and 86400, got 0"),
        ({"grace_s": -1}, "grace_s", "grace_s: must be between 0 and 86400, got -1"),
        ({"max_min_runtime_s": 31 * 86400}, "max_min_runtime_s", "between 1 and 2592000"),
        ({"lookback_s": 60}, "lookback_s", "lookback_s: must be between 3600 and 31536000, got 60"),
        ({"lookback_s": 366 * 86400}, "lookback_s", "between 3600 and 31536000"),
        (
            {"half_life_s": 0},
            "half_life_s",
            "half_life_s: must be between 3600 and 31536000, got 0",
        ),
        (
            {"half_life_s": "3d"},
            "half_life_s",
            r"must be null \(no decay\) or a whole number between",
        ),
        ({"short_reserve_hosts": -1}, "short_reserve_hosts", "between 0 and 4096, got -1"),
        ({"short_reserve_auto": 0}, "short_reserve_auto", "must be true or false, got 0"),
        ({"short_reserve_auto": "off"}, "short_reserve_auto", "true or false, got 'off'"),
        ({"short_reserve_auto": None}, "short_reserve_auto", "true or false, got None"),
        ({"share_floor": "on"}, "share_floor", "share_floor: must be true or false, got 'on'"),
        ({"short_job_max_s": 0}, "short_job_max_s", "short_job_max_s: must be between 1 and"),
        ({"idle_reclaim": 1}, "idle_reclaim", "idle_reclaim: must be true or false, got 1"),
        ({"idle_reclaim": "on"}, "idle_reclaim", "must be true or false, got 'on'"),
        ({"idle_notify_owner": None}, "idle_notify_owner", "must be true or false, got None"),
        ({"idle_threshold_pct": 101}, "idle_threshold_pct", "between 0 and 100, got 101"),
        ({"idle_reclaim_after_s": 59}, "idle_reclaim_after_s", "between 60 and 86400, got 59"),
        ({"reservation_admit_min": 1441}, "reservation_admit_min", "between 0 and 1440, got 1441"),
        ({"reservation_admit_min": -1}, "reservation_admit_min", "between 0 and 1440, got -1"),
        ({"reservation_admit_min": False}, "reservation_admit_min", "whole number between 0"),
        # the cross-field rule, on the policy the change makes
        (
            {"short_job_max_s": 9 * 3600},
            "short_job_max_s",
            "short_job_max_s: must be between 1 and 28800, got 32400",
        ),
        (
            {"max_min_runtime_s": 600},
            "max_min_runtime_s",
            r"max_min_runtime_s: must be at least short_job_max_s \(900\), got 600",
        ),
        (
            {"max_min_runtime_s": 3600, "short_job_max_s": 7200},
            "short_job_max_s",
            "short_job_max_s: must be between 1 and 3600, got 7200",
        ),
    ],
)
def test_bad_changes_are_refused_naming_the_field_and_nothing_is_stored(
    cluster, ops, changes, field, message
):
    with pytest.raises(ValidationFailed, match=message) as info:
        cluster_policy_update(actor=ops, cluster_id=cluster.pk, changes=changes, reason="r")
    assert info.value.field == field
    assert policy(cluster) == DEFAULTS
    assert not ClusterPolicyEvent.objects.exists()


def test_idle_reclaim_is_changed_and_audited_like_the_rest(cluster, ops):
    cluster_policy_update(
        actor=ops,
        cluster_id=cluster.pk,
        changes={"idle_reclaim": True, "idle_threshold_pct": 10, "idle_reclaim_after_s": 3600},
        reason="idle sessions hold GPUs",
    )
    assert policy(cluster) == {
        **DEFAULTS,
        "idle_reclaim": True,
        "idle_threshold_pct": 10,
        "idle_reclaim_after_s": 3600,
    }
    event = ClusterPolicyEvent.objects.get(cluster=cluster)
    assert event.changes == {
        "idle_reclaim": [False, True],
        "idle_threshold_pct": [5, 10],
        "idle_reclaim_after_s": [1800, 3600],
    }
    response = client_as(ops).patch(
        f"/api/v1/clusters/{cluster.pk}/",
        {"idle_notify_owner": False, "reason": "no mails"},
        format="json",
    )
    assert response.status_code == 200, response.json()
    detail = client_as(ops).get(f"/api/v1/clusters/{cluster.pk}/").json()
    assert detail["policy"]["idle_notify_owner"] is False
    assert detail["policy"]["idle_reclaim"] is True
    assert detail["policy_events"][0]["changes"] == {"idle_notify_owner": [True, False]}
    out = StringIO()
    call_command(
        "cluster_set",
        "gpu",
        "--reason",
        "r",
        "--idle-reclaim",
        "off",
        "--idle-after",
        "45m",
        stdout=out,
    )
    assert "idle_reclaim True -> False" in out.getvalue()
    assert policy(cluster)["idle_reclaim_after_s"] == 2700
    with pytest.raises(CommandError, match="--idle-reclaim: must be on or off"):
        call_command("cluster_set", "gpu", "--reason", "r", "--idle-reclaim", "yes")


def test_lowering_both_together_is_fine(cluster, ops):
    cluster_policy_update(
        actor=ops,
        cluster_id=cluster.pk,
        changes={"max_min_runtime_s": 600, "short_job_max_s": 300},
        reason="short protection",
    )
    assert (policy(cluster)["max_min_runtime_s"], policy(cluster)["short_job_max_s"]) == (600, 300)
    assert ClusterPolicyEvent.objects.get().changes == {
        "max_min_runtime_s": [28800, 600],
        "short_job_max_s": [900, 300],
    }


@pytest.mark.parametrize(
    ("reason", "message"),
    [
        (None, "A reason is required"),
        ("   ", "A reason is required"),
        (5, "reason must be text, got int"),
        ("x" * 501, "reason has 501 characters; at most 500 are allowed."),
        ("bad\x00byte", "control or invisible character U\\+0000"),
    ],
)
def test_a_reason_is_required(cluster, ops, reason, message):
    with pytest.raises(ValidationFailed, match=message) as info:
        cluster_policy_update(
            actor=ops, cluster_id=cluster.pk, changes={"cycle_s": 5}, reason=reason
        )
    assert info.value.field == "reason"
    assert policy(cluster) == DEFAULTS
    assert not ClusterPolicyEvent.objects.exists()


def test_policy_events_cannot_be_rewritten(cluster, ops):
    cluster_policy_update(actor=ops, cluster_id=cluster.pk, changes={"cycle_s": 5}, reason="r")
    event = ClusterPolicyEvent.objects.get()
    for sql in (
        "UPDATE scheduler_clusterpolicyevent SET reason = 'x' WHERE id = %s",
        "DELETE FROM scheduler_clusterpolicyevent WHERE id = %s",
    ):
        with pytest.raises(DatabaseError, match="(?i)cannot|append"), transaction.atomic():
            connection.cursor().execute(sql, [event.pk])
    assert ClusterPolicyEvent.objects.get(pk=event.pk).reason == "r"


# ---------------------------------------------------------------- the API


def test_the_detail_is_the_list_row_plus_the_policy_changes_and_refusals(cluster, ops):
    ann = participant("ann")
    (row,) = client_as(ann).get("/api/v1/clusters/").json()
    detail = client_as(ann).get(f"/api/v1/clusters/{cluster.pk}/").json()
    assert detail == {
        **row,
        "policy_events": [],
        "short_reserve": NO_RESERVE,
        "sbatch_refusals": [],
    }
    assert (detail["hosts"], detail["gpus"], detail["healthy_gpus"]) == (2, 16, 8)
    assert detail["draining_hosts"] == 1 and detail["policy"] == DEFAULTS


NO_RESERVE = {
    "adaptive": True,
    "held_hosts": [],
    "held_gpus": 0,
    "reserve_cost_gpu_h": 0.0,
    "short_waits_saved": 0,
    "window_days": 7,
}


def test_the_detail_shows_what_the_short_job_reserve_holds_and_cost_over_7_days(cluster):
    now = timezone.now()

    def cycle(ago: dt.timedelta, unused: int, starts: int) -> CycleRecord:
        return CycleRecord.objects.create(
            cluster=cluster, started_at=now - ago, short_reserve_hosts=["node0"],
            short_reserve_gpus=8, short_reserve_unused_gpus=unused, short_reserve_starts=starts,
        )  # fmt: skip

    cycle(dt.timedelta(days=8), 8, 5)  # outside the window
    for minutes in range(360):  # an hour of 10 s cycles, 6 GPUs unused in each
        cycle(dt.timedelta(minutes=minutes, seconds=30), 6, 0)
    last = cycle(dt.timedelta(seconds=5), 0, 2)
    QueueSnapshot.objects.create(cluster=cluster, cycle=last, computed_at=now)
    body = client_as(participant("ann")).get(f"/api/v1/clusters/{cluster.pk}/").json()
    assert body["short_reserve"] == {
        **NO_RESERVE,
        "held_hosts": ["node0"],
        "held_gpus": 8,
        "reserve_cost_gpu_h": 6.0,  # 360 cycles x 6 GPUs x 10 s
        "short_waits_saved": 2,
    }


def test_the_reserve_cost_weights_each_cycle_by_the_time_until_the_next(cluster):
    """Submits, cancels and host changes run cycles between the periodic ones: a cycle's
    unused held GPUs count until the next cycle, at most the cycle period (a longer gap is
    an outage), the last one until now (docs/concepts.md#short-job-reserve-cost)."""
    cluster.cycle_s = 300
    cluster.save()
    now = timezone.now().replace(microsecond=0)
    cycles = [  # (seconds before now, unused GPUs, short starts)
        (8 * 86400, 80, 5),  # outside the 7 days
        (3600, 40, 0),  # 120 s to the next: 40 x 120 = 4,800 GPU-s
        (3480, 60, 0),  # 180 s: 60 x 180 = 10,800
        (3300, 20, 0),  # 1,800 s, capped at the 300 s period: 20 x 300 = 6,000
        (1500, 0, 1),  # nothing unused: 0
        (1320, 50, 0),  # 120 s: 50 x 120 = 6,000
        (1200, 10, 0),  # 960 s, capped: 10 x 300 = 3,000
        (240, 30, 2),  # the last, 240 s until now: 30 x 240 = 7,200
    ]
    for ago, unused, starts in cycles:
        CycleRecord.objects.create(
            cluster=cluster, started_at=now - dt.timedelta(seconds=ago),
            short_reserve_gpus=80, short_reserve_unused_gpus=unused, short_reserve_starts=starts,
        )  # fmt: skip
    # 37,800 GPU-s = 10.5 GPU-h (a whole period per cycle would say 210 x 300 s = 17.5)
    assert short_reserve_cost(cluster=cluster, now=now) == {
        "reserve_cost_gpu_h": 10.5,
        "short_waits_saved": 3,
        "window_days": 7,
    }
    # asked 100 s later, the last cycle counts its whole period: + 30 x 60 s = 0.5 GPU-h
    later = short_reserve_cost(cluster=cluster, now=now + dt.timedelta(seconds=100))
    assert later["reserve_cost_gpu_h"] == 11.0


def test_staff_change_the_policy_and_the_detail_shows_the_change(cluster, ops):
    response = client_as(ops).patch(
        f"/api/v1/clusters/{cluster.pk}/",
        {"short_reserve_hosts": 1, "half_life_s": 86400, "reason": "debug jobs wait"},
        format="json",
    )
    assert response.status_code == 200
    body = response.json()
    assert body["policy"] == {**DEFAULTS, "short_reserve_hosts": 1, "half_life_s": 86400}
    assert policy(cluster) == body["policy"]
    (event,) = body["policy_events"]
    assert event["changes"] == {"short_reserve_hosts": [0, 1], "half_life_s": [None, 86400]}
    assert (event["reason"], event["actor"]) == ("debug jobs wait", "ops")
    # null is "no decay"; the newest change comes first
    again = client_as(ops).patch(
        f"/api/v1/clusters/{cluster.pk}/", {"half_life_s": None, "reason": "back"}, format="json"
    )
    assert again.status_code == 200 and policy(cluster)["half_life_s"] is None
    shown = client_as(participant("ann")).get(f"/api/v1/clusters/{cluster.pk}/").json()
    assert [e["reason"] for e in shown["policy_events"]] == ["back", "debug jobs wait"]
    assert shown["policy_events"][0]["changes"] == {"half_life_s": [86400, None]}


def test_the_detail_shows_a_change_of_operators_as_user_names(cluster, ops):
    """Operators are set in the admin (`cluster_operators_set`) and audited beside the
    policy; the detail once answered 500 on that event (its values are names, not numbers)."""
    cluster_operators_set(actor=ops, cluster_id=cluster.pk, usernames=["ops"], reason="on call")
    response = client_as(participant("ann")).get(f"/api/v1/clusters/{cluster.pk}/")
    assert response.status_code == 200
    (event,) = response.json()["policy_events"]
    assert event["changes"] == {"operators": [[], ["ops"]]}
    assert response.json()["operators"] == ["ops"]


def test_the_detail_lists_the_last_20_changes(cluster):
    for n in range(1, 23):
        cluster_policy_update(
            actor=None, cluster_id=cluster.pk, changes={"cycle_s": n}, reason=f"{n}"
        )
    events = (
        client_as(participant("ann")).get(f"/api/v1/clusters/{cluster.pk}/").json()["policy_events"]
    )
    assert [e["reason"] for e in events] == [str(n) for n in range(22, 2, -1)]
    assert ClusterPolicyEvent.objects.count() == 22


@pytest.mark.parametrize(("username", "status"), [("ann", 403), ("operator", 403), (None, 401)])
def test_only_staff_may_patch(cluster, username, status):
    user = UserFactory(username=username) if username else None
    if username == "operator":
        cluster.operators.add(user)
    response = client_as(user).patch(
        f"/api/v1/clusters/{cluster.pk}/", {"cycle_s": 5, "reason": "r"}, format="json"
    )
    assert response.status_code == status
    assert policy(cluster) == DEFAULTS and not ClusterPolicyEvent.objects.exists()


def test_anonymous_may_not_read(cluster):
    assert APIClient().get(f"/api/v1/clusters/{cluster.pk}/").status_code == 401


def test_a_missing_cluster_is_404(ops):
    assert client_as(ops).get("/api/v1/clusters/999999/").status_code == 404
    response = client_as(ops).patch(
        "/api/v1/clusters/999999/", {"cycle_s": 5, "reason": "r"}, format="json"
    )
    assert response.status_code == 404
    assert response.json()["detail"] == "There is no cluster with id 999999."
    huge = client_as(ops).get(f"/api/v1/clusters/{2**70}/")
    assert huge.status_code == 404


@pytest.mark.parametrize(
    ("body", "field", "detail"),
    [
        ({"cycle_s": 5}, "reason", "reason"),
        ({"cycle_s": 5, "reason": ""}, "reason", "reason"),
        ({"cycle_s": 5, "reason": 7}, "reason", "reason"),
        ({"cycle_s": 5, "reason": "x" * 501}, "reason", "reason"),
        ({"cycle_s": 5, "reason": "   "}, "reason", "reason"),
        ({"reason": "r"}, "changes", "nothing to change"),
        ({"cycle_s": "abc", "reason": "r"}, "cycle_s", "whole number between 1 and 86400"),
        ({"cycle_s": "5", "reason": "r"}, "cycle_s", "got '5'"),
        ({"cycle_s": True, "reason": "r"}, "cycle_s", "got True"),
        ({"cycle_s": [1], "reason": "r"}, "cycle_s", "got [1]"),
        ({"cycle_s": None, "reason": "r"}, "cycle_s", "null"),
        ({"grace_s": 86401, "reason": "r"}, "grace_s", "between 0 and 86400, got 86401"),
        ({"lookback_s": 2**70, "reason": "r"}, "lookback_s", "between 3600 and 31536000"),
        ({"half_life_s": "none", "reason": "r"}, "half_life_s", "must be null (no decay)"),
        ({"max_min_runtime_s": 60, "reason": "r"}, "max_min_runtime_s", "at least short_job"),
        ({"short_reserve_auto": "no", "reason": "r"}, "short_reserve_auto", "true or false"),
        ({"short_reserve_auto": 1, "reason": "r"}, "short_reserve_auto", "got 1"),
        ({"share_floor": "yes", "reason": "r"}, "share_floor", "true or false, got 'yes'"),
        (
            {"reservation_admit_min": 1441, "reason": "r"},
            "reservation_admit_min",
            "reservation_admit_min: must be between 0 and 1440, got 1441",
        ),
        ({"reservation_admit_min": "1h", "reason": "r"}, "reservation_admit_min", "got '1h'"),
        ({"cycle": 5, "reason": "r"}, "cycle", "Not a policy field"),
    ],
)
def test_bad_requests_are_400_naming_the_field(cluster, ops, body, field, detail):
    response = client_as(ops).patch(f"/api/v1/clusters/{cluster.pk}/", body, format="json")
    assert response.status_code == 400, response.json()
    assert response.json()["field"] == field
    assert detail in response.json()["detail"]
    assert policy(cluster) == DEFAULTS and not ClusterPolicyEvent.objects.exists()


def test_a_body_that_is_not_an_object_is_400(cluster, ops):
    response = client_as(ops).patch(f"/api/v1/clusters/{cluster.pk}/", [1, 2], format="json")
    assert response.status_code == 400
    assert policy(cluster) == DEFAULTS


JSON_VALUES = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.integers(min_value=0, max_value=40 * 86400),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=20),
    st.lists(st.integers(), max_size=2),
    st.dictionaries(st.text(max_size=3), st.integers(), max_size=2),
)


@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    bodies=st.lists(
        st.dictionaries(st.sampled_from([*POLICY_FIELDS, "reason", "other"]), JSON_VALUES),
        min_size=1,
        max_size=4,
    )
)
def test_any_body_is_applied_whole_or_refused_naming_a_field(cluster, ops, bodies):
    client = client_as(ops)
    for body in bodies:
        body = {**body, "reason": "r"} if "reason" not in body else body
        before, events = policy(cluster), ClusterPolicyEvent.objects.count()
        response = client.patch(f"/api/v1/clusters/{cluster.pk}/", body, format="json")
        assert response.status_code in (200, 400), response.content
        after = policy(cluster)
        if response.status_code == 400:
            assert response.json()["field"] and after == before
            assert ClusterPolicyEvent.objects.count() == events
            continue
        sent = {k: v for k, v in body.items() if k in POLICY_FIELDS}
        assert after == {**before, **sent}
        assert after["short_job_max_s"] <= after["max_min_runtime_s"]
        for name, value in sent.items():
            rule = POLICY_RULES[name]
            if rule.boolean:
                assert isinstance(value, bool)
                continue
            assert (value is None and rule.nullable) or rule.low <= value <= rule.high
        changed = after != before
        assert ClusterPolicyEvent.objects.count() == events + changed


# ---------------------------------------------------------------- manage.py cluster_set


def cluster_set(*args: str) -> str:
    out = StringIO()
    call_command("cluster_set", *args, stdout=out)
    return out.getvalue()


def test_cluster_set_changes_the_policy_and_says_what_changed(cluster):
    out = cluster_set(
        "gpu", "--reason", "debug reserve", "--short-reserve-hosts", "1",
        "--short-job-max", "10m", "--max-min-runtime", "4h", "--lookback", "3d",
        "--half-life", "1d", "--cycle-s", "10", "--grace-s", "45",
    )  # fmt: skip
    assert out.strip() == (
        "Cluster 'gpu': grace_s 30 -> 45, max_min_runtime_s 28800 -> 14400, lookback_s "
        "604800 -> 259200, half_life_s None -> 86400, short_reserve_hosts 0 -> 1, "
        "short_job_max_s 900 -> 600."
    )
    assert policy(cluster) == {
        **DEFAULTS,
        "cycle_s": 10,
        "grace_s": 45,
        "max_min_runtime_s": 14400,
        "lookback_s": 259200,
        "half_life_s": 86400,
        "short_reserve_hosts": 1,
        "short_reserve_auto": True,
        "short_job_max_s": 600,
    }
    event = ClusterPolicyEvent.objects.get()
    assert (event.actor_name, event.reason, len(event.changes)) == ("system", "debug reserve", 6)
    assert cluster_set("gpu", "--reason", "off", "--half-life", "none").strip() == (
        "Cluster 'gpu': half_life_s 86400 -> None."
    )
    assert policy(cluster)["half_life_s"] is None


def test_cluster_set_without_a_change_says_so_and_records_nothing(cluster):
    assert cluster_set("gpu", "--reason", "r", "--cycle-s", "10").strip() == (
        "Cluster 'gpu': nothing changed."
    )
    assert not ClusterPolicyEvent.objects.exists()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["nope", "--reason", "r", "--cycle-s", "5"], "there is no cluster named 'nope'"),
        (["gpu", "--reason", "r"], "nothing to change: give one or more of --cycle-s"),
        (
            ["gpu", "--reason", "r", "--cycle-s", "0"],
            "--cycle-s: must be between 1 and 86400, got 0",
        ),
        (["gpu", "--reason", "r", "--lookback", "soon"], "--lookback: not a duration"),
        (["gpu", "--reason", "r", "--half-life", "30m"], "--half-life: must be between 3600"),
        (
            ["gpu", "--reason", "r", "--half-life", "0"],
            r"^--half-life: must be between 3600 and 31536000, got 0 \(seconds\)$",
        ),
        (
            ["gpu", "--reason", "r", "--max-min-runtime", "10m"],
            r"--max-min-runtime: must be at least --short-job-max \(900\), got 600; lower --short-job-max",
        ),
        (["gpu", "--reason", " ", "--cycle-s", "5"], "A reason is required"),
        (
            ["gpu", "--reason", "r", "--reservation-admit-min", "2000"],
            "--reservation-admit-min: must be between 0 and 1440, got 2000",
        ),
    ],
)
def test_cluster_set_refuses_bad_input_and_stores_nothing(cluster, args, message):
    with pytest.raises(CommandError, match=message):
        cluster_set(*args)
    assert policy(cluster) == DEFAULTS
    assert not ClusterPolicyEvent.objects.exists()


@pytest.mark.parametrize(
    ("option", "value"),
    [
        ("--cycle-s", "0"),
        ("--grace-s", "-1"),
        ("--max-min-runtime", "0"),
        ("--short-reserve-hosts", "-1"),
        ("--short-job-max", "0"),
        ("--reservation-admit-min", "-1"),
        ("--lookback", "30m"),
        ("--half-life", "0"),
        ("--idle-threshold-pct", "101"),
        ("--idle-after", "10s"),
    ],
)
def test_cluster_set_names_each_refused_option_as_typed(cluster, option, value):
    """The services' field names (half_life_s) never reach the operator, who typed
    --half-life."""
    with pytest.raises(CommandError) as refused:
        cluster_set("gpu", "--reason", "r", option, value)
    message = str(refused.value)
    assert message.startswith(f"{option}: must be between "), message
    assert not re.search(r"\b[a-z]+_[a-z_]+\b", message), message
    assert policy(cluster) == DEFAULTS


def command_options(name: str) -> set[str]:
    """The option strings a management command's parser accepts."""
    parser = load_command_class("scheduler", name).create_parser("manage.py", name)
    return {option for action in parser._actions for option in action.option_strings}


@pytest.mark.parametrize("field", POLICY_FIELDS)
def test_every_policy_field_is_read_and_refused_under_its_option_as_typed(cluster, field):
    """One table (POLICY_OPTIONS) names each policy field's option for both the parsing
    and the refusals: every field the service checks has an option `cluster_set` accepts
    (and `cluster_add`, for the fields it sets), and a value the service refuses comes
    back naming that option, never the field."""
    option, kind = POLICY_OPTIONS[field]
    assert option in command_options("cluster_set")
    assert field not in SHARED_POLICY_FIELDS or option in command_options("cluster_add")
    rule = POLICY_RULES[field]
    value = "maybe" if kind == "switch" else str(rule.low - 1)
    with pytest.raises(CommandError) as refused:
        cluster_set("gpu", "--reason", "r", option, value)
    message = str(refused.value)
    assert option in message, message
    assert not re.search(r"\b[a-z]+_[a-z_]+\b", message), message
    if kind != "switch":
        assert message.startswith(f"{option}: must be between {rule.low} and "), message
    assert policy(cluster) == DEFAULTS


def test_cluster_set_exits_non_zero_on_bad_input():
    done = run_manage("cluster_set", "gpu", "--reason", "r", "--half-life", "x")
    assert done.returncode != 0
    assert "--half-life: not a duration" in done.stderr


# ---------------------------------------------------------------- the admin


@pytest.fixture
def admin_client():
    client = Client()
    client.force_login(SuperUserFactory(username="root"))
    return client


def test_the_admin_shows_the_policy_read_only_and_the_changes(cluster, admin_client):
    cluster_policy_update(actor=None, cluster_id=cluster.pk, changes={"cycle_s": 5}, reason="r1")
    page = admin_client.get(f"/admin/scheduler/cluster/{cluster.pk}/change/")
    assert page.status_code == 200
    text = page.content.decode()
    assert "manage.py cluster_set" in text and "PATCH /api/v1/clusters/{id}/" in text
    assert 'name="cycle_s"' not in text and 'name="name"' not in text  # read-only
    assert "r1" in text  # the change, inline
    event = ClusterPolicyEvent.objects.get()
    response = admin_client.post(
        f"/admin/scheduler/cluster/{cluster.pk}/change/",
        {
            "name": "gpu",
            "host_count": 3,  # read-only: ignored (clusters are added by cluster_add)
            "gpus_per_host": 8,
            "adapter": "simulated",
            "adapter_url": "",
            "adapter_options": "{}",
            "cycle_s": 99,  # read-only: ignored
            "policy_events-TOTAL_FORMS": 1,
            "policy_events-INITIAL_FORMS": 1,
            "policy_events-MIN_NUM_FORMS": 0,
            "policy_events-MAX_NUM_FORMS": 1000,
            "policy_events-0-id": event.pk,
            "policy_events-0-cluster": cluster.pk,
        },
    )
    assert response.status_code == 302
    cluster.refresh_from_db()
    assert (cluster.host_count, cluster.cycle_s) == (2, 5)
    assert ClusterPolicyEvent.objects.count() == 1
    # clusters are added by `manage.py cluster_add` (validated, provisioned), not here
    assert admin_client.get("/admin/scheduler/cluster/add/").status_code == 403


def test_policy_events_are_read_only_in_the_admin(cluster, admin_client):
    cluster_policy_update(actor=None, cluster_id=cluster.pk, changes={"cycle_s": 5}, reason="r1")
    event = ClusterPolicyEvent.objects.get()
    assert admin_client.get("/admin/scheduler/clusterpolicyevent/").status_code == 200
    url = f"/admin/scheduler/clusterpolicyevent/{event.pk}/"
    assert admin_client.get(url + "change/").status_code == 200
    admin_client.post(url + "change/", {"reason": "rewritten"})
    assert admin_client.post(url + "delete/", {"post": "yes"}).status_code == 403
    assert ClusterPolicyEvent.objects.get().reason == "r1"


def test_the_adaptive_reserve_is_one_audited_setting_away_and_reaches_the_engine(cluster):
    assert policy_for_cluster(cluster).short_reserve_auto  # on for a new cluster
    out = cluster_set("gpu", "--reason", "large jobs first", "--short-reserve-auto", "off")
    assert out.strip() == "Cluster 'gpu': short_reserve_auto True -> False."
    assert policy(cluster) == {**DEFAULTS, "short_reserve_auto": False}
    event = ClusterPolicyEvent.objects.get()
    assert event.changes == {"short_reserve_auto": [True, False]}
    cluster.refresh_from_db()
    assert not policy_for_cluster(cluster).short_reserve_auto
    assert not sim_config_for_cluster(cluster).short_reserve_auto  # the preview's too
    with pytest.raises(CommandError, match="invalid choice"):
        cluster_set("gpu", "--reason", "r", "--short-reserve-auto", "maybe")


def test_the_share_floor_is_one_audited_setting_away_and_reaches_the_engine(cluster):
    assert policy_for_cluster(cluster).share_floor  # on for a new cluster
    assert sim_config_for_cluster(cluster).share_floor
    out = cluster_set("gpu", "--reason", "rank alone", "--share-floor", "off")
    assert out.strip() == "Cluster 'gpu': share_floor True -> False."
    assert policy(cluster) == {**DEFAULTS, "share_floor": False}
    event = ClusterPolicyEvent.objects.get()
    assert event.changes == {"share_floor": [True, False]}
    cluster.refresh_from_db()
    assert not policy_for_cluster(cluster).share_floor
    assert not sim_config_for_cluster(cluster).share_floor  # the preview's too
    with pytest.raises(CommandError, match="invalid choice"):
        cluster_set("gpu", "--reason", "r", "--share-floor", "maybe")


def test_consolidation_is_one_audited_setting_away_and_reaches_the_engine(cluster, api_client):
    assert policy_for_cluster(cluster).consolidate  # on for a new cluster
    out = cluster_set("gpu", "--reason", "no moves", "--consolidate", "off")
    assert out.strip() == "Cluster 'gpu': consolidate True -> False."
    assert policy(cluster) == {**DEFAULTS, "consolidate": False}
    assert ClusterPolicyEvent.objects.get().changes == {"consolidate": [True, False]}
    cluster.refresh_from_db()
    assert not policy_for_cluster(cluster).consolidate
    assert not sim_config_for_cluster(cluster).consolidate  # the preview's too
    api_client.force_authenticate(SuperUserFactory(username="root"))
    url = f"/api/v1/clusters/{cluster.pk}/"
    response = api_client.patch(url, {"consolidate": True, "reason": "moves"}, format="json")
    assert response.status_code == 200, response.json()
    assert api_client.get(url).json()["policy"]["consolidate"] is True


def test_reservation_admission_is_one_audited_setting_away_and_reaches_the_engine(
    cluster, api_client
):
    """On for a new cluster with the engine's default bound (1 h); `cluster_set
    --reservation-admit-min 0` turns it off for the live cycle and the previews (the rule
    before), and staff set it back through the API; no one else may."""
    assert policy_for_cluster(cluster).reservation_admit_s == Policy().reservation_admit_s
    assert Policy().reservation_admit_s == 3600.0  # the engine's default, on
    out = cluster_set("gpu", "--reason", "backfill only", "--reservation-admit-min", "0")
    assert out.strip() == "Cluster 'gpu': reservation_admit_min 60 -> 0."
    assert policy(cluster) == {**DEFAULTS, "reservation_admit_min": 0}
    assert ClusterPolicyEvent.objects.get().changes == {"reservation_admit_min": [60, 0]}
    cluster.refresh_from_db()
    assert policy_for_cluster(cluster).reservation_admit_s == 0.0
    assert sim_config_for_cluster(cluster).reservation_admit_s == 0.0  # the preview's too
    url = f"/api/v1/clusters/{cluster.pk}/"
    operator = participant("operator")
    cluster.operators.add(operator)  # may drain its hosts, not change its policy
    for user in (participant("ann"), operator):
        body = {"reservation_admit_min": 30, "reason": "r"}
        assert client_as(user).patch(url, body, format="json").status_code == 403
    assert policy(cluster)["reservation_admit_min"] == 0
    api_client.force_authenticate(SuperUserFactory(username="root"))
    response = api_client.patch(url, {"reservation_admit_min": 30, "reason": "r"}, format="json")
    assert response.status_code == 200, response.json()
    assert api_client.get(url).json()["policy"]["reservation_admit_min"] == 30
    cluster.refresh_from_db()
    assert policy_for_cluster(cluster).reservation_admit_s == 1800.0
    bad = api_client.patch(url, {"reservation_admit_min": 1441, "reason": "r"}, format="json")
    assert (bad.status_code, bad.json()["field"]) == (400, "reservation_admit_min")
    assert policy(cluster)["reservation_admit_min"] == 30


def test_a_preview_replays_every_setting_the_live_policy_has(cluster):
    """The simulator's config (previews, the demo's back-fill) and the engine's policy
    agree on every setting they share, for a cluster whose settings all differ from
    their defaults: one translation of the cluster's policy, not two that drift."""
    changes = {
        "max_min_runtime_s": 4 * 3600,
        "lookback_s": 3 * 86400,
        "half_life_s": 86400,
        "short_reserve_hosts": 1,
        "short_reserve_auto": False,
        "short_job_max_s": 600,
        "share_floor": False,
        "consolidate": False,
        "idle_reclaim": True,
        "idle_reclaim_after_s": 900,
    }
    cluster_policy_update(
        actor=None,
        cluster_id=cluster.pk,
        changes={**changes, "reservation_admit_min": 5},
        reason="all off",
    )
    cluster.refresh_from_db()
    live, replayed = policy_for_cluster(cluster), sim_config_for_cluster(cluster)
    assert live.reservation_admit_s == replayed.reservation_admit_s == 300.0
    for name, value in changes.items():
        assert getattr(live, name) == getattr(replayed, name) == value, name
    shared = {f.name for f in dataclasses.fields(SimConfig)} & {
        f.name for f in dataclasses.fields(Policy)
    }
    assert {name: getattr(replayed, name) for name in shared} == {
        name: getattr(live, name) for name in shared
    }
