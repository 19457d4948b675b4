"""One answer for each kind of client mistake, on every operation, as the schema says:

- a query parameter naming an object that does not exist (an unknown cluster, project
  or node) is a 400 naming the field, never a 404 (which is for path objects), and no
  list operation documents a 404;
- a response format the API does not produce (`?format=xml`, `Accept: text/html`) is a
  JSON 406 naming `format` or `Accept`, documented on every operation;
- a refused choice names every valid value;
- a budget change's items and a preview's weights name their node the same way (id,
  path, name).
"""

from __future__ import annotations

import pytest
from rest_framework import serializers
from rest_framework.test import APIClient

from config.api_fields import TIME_HELP, NamedChoicesMixin
from tests.api.openapi_check import undocumented_keys

pytestmark = pytest.mark.django_db

UNKNOWN = {"cluster": "no-such-cluster", "project": "org/no-such-project", "node": "999999"}
# operations that need a cluster to answer anything
READ_LIST_QUERY = {
    f"/api/v1/{name}/": {"cluster": "gpu"} for name in ("queue", "fairshare", "occupancy", "waits")
}


@pytest.fixture
def schema(api_client, world):
    api_client.force_authenticate(world.user("root"))
    return api_client.get("/api/schema/?format=json").json()


def query_operations(schema: dict, names: set[str]):
    """(path, parameter name) of every GET operation with a query parameter in `names`."""
    for path, item in schema["paths"].items():
        for parameter in item.get("get", {}).get("parameters", []):
            if parameter["in"] == "query" and parameter["name"] in names:
                yield path, parameter["name"]


def test_an_unknown_object_in_a_query_parameter_is_a_400_naming_it_everywhere(
    api_client, world, schema
):
    api_client.force_authenticate(world.user("lead-a"))
    found = sorted(query_operations(schema, set(UNKNOWN)))
    assert ("/api/v1/queue/", "cluster") in found and ("/api/v1/usage/", "cluster") in found
    assert ("/api/v1/budget-changes/", "node") in found
    assert len(found) >= 11, found  # jobs, queue, hosts, usage, occupancy, waits, fairshare...
    for path, name in found:
        query = {**READ_LIST_QUERY.get(path, {}), name: UNKNOWN[name]}
        response = api_client.get(path, query)
        assert response.status_code == 400, (path, name, response.content)
        body = response.json()
        assert body["code"] == "invalid" and body["field"] == name, (path, body)
        assert "There is no" in body["detail"], (path, body)


def test_no_list_operation_documents_a_404_and_every_query_documents_the_400(schema):
    for path, item in schema["paths"].items():
        for method, operation in item.items():
            responses = operation.get("responses", {})
            if "{" not in path:
                assert "404" not in responses, (method, path)
            if any(p["in"] == "query" for p in operation.get("parameters", [])):
                assert "400" in responses, (method, path)


def test_a_nul_in_any_query_parameter_is_the_400_every_operation_documents(
    api_client, world, schema
):
    """RejectNulBytesMiddleware refuses a NUL in a query parameter the operation does not
    take too; the operations without parameters (the tree, a job) did not document it."""
    api_client.force_authenticate(world.user("ann"))
    for path in ("/api/v1/tree/", "/api/v1/nodes/", "/api/v1/clusters/", "/api/v1/auth/tokens/"):
        response = api_client.get(f"{path}?x=%00")
        assert response.status_code == 400 and response.json()["field"] == "x", path
    for path, item in schema["paths"].items():
        for method, operation in item.items():
            assert "400" in operation["responses"], (method, path)


@pytest.mark.parametrize("fmt", ["xml", "api", "yaml", "", "JSON"])
def test_an_unknown_format_is_a_json_406_naming_the_formats(api_client, world, fmt):
    api_client.force_authenticate(world.user("ann"))
    for path in ["/api/v1/jobs/", "/api/v1/tree/", f"/api/v1/nodes/{world.tree.node('a1').pk}/"]:
        response = api_client.get(f"{path}?format={fmt}", HTTP_ACCEPT="text/html,*/*;q=0.8")
        assert response.status_code == 406, (path, response.content)
        assert response["Content-Type"] == "application/json"
        body = response.json()
        assert body["code"] == "not_acceptable" and body["field"] == "format"
        assert "format=json" in body["detail"]


