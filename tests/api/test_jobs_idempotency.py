"""Idempotency-Key on POST /api/v1/jobs/ (IETF httpapi draft): retries never create a
second job, also when they race; the same key with another body is a 422."""

import datetime as dt
import json
import threading

import pytest
from django.db import connection
from django.utils import timezone
from rest_framework.test import APIClient

from scheduler.models import IdempotencyKey, Job
from scheduler.services.jobs import idempotency_keys_prune
from scheduler.tasks import prune_idempotency_keys
from tests.api.conftest import job_body

URL = "/api/v1/jobs/"


def post(client, user, body, key):
    client.force_authenticate(user)
    return client.post(URL, body, format="json", HTTP_IDEMPOTENCY_KEY=key)


@pytest.mark.django_db
def test_a_retry_with_the_same_key_and_body_returns_the_first_jobs(world, api_client):
    ann = world.user("ann")
    first = post(api_client, ann, job_body(array=3), "3f1c7a52-retry")
    again = post(api_client, ann, job_body(array=3), "3f1c7a52-retry")
    assert first.status_code == again.status_code == 201
    ids = [j["id"] for j in first.json()["jobs"]]
    assert [j["id"] for j in again.json()["jobs"]] == ids
    assert again.json()["replayed"] is True and again["Idempotent-Replayed"] == "true"
    assert first.json()["replayed"] is False and "Idempotent-Replayed" not in first
    assert Job.objects.count() == 3


@pytest.mark.django_db
def test_key_order_and_spacing_of_the_body_do_not_matter(world, api_client):
    ann = world.user("ann")
    api_client.force_authenticate(ann)
    body = job_body()
    post(api_client, ann, body, "k-order")
    reordered = json.dumps(dict(reversed(list(body.items()))), indent=2)
    response = api_client.post(
        URL, reordered, content_type="application/json", HTTP_IDEMPOTENCY_KEY="k-order"
    )
    assert response.status_code == 201 and response.json()["replayed"] is True
    assert Job.objects.count() == 1


@pytest.mark.django_db
def test_the_same_key_with_another_body_is_a_422(world, api_client):
    ann = world.user("ann")
    assert post(api_client, ann, job_body(), "k-422").status_code == 201
    response = post(api_client, ann, job_body(gpus=4), "k-422")
    assert response.status_code == 422
    body = response.json()
    assert body["code"] == "idempotency_key_reused" and body["field"] == "Idempotency-Key"
    assert Job.objects.count() == 1


@pytest.mark.django_db
def test_keys_belong_to_their_user(world, api_client):
    assert post(api_client, world.user("ann"), job_body(), "shared").status_code == 201
    other = post(api_client, world.user("lead-a"), job_body(gpus=4), "shared")
    assert other.status_code == 201 and other.json()["replayed"] is False
    assert Job.objects.count() == 2


@pytest.mark.django_db
def test_a_retry_replays_its_own_users_jobs_only(world, api_client):
    """Two users who chose the same key and body: each retry answers that user's own jobs
    (a replay that read the key without its user answered lead-a with ann's, specs and
    all)."""
    ann, lead = world.user("ann"), world.user("lead-a")
    first = {u: post(api_client, u, job_body(), "shared").json()["jobs"] for u in (ann, lead)}
    for user in (lead, ann):
        again = post(api_client, user, job_body(), "shared")
        assert again.json()["replayed"] is True
        assert again.json()["jobs"] == first[user]
        assert {j["submitter"] for j in again.json()["jobs"]} == {user.username}
    assert Job.objects.count() == 2


@pytest.mark.django_db
def test_a_refused_request_does_not_use_up_its_key(world, api_client):
    ann = world.user("ann")
    assert post(api_client, ann, job_body(gpus=3), "k-bad").status_code == 400
    assert not IdempotencyKey.objects.exists()
    assert post(api_client, ann, job_body(), "k-bad").status_code == 201


@pytest.mark.django_db
@pytest.mark.parametrize("key", ["", '""', "x" * 256, "caf\u00e9"])
def test_bad_keys_are_a_400_naming_the_header(world, api_client, key):
    response = post(api_client, world.user("ann"), job_body(), key)
    assert response.status_code == 400
    assert response.json()["field"] == "Idempotency-Key"
    assert not Job.objects.exists()


@pytest.mark.django_db
def test_a_quoted_key_is_the_same_key(world, api_client):
    ann = world.user("ann")
    post(api_client, ann, job_body(), "abc")
    assert post(api_client, ann, job_body(), '"abc"').json()["replayed"] is True


@pytest.mark.django_db
def test_keys_are_kept_24_hours_then_pruned(world, api_client):
    ann = world.user("ann")
    post(api_client, ann, job_body(), "old")
    post(api_client, ann, job_body(), "new")
    now = timezone.now()
    IdempotencyKey.objects.filter(key="old").update(created_at=now - dt.timedelta(hours=25))
    IdempotencyKey.objects.filter(key="new").update(created_at=now - dt.timedelta(hours=23))
    assert prune_idempotency_keys() == 1
    assert list(IdempotencyKey.objects.values_list("key", flat=True)) == ["new"]
    assert idempotency_keys_prune() == 0


@pytest.mark.django_db(transaction=True)
def test_racing_retries_create_the_jobs_once(world):
    """Several clients send the same key at once (each on its own connection): one
    request creates the jobs, the others wait on the key's unique index and answer
    with the same jobs."""
    ann = world.user("ann")
    for round_ in range(3):
        key = f"race-{round_}"
        barrier = threading.Barrier(4)
        responses: list = []

        def send(barrier=barrier, responses=responses, key=key):
            client = APIClient()
            barrier.wait()
            try:
                responses.append(post(client, ann, job_body(array=50), key))
            finally:
                connection.close()

        threads = [threading.Thread(target=send) for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert [r.status_code for r in responses] == [201] * 4
        id_sets = {tuple(j["id"] for j in r.json()["jobs"]) for r in responses}
        assert len(id_sets) == 1
        assert sorted(r.json()["replayed"] for r in responses) == [False, True, True, True]
    assert Job.objects.count() == 150
