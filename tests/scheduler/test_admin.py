"""Admin of the live service: pages render for staff, events are read-only, host drains
and job cancels go through the services (audited)."""

import pytest
from django.test import Client

from scheduler.models import Host, HostEvent, HostHealth, JobEvent, JobState
from tests.factories import SuperUserFactory, UserFactory

pytestmark = pytest.mark.django_db


@pytest.fixture
def staff_client(live):
    client = Client()
    client.force_login(SuperUserFactory(username="root"))
    return client


def test_every_live_service_admin_page_renders(live, staff_client):
    job = live.submit(gpus=2)
    live.cycle()
    pages = [
        "cluster",
        "host",
        "hostevent",
        "job",
        "jobevent",
        "attempt",
        "cyclerecord",
        "idempotencykey",
    ]
    for name in pages:
        assert staff_client.get(f"/admin/scheduler/{name}/").status_code == 200, name
    assert staff_client.get(f"/admin/scheduler/job/{job.pk}/change/").status_code == 200
    assert (
        staff_client.get(f"/admin/scheduler/cluster/{live.cluster.pk}/change/").status_code == 200
    )


def test_events_cannot_be_changed_or_deleted_in_the_admin(live, staff_client):
    job = live.submit(gpus=2)
    event = JobEvent.objects.get(job=job)
    recorded = event.reason  # as the submit service wrote it
    url = f"/admin/scheduler/jobevent/{event.pk}/"
    staff_client.post(url + "change/", {"reason": "rewritten"})
    assert staff_client.post(url + "delete/", {"post": "yes"}).status_code == 403
    event.refresh_from_db()
    assert event.reason == recorded != "rewritten"


def test_the_drain_action_is_audited_and_the_cancel_action_cancels(live, staff_client):
    job = live.submit(gpus=2, min_runtime_s=600)
    live.cycle()
    host = Host.objects.filter(cluster=live.cluster).first()
    staff_client.post(
        "/admin/scheduler/host/",
        {"action": "drain_hosts", "_selected_action": [host.pk]},
    )
    host.refresh_from_db()
    assert host.health == HostHealth.DRAINING
    assert HostEvent.objects.get(host=host).actor_name == "root"
    pending = live.submit(gpus=8)
    staff_client.post(
        "/admin/scheduler/job/", {"action": "cancel_jobs", "_selected_action": [pending.pk]}
    )
    assert live.job(pending).state == JobState.CANCELLED
    assert live.job(job).state == JobState.RUNNING


def test_non_staff_users_do_not_reach_the_admin(live):
    client = Client()
    client.force_login(UserFactory(username="ann2"))
    response = client.get("/admin/scheduler/job/")
    assert response.status_code == 302