def test_json_is_still_served_for_format_json_and_a_browser_accept(api_client, world):
    api_client.force_authenticate(world.user("ann"))
    assert api_client.get("/api/v1/jobs/?format=json").json()["count"] == 0
    browser = api_client.get("/api/v1/tree/", HTTP_ACCEPT="text/html,*/*;q=0.8")
    assert browser["Content-Type"] == "application/json"
    assert browser.json()["tree"]["name"] == "org"


def test_an_accept_header_without_json_is_a_json_406_naming_it(api_client, world):
    api_client.force_authenticate(world.user("ann"))
    response = api_client.get("/api/v1/jobs/", HTTP_ACCEPT="text/html")
    assert response.status_code == 406 and response["Content-Type"] == "application/json"
    assert response.json()["field"] == "Accept"
    assert "application/json" in response.json()["detail"]


def test_the_schema_endpoint_refuses_an_unknown_format_naming_its_own(api_client, world):
    response = api_client.get("/api/schema/?format=xml")
    assert response.status_code == 406
    assert response.json()["field"] == "format" and "json" in response.json()["detail"]


def test_every_operation_documents_the_406(schema):
    for path, item in schema["paths"].items():
        for method, operation in item.items():
            assert operation["responses"]["406"]["content"]["application/json"], (method, path)


def enum_parameters(schema: dict):
    """(path, name, valid values) of every query parameter of a GET that takes choices."""
    for path, item in schema["paths"].items():
        for parameter in item.get("get", {}).get("parameters", []):
            found = parameter.get("schema", {})
            found = found.get("items", found)
            if "$ref" in found:
                found = schema["components"]["schemas"][found["$ref"].split("/")[-1]]
            if parameter["in"] == "query" and "enum" in found:
                yield path, parameter["name"], [v for v in found["enum"] if v not in ("", None)]


def test_every_refused_choice_in_a_query_names_the_valid_values(api_client, world, schema):
    api_client.force_authenticate(world.user("root"))
    found = list(enum_parameters(schema))
    names = {(path, name) for path, name, _ in found}
    assert {("/api/v1/jobs/", "kind"), ("/api/v1/jobs/", "state")} <= names
    assert {("/api/v1/budget-changes/", "kind"), ("/api/v1/hosts/", "health")} <= names
    assert ("/api/v1/usage/", "step") in names
    for path, name, values in found:
        query = {**READ_LIST_QUERY.get(path, {}), name: "foo"}
        response = api_client.get(path, query)
        assert response.status_code == 400, (path, name, response.content)
        detail = response.json()["detail"]
        assert response.json()["field"] == name
        for value in values:
            assert str(value) in detail, (path, name, value, detail)


@pytest.mark.parametrize(
    ("method", "path", "body", "field", "values"),
    [
        ("post", "/api/v1/jobs/", {"kind": "foo"}, "kind", ["debug", "training", "inference"]),
        ("post", "/api/v1/memberships/", {"role": "boss"}, "role", ["manager", "member"]),
        ("post", "/api/v1/nodes/", {"kind": "team"}, "kind", ["program", "project"]),
        ("patch", "/api/v1/hosts/{host}/", {"health": "broken"}, "health", ["draining"]),
    ],
)
def test_every_refused_choice_in_a_body_names_the_valid_values(
    api_client, world, method, path, body, field, values
):
    api_client.force_authenticate(world.user("root"))
    path = path.format(host=world.hosts[0].pk)
    response = getattr(api_client, method)(path, body, format="json")
    assert response.status_code == 400
    errors = {e["field"]: e["detail"] for e in response.json()["errors"]}
    assert f'"{body[field]}"' in errors[field]
    for value in values:
        assert value in errors[field]


def api_serializers():
    """Every serializer class the API's modules define."""
    from budgets.api import serializers as budget_api
    from dashboards import api as dashboards_api
    from ledger import api as ledger_api
    from scheduler.api import serializers as scheduler_api

    for module in (budget_api, dashboards_api, ledger_api, scheduler_api):
        for value in vars(module).values():
            if isinstance(value, type) and issubclass(value, serializers.Serializer):
                yield value


def test_every_choice_field_of_the_api_names_its_values():
    checked = 0
    for serializer_class in api_serializers():
        for name, field in serializer_class().fields.items():
            child = getattr(field, "child", None) or field
            if isinstance(child, serializers.Serializer):
                continue  # its own class is checked
            if isinstance(child, serializers.ChoiceField):
                checked += 1
                assert isinstance(child, NamedChoicesMixin), (serializer_class, name)
    assert checked >= 15


