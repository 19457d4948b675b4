"""Bodies no client should send get the error shape, not a server error or a page, and
store nothing: JSON nested past the parser's bound (config.parsers) and a body over
Django's upload limit (config.api_errors), on every write the schema lists."""

from __future__ import annotations

import io
import json

import pytest
from django.conf import settings

from config.parsers import MAX_JSON_DEPTH, JSONParser, json_depth_over
from scheduler.models import Job
from tests.api.conftest import job_body

pytestmark = pytest.mark.django_db

WRITES = {"post", "put", "patch", "delete"}


def nested(depth: int) -> dict:
    """A job's body whose `spec.env` value holds lists nested so that the whole body is
    `depth` levels deep."""
    value: object = "x"
    for _ in range(depth - 3):
        value = [value]
    return job_body(spec={"image": "i", "command": "c", "env": {"SEED": value}})


def post_raw(api_client, text: str):
    return api_client.generic("POST", "/api/v1/jobs/", text, content_type="application/json")


@pytest.mark.parametrize(
    "text", ["[" * 100_000 + "]" * 100_000, '{"a":' * 50_000 + "1" + "}" * 50_000]
)
def test_json_nested_past_the_interpreters_limit_is_a_400(api_client, world, text):
    """It was a RecursionError in DRF's parser: a 500."""
    api_client.force_authenticate(world.user("ann"))
    response = post_raw(api_client, text)
    assert response.status_code == 400, response.content[:200]
    assert response.json()["code"] == "parse_error"
    assert f"deeper than {MAX_JSON_DEPTH} levels" in response.json()["detail"]
    assert not Job.objects.exists()


def test_json_nested_past_the_bound_is_refused_and_at_the_bound_read(api_client, world):
    """A body a little under the interpreter's limit parsed, and what walks it after the
    parser (the fingerprint, the serializers) could still fail; the bound refuses it."""
    api_client.force_authenticate(world.user("ann"))
    deep = post_raw(api_client, json.dumps(nested(900)))
    assert deep.status_code == 400 and deep.json()["code"] == "parse_error"
    at_bound = post_raw(api_client, json.dumps(nested(MAX_JSON_DEPTH)))
    # read, then refused by the spec's own rule (an env value is text), naming it
    assert at_bound.status_code == 400 and at_bound.json()["code"] == "invalid", at_bound.json()
    assert not Job.objects.exists()


def test_depth_is_counted_in_containers():
    assert not json_depth_over({"a": [1, {"b": 2}]}, 3)
    assert json_depth_over({"a": [1, {"b": [2]}]}, 3)
    assert not json_depth_over("text", 0)


def test_a_body_over_the_upload_limit_is_a_413_of_the_error_shape(api_client, world):
    """It was Django's HTML 400 page under /api/."""
    api_client.force_authenticate(world.user("ann"))
    padding = "x" * (settings.DATA_UPLOAD_MAX_MEMORY_SIZE + 1)
    response = post_raw(api_client, json.dumps(job_body(name=padding)))
    assert response.status_code == 413
    assert response["Content-Type"] == "application/json"
    assert response.json() == {
        "code": "too_large",
        "detail": f"The request body is over {settings.DATA_UPLOAD_MAX_MEMORY_SIZE:,} bytes.",
    }
    assert not Job.objects.exists()


def test_every_write_documents_the_413_and_no_read_does(api_client, world):
    api_client.force_authenticate(world.user("root"))
    schema = api_client.get("/api/schema/?format=json").json()
    for path, item in schema["paths"].items():
        for method, operation in item.items():
            if method in WRITES | {"get"}:
                assert ("413" in operation["responses"]) == (method in WRITES), (method, path)


@pytest.mark.parametrize("number", ["1e-400", "2.00000000000000001"])
def test_a_weight_is_read_from_the_number_as_sent(api_client, world, number):
    """A JSON number is read with its text (config.parsers.JsonFloat): `1e-400` was the
    float 0.0, and a1 got weight 0 (no budget); `2.00000000000000001` was 2. Both have
    more than the 4 decimal places a weight may have."""
    api_client.force_authenticate(world.user("lead-a"))
    a1 = world.tree.node("a1")
    body = f'{{"reason": "r", "changes": [{{"node": {a1.pk}, "weight": {number}}}]}}'
    response = api_client.generic(
        "POST", "/api/v1/budget-changes/", body, content_type="application/json"
    )
    assert response.status_code == 400, response.json()
    assert response.json()["field"] == "changes[0].weight"
    a1.refresh_from_db()
    assert a1.weight == 70


def test_a_json_number_keeps_its_text_and_its_value():
    parsed = JSONParser().parse(io.BytesIO(b'{"w": 1e-400, "x": 2.50}'))
    assert parsed == {"w": 0.0, "x": 2.5}
    assert (str(parsed["w"]), str(parsed["x"])) == ("1e-400", "2.50")
    assert json.dumps(parsed) == '{"w": 0.0, "x": 2.5}'  # fingerprints as before