def test_a_budget_change_names_its_nodes_as_a_preview_does(api_client, world):
    tree = world.tree
    api_client.force_authenticate(world.user("lead-a"))
    changed = api_client.post(
        "/api/v1/budget-changes/",
        {"reason": "more for a1", "changes": [{"node": tree.node("a1").pk, "weight": "3"}]},
        format="json",
    )
    assert changed.status_code == 201, changed.content
    listed = api_client.get("/api/v1/budget-changes/", {"node": tree.node("a1").pk}).json()
    a1 = tree.node("a1").pk
    (item,) = [i for i in listed["results"][0]["items"] if i["node"] == a1]
    assert {k: item[k] for k in ("node", "node_path", "node_name")} == {
        "node": tree.node("a1").pk,
        "node_path": "org/prog-a/a1",
        "node_name": "a1",
    }
    preview = api_client.post(
        "/api/v1/previews/",
        {
            "node": tree.node("prog-a").pk,
            "cluster": "gpu",
            "weights": [{"node": tree.node("a1").pk, "weight": 3}],
        },
        format="json",
    ).json()
    assert preview["node_path"] == "org/prog-a" and preview["node_name"] == "prog-a"
    (weight,) = preview["weights"]
    assert {k: weight[k] for k in ("node", "node_path", "node_name")} == {
        k: item[k] for k in ("node", "node_path", "node_name")
    }
    assert weight["weight"] == "3"
    again = api_client.get(f"/api/v1/previews/{preview['id']}/").json()
    assert again["weights"] == preview["weights"]


def integer_schemas(node):
    """Every integer schema inside `node` (a parameter's or a request body's schema)."""
    if isinstance(node, dict):
        kind = node.get("type")
        if kind == "integer" or (isinstance(kind, list) and "integer" in kind):
            yield node
        for value in node.values():
            yield from integer_schemas(value)
    elif isinstance(node, list):
        for value in node:
            yield from integer_schemas(value)


def test_every_integer_a_client_sends_is_bounded_in_the_schema(schema):
    """Issue 30: every integer parameter bounded in the schema (path ids included), so
    no client or fuzzer is told that a value past bigint is valid."""
    sent = [
        (f"{method} {path} {p['name']}", p["schema"])
        for path, item in schema["paths"].items()
        for method, operation in item.items()
        for p in operation.get("parameters", [])
    ]
    sent += [(name, s) for name, s in schema["components"]["schemas"].items() if "Request" in name]
    for where, found in sent:
        for integer in integer_schemas(found):
            assert "enum" in integer or {"minimum", "maximum"} <= set(integer), where


@pytest.mark.parametrize("huge", [2**63 - 1, 2**63, 10**20])
def test_a_path_id_past_any_row_is_the_documented_404(api_client, world, schema, huge):
    api_client.force_authenticate(world.user("root"))
    for path, item in schema["paths"].items():
        if "{" not in path or "get" not in item:
            continue
        url = "/".join(str(huge) if part.startswith("{") else part for part in path.split("/"))
        response = api_client.get(url)
        assert response.status_code == 404, (url, response.status_code)
        assert response.json()["code"] == "not_found"


def test_each_policy_field_is_described_once_for_reading_and_changing_it(schema):
    """A cluster's policy as GET shows it and as PATCH changes it: the same fields, each
    with one description (the share floor's said 'served clearly better' on one side and
    'more than 5 points ... better' on the other)."""
    components = schema["components"]["schemas"]
    shown = components["PolicyOutput"]["properties"]
    changed = dict(components["ClusterPolicyInputRequest"]["properties"])
    changed.pop("reason")
    assert set(shown) == set(changed)
    for name, field in shown.items():
        assert field.get("description"), name
        assert field["description"] == changed[name].get("description"), name


def test_the_client_tests_checker_names_a_response_key_the_schema_does_not_document(schema):
    """tests/api/openapi_check.py's second check (the generated-client scenario runs it on
    every response): openapi-core lets undocumented keys pass, this names them, through
    references, pages, lists and the nullable last cycle."""
    components = schema["components"]["schemas"]
    page = {"$ref": "#/components/schemas/PaginatedJobList"}
    job = {"id": 1, "state": "pending"}
    assert undocumented_keys({"count": 1, "results": [job]}, page, components) == []
    assert undocumented_keys({"count": 1, "results": [{**job, "secret": 1}]}, page, components) == [
        ".results[0].secret"
    ]
    cluster = {"$ref": "#/components/schemas/ClusterOutput"}
    assert undocumented_keys({"last_cycle": None}, cluster, components) == []
    assert undocumented_keys({"last_cycle": {"id": 1, "x": 2}}, cluster, components) == [
        ".last_cycle.x"
    ]
    assert undocumented_keys(
        {"policy": {"share_floor": True, "floor": 1}}, cluster, components
    ) == [".policy.floor"]


def test_every_401_documents_the_www_authenticate_header_it_sends(schema):
    """A 401 names the scheme to send (`WWW-Authenticate: Token`); every response header
    the API sends is in the schema, this one on every operation that may answer 401."""
    documented = [
        (path, method, operation["responses"]["401"])
        for path, item in schema["paths"].items()
        for method, operation in item.items()
        if "401" in operation["responses"]
    ]
    assert len(documented) >= 30
    for path, method, response in documented:
        assert "WWW-Authenticate" in response.get("headers", {}), (method, path)
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION="Token not-a-token")
    refused = client.get("/api/v1/jobs/")
    assert refused.status_code == 401 and refused["WWW-Authenticate"] == "Token"


def test_every_response_documents_the_request_id_it_carries(api_client, world, schema):
    """Every response the API itself gives (not gunicorn's 414) carries X-Request-ID,
    and the schema says so on each."""
    for path, item in schema["paths"].items():
        for method, operation in item.items():
            for status, response in operation["responses"].items():
                if status != "414":
                    assert "X-Request-ID" in response["headers"], (method, path, status)
    api_client.force_authenticate(world.user("ann"))
    for response in (
        api_client.get("/api/v1/jobs/"),
        api_client.get("/api/v1/jobs/?limit=0"),
        api_client.get("/api/v1/jobs/999999/"),
        APIClient().get("/api/v1/jobs/"),
    ):
        assert len(response["X-Request-ID"]) == 32, response.status_code


TYPED = {"type", "$ref", "oneOf", "anyOf", "allOf", "enum", "const"}


def untyped_parts(node, where: str = ""):
    """Every property, item, map value or parameter, header and body schema that names no
    type: a generated client makes each an `Any` (issue 29)."""
    if isinstance(node, list):
        for i, item in enumerate(node):
            yield from untyped_parts(item, f"{where}/{i}")
        return
    if not isinstance(node, dict):
        return
    parts = [(f"{where}/properties/{k}", v) for k, v in node.get("properties", {}).items()]
    parts += [
        (f"{where}/{k}", node[k]) for k in ("items", "additionalProperties", "schema") if k in node
    ]
    for place, part in parts:
        if isinstance(part, dict) and not TYPED & set(part):
            yield place
    for key, value in node.items():
        yield from untyped_parts(value, f"{where}/{key}")


def test_no_part_of_the_schema_is_untyped(schema):
    """Issue 29: every request and response field, map value, parameter and header has a
    type (a job's blockers' `numbers` were a map of anything: `Any` in a client)."""
    assert sorted(set(untyped_parts(schema))) == []
    blocker = schema["components"]["schemas"]["BlockerOutput"]["properties"]["numbers"]
    values = blocker["additionalProperties"]["oneOf"]
    assert {v["type"] for v in values} == {"number", "string", "null"}


def test_every_time_a_client_sends_is_read_one_way(schema):
    """Every time a client sends (a query's `since`/`until`, a body's `effective_at`) is
    the one `TimeField`: the schema describes the same reading and bounds on each."""
    sent = [
        (f"{path} {p['name']}", p["schema"], p.get("description", ""))
        for path, item in schema["paths"].items()
        for operation in item.values()
        for p in operation.get("parameters", [])
    ]
    sent += [
        (f"{name}.{field}", prop, prop.get("description", ""))
        for name, body in schema["components"]["schemas"].items()
        if name.endswith("Request")
        for field, prop in body.get("properties", {}).items()
    ]
    times = [(where, text) for where, s, text in sent if s.get("format") == "date-time"]
    assert {w.rsplit(" ", 1)[-1].rsplit(".", 1)[-1] for w, _ in times} == {
        "since",
        "until",
        "effective_at",
    }
    assert [where for where, text in times if not text.endswith(TIME_HELP)] == []
