"""Issue 29: the contract also as OpenAPI 3.0.3 (`/api/schema/?oas=3.0`, config.oas30),
converted from the one 3.1 document, for the tools that read only 3.0.

Both documents pass openapi-spec-validator for their version; the 3.0 document holds no
construct of 3.1 (a walk of every Schema Object with 3.0's own keywords: a construct
drf-spectacular starts to emit that the conversion does not handle fails it); strict
3.0 and 3.1 validators (openapi-core, formats included) accept real responses with null
where a reference is nullable and with a value there; openapi-python-client generates a
client from the 3.0 document without a warning."""

from __future__ import annotations

import copy
import json

import httpx
import pytest
from openapi_core.validation.response.exceptions import InvalidData
from openapi_schema_validator import OAS30Validator
from openapi_spec_validator import OpenAPIV30SpecValidator, OpenAPIV31SpecValidator, validate
from rest_framework.test import APIClient

from config.oas30 import schema_to_oas30, to_oas30
from tests.api.openapi_check import SchemaChecker, generate_client
from tests.factories import ClusterFactory, SuperUserFactory

pytestmark = pytest.mark.django_db

BASE_URL = "http://testserver"

# OpenAPI 3.0.3's Schema Object (4.7.24) and document: everything else is 3.1 (or wrong)
SCHEMA_KEYWORDS_30 = {
    "title", "multipleOf", "maximum", "exclusiveMaximum", "minimum", "exclusiveMinimum",
    "maxLength", "minLength", "pattern", "maxItems", "minItems", "uniqueItems",
    "maxProperties", "minProperties", "required", "enum", "type", "allOf", "oneOf", "anyOf",
    "not", "items", "properties", "additionalProperties", "description", "format", "default",
    "nullable", "discriminator", "readOnly", "writeOnly", "xml", "externalDocs", "example",
    "deprecated",
}  # fmt: skip
TYPES_30 = {"array", "boolean", "integer", "number", "object", "string"}
DOCUMENT_KEYS_30 = {"openapi", "info", "servers", "paths", "components", "security", "tags",
                    "externalDocs"}  # fmt: skip
INFO_KEYS_30 = {"title", "description", "termsOfService", "contact", "license", "version"}
COMPONENT_KEYS_30 = {"schemas", "responses", "parameters", "examples", "requestBodies",
                     "headers", "securitySchemes", "links", "callbacks"}  # fmt: skip


def schema_objects(document: dict):
    """(where, Schema Object) of every schema of an OpenAPI document, subschemas included."""

    def schemas(schema, where):
        yield where, schema
        if not isinstance(schema, dict):
            return
        for key in ("items", "not", "additionalProperties"):
            closed = key == "additionalProperties" and isinstance(schema.get(key), bool)
            if key in schema and not closed:
                yield from schemas(schema[key], f"{where}/{key}")
        for key in ("allOf", "oneOf", "anyOf"):
            for i, branch in enumerate(schema.get(key, [])):
                yield from schemas(branch, f"{where}/{key}/{i}")
        for name, sub in schema.get("properties", {}).items():
            yield from schemas(sub, f"{where}/properties/{name}")

    def parts(node, where):
        if isinstance(node, list):
            for i, item in enumerate(node):
                yield from parts(item, f"{where}/{i}")
        elif isinstance(node, dict):
            for key, value in node.items():
                if key == "schema" and isinstance(value, dict):
                    yield from schemas(value, f"{where}/schema")
                elif key == "schemas" and isinstance(value, dict):
                    for name, schema in value.items():
                        yield from schemas(schema, f"{where}/schemas/{name}")
                elif key not in ("example", "examples") and not key.startswith("x-"):
                    yield from parts(value, f"{where}/{key}")

    yield from parts(document, "#")


def constructs_of_31(document: dict) -> list[str]:
    """Where `document` says what OpenAPI 3.0.3 cannot: document keys, a license
    `identifier`, Schema Object keywords outside 3.0's, a type list or `null`, `nullable`
    without a `type` (a strict 3.0 validator ignores it), a nullable enum without null,
    numeric exclusive bounds, `$ref` beside other keywords (3.0 ignores them)."""
    found = [f"#/{key}" for key in document if key not in DOCUMENT_KEYS_30]
    if not str(document.get("openapi", "")).startswith("3.0."):
        found.append(f"#/openapi: {document.get('openapi')}")
    info = document.get("info", {})
    found += [f"#/info/{key}" for key in info if key not in INFO_KEYS_30]
    found += [
        f"#/info/license/{key}" for key in info.get("license", {}) if key not in ("name", "url")
    ]
    found += [
        f"#/components/{key}"
        for key in document.get("components", {})
        if key not in COMPONENT_KEYS_30
    ]
    for where, schema in schema_objects(document):
        if not isinstance(schema, dict):  # a boolean schema (3.0: `additionalProperties` only)
            found.append(f"{where}: {json.dumps(schema)}")
            continue
        found += [
            f"{where}/{key}"
            for key in schema
            if key not in SCHEMA_KEYWORDS_30 | {"$ref"} and not key.startswith("x-")
        ]
        if "type" in schema and json.dumps(schema["type"]).strip('"') not in TYPES_30:
            found.append(f"{where}/type: {json.dumps(schema['type'])}")
        if schema.get("nullable") and "type" not in schema:
            found.append(f"{where}/nullable without type")
        if schema.get("nullable") and "enum" in schema and None not in schema["enum"]:
            found.append(f"{where}/enum without null")
        for key in ("exclusiveMinimum", "exclusiveMaximum"):
            if key in schema and not isinstance(schema[key], bool):
                found.append(f"{where}/{key}: {schema[key]}")
        if "$ref" in schema and len(schema) > 1:
            found.append(f"{where}/$ref beside {sorted(set(schema) - {'$ref'})}")
    return found


@pytest.fixture(scope="module")
def documents(django_db_setup, django_db_blocker) -> dict[str, dict]:
    """The served schema, as asked with `oas=3.1`, `oas=3.0` and with no `oas`."""
    with django_db_blocker.unblock():
        client = APIClient()
        return {
            version: client.get("/api/schema/", {"format": "json", **query}).json()
            for version, query in (("3.1", {"oas": "3.1"}), ("3.0", {"oas": "3.0"}), ("", {}))
        }


# ---------------------------------------------------------------- the two documents


def test_both_documents_pass_the_validators_of_their_version(documents):
    validate(documents["3.1"], cls=OpenAPIV31SpecValidator)
    validate(documents["3.0"], cls=OpenAPIV30SpecValidator)
    assert documents["3.1"]["openapi"] == "3.1.0" and documents["3.0"]["openapi"] == "3.0.3"
    assert documents[""] == documents["3.1"]  # the default answer is still 3.1
    assert documents["3.0"] == to_oas30(documents["3.1"])  # one contract, converted
    assert documents["3.0"]["paths"].keys() == documents["3.1"]["paths"].keys()


def test_the_30_document_holds_no_construct_of_31(documents):
    """Fails when drf-spectacular (or the post-processing) starts to emit a construct of
    3.1 that config.oas30 does not convert: the walk reads the live document."""
    before = constructs_of_31(documents["3.1"])
    assert any("type: [" in c for c in before) and any('type: "null"' in c for c in before)
    assert constructs_of_31(documents["3.0"]) == []


def test_every_nullable_reference_is_a_branch_that_takes_only_null(documents):
    components = documents["3.0"]["components"]["schemas"]
    cycle = components["ClusterOutput"]["properties"]["last_cycle"]
    assert cycle == {
        "oneOf": [
            {"$ref": "#/components/schemas/LastCycleOutput"},
            {"type": "object", "nullable": True, "enum": [None]},
        ]
    }
    eta = components["JobDetailOutput"]["properties"]["eta"]
    assert eta["oneOf"][1] == {"type": "object", "nullable": True, "enum": [None]}
    eta_start = components["EtaOutput"]["properties"]["start"]
    assert eta_start["type"] == "string" and eta_start["nullable"] is True


def test_a_client_generator_reads_the_30_document_without_a_warning(documents, tmp_path):
    """openapi-python-client reads 3.0 as well: from the 3.0 document (no install, no
    scenario: tests/api/test_generated_client.py runs one on 3.1) every nullable
    reference is typed `X | None`."""
    client = generate_client(documents["3.0"], tmp_path, meta="none", output="client")
    models = client / "models"
    assert "eta: EtaOutput | None" in (models / "job_detail_output.py").read_text()
    assert "last_cycle: LastCycleOutput | None" in (models / "cluster_output.py").read_text()


def test_the_yaml_schema_and_an_unknown_oas_version(api_client):
    """The YAML default (or `format=yaml`) for the schema; an error in the JSON error
    shape whatever the format asked, as on every operation."""
    yaml = api_client.get("/api/schema/", {"oas": "3.0"})
    assert yaml.status_code == 200 and b"openapi: 3.0.3" in yaml.content
    for version, fmt in (("2.0", {}), ("3.1.0", {"format": "yaml"}), ("", {"format": "json"})):
        refused = api_client.get("/api/schema/", {"oas": version, **fmt})
        assert refused.status_code == 400, (version, refused.content)
        assert refused["Content-Type"] == "application/json"
        body = refused.json()
        assert body["code"] == "invalid" and body["field"] == "oas"
        assert "3.1, 3.0" in body["detail"]
    bad_token = api_client.get("/api/schema/", HTTP_AUTHORIZATION="Token nope")
    assert bad_token.status_code == 401 and bad_token["Content-Type"] == "application/json"
    assert bad_token.json()["code"] == "authentication_failed"


# ---------------------------------------------------------------- the conversion


def test_the_nullable_reference_form_takes_null_and_a_value_in_a_strict_30_validator():
    """The form config.oas30 writes, beside drf-spectacular's own 3.0 form (`allOf` with
    `nullable`), which a strict 3.0 validator refuses for null."""
    ref = {"type": "object", "properties": {"at": {"type": "string"}}, "required": ["at"]}
    ours = schema_to_oas30({"oneOf": [{"$ref": "#/$defs/X"}, {"type": "null"}]})
    spectacular_30 = {"allOf": [{"$ref": "#/$defs/X"}], "nullable": True, "type": "object"}
    for schema, takes_null in ((ours, True), (spectacular_30, False)):
        validator = OAS30Validator({**schema, "$defs": {"X": ref}})
        assert validator.is_valid(None) is takes_null
        assert validator.is_valid({"at": "now"})
        assert not validator.is_valid({}) and not validator.is_valid("now")


def test_every_construct_of_31_the_conversion_knows_becomes_30():
    document = {
        "openapi": "3.1.0",
        "jsonSchemaDialect": "https://spec.openapis.org/oas/3.1/dialect/base",
        "info": {"title": "t", "version": "1", "summary": "s", "description": "d",
                 "license": {"name": "MIT", "identifier": "MIT"}},
        "webhooks": {"ping": {}},
        "paths": {},
        "components": {"schemas": {"S": {
            "$schema": "https://json-schema.org/draft/2020-12/schema",
            "type": "object",
            "properties": {
                "type": {"type": ["string", "null"], "enum": ["a", None]},
                "const": {"const": 3, "examples": [3, 4]},
                "above": {"type": "number", "exclusiveMinimum": 0, "exclusiveMaximum": 1},
                "bounded": {"type": "integer", "minimum": 5, "exclusiveMinimum": 0},
                "blob": {"type": "string", "contentEncoding": "base64"},
                "file": {"type": "string", "contentMediaType": "application/octet-stream"},
                "text": {"type": "string", "contentMediaType": "text/csv"},
                "ref": {"$ref": "#/components/schemas/S", "description": "itself"},
                "union": {"oneOf": [{"type": "number"}, {"type": "null"}]},
                "only": {"type": ["integer"]},
                "closed": {"type": ["string", "null"], "enum": ["a"]},
                "list": {"type": ["array", "null"], "items": {"type": ["integer", "null"]}},
            },
            "example": {"type": ["kept", "null"]},
        }}},
    }  # fmt: skip
    original = copy.deepcopy(document)
    converted = to_oas30(document)
    assert document == original  # the 3.1 document is left as it was
    assert constructs_of_31(converted) == []
    validate(converted, cls=OpenAPIV30SpecValidator)
    assert "jsonSchemaDialect" not in converted and "webhooks" not in converted
    assert converted["info"]["description"] == "s\n\nd"
    assert converted["info"]["license"] == {"name": "MIT", "url": "https://spdx.org/licenses/MIT.html"}  # fmt: skip
    schema = converted["components"]["schemas"]["S"]
    properties = schema["properties"]
    assert properties["type"] == {"type": "string", "nullable": True, "enum": ["a", None]}
    assert properties["const"] == {"enum": [3], "example": 3}
    assert properties["above"] == {"type": "number", "minimum": 0, "exclusiveMinimum": True,
                                   "maximum": 1, "exclusiveMaximum": True}  # fmt: skip
    assert properties["bounded"] == {"type": "integer", "minimum": 5}
    assert properties["blob"]["format"] == "byte" and properties["file"]["format"] == "binary"
    assert properties["text"] == {"type": "string"}
    assert properties["ref"] == {"allOf": [{"$ref": "#/components/schemas/S"}], "description": "itself"}  # fmt: skip
    assert properties["union"]["oneOf"][1] == {"type": "object", "nullable": True, "enum": [None]}
    assert properties["only"] == {"type": "integer"}
    assert properties["closed"] == {"type": "string", "enum": ["a"]}  # null refused either way
    assert properties["list"]["nullable"] and properties["list"]["items"]["nullable"]
    assert schema["example"] == {"type": ["kept", "null"]}  # data, not a schema


@pytest.mark.parametrize(
    "schema",
    [
        {"type": ["integer", "string"]},  # no single 3.0 type
        {"type": "array", "prefixItems": [{"type": "integer"}]},
        {"type": "object", "patternProperties": {"^x": {"type": "string"}}},
        {"if": {"type": "string"}, "then": {"minLength": 1}},
        {"type": "object", "properties": {"never": False}},
        {"type": "array", "items": True},
    ],
)
def test_a_construct_of_31_the_conversion_does_not_know_is_found(schema):
    document = {"openapi": "3.1.0", "info": {"title": "t", "version": "1"}, "paths": {},
                "components": {"schemas": {"S": schema}}}  # fmt: skip
    assert constructs_of_31(to_oas30(document)), schema


# ---------------------------------------------------------------- real responses


def exchange(client: APIClient, path: str) -> httpx.Response:
    """A GET through the test client, as the httpx exchange SchemaChecker reads."""
    answer = client.get(path)
    request = httpx.Request("GET", f"{BASE_URL}{path}")
    return httpx.Response(
        answer.status_code, headers=list(answer.items()), content=answer.content, request=request
    )


def test_real_responses_with_null_and_with_a_value_pass_strict_30_and_31_checks(live, documents):
    """A pending job (its `eta` and `queue` objects), a running one (both null), a
    cluster after cycles (`last_cycle` an object) and one without (null), the tree."""
    idle = ClusterFactory(name="idle", host_count=1, gpus_per_host=8)
    for _ in range(4):
        live.submit("b1", gpus=8, min_runtime_s=3600)
    live.cycle()  # the cluster is full of protected work
    pending = live.submit("a1", gpus=8, min_runtime_s=600)
    live.cycle(advance_s=1)
    running = type(pending).objects.filter(state="running").first()
    client = APIClient()
    client.force_authenticate(SuperUserFactory(username="root"))
    paths = [f"/api/v1/jobs/{pending.pk}/", f"/api/v1/jobs/{running.pk}/", "/api/v1/clusters/",
             f"/api/v1/clusters/{live.cluster.pk}/", f"/api/v1/clusters/{idle.pk}/",
             "/api/v1/tree/"]  # fmt: skip
    responses = [exchange(client, path) for path in paths]
    bodies = [r.json() for r in responses]
    assert bodies[0]["eta"]["start"] and bodies[0]["queue"]["position"] == 1
    assert bodies[1]["eta"] is None and bodies[1]["queue"] is None
    cycles = {row["name"]: row["last_cycle"] for row in bodies[2]}
    assert cycles["idle"] is None and cycles["live"]["errors"] == []
    assert bodies[3]["last_cycle"] and bodies[4]["last_cycle"] is None
    assert bodies[5]["tree"]["name"] == "org"
    for version in ("3.0", "3.1"):
        checker = SchemaChecker(documents[version], BASE_URL)
        for response in responses:
            checker.check(response)
        assert len(checker.checked) == len(paths), version


def test_the_30_check_refuses_a_value_where_the_schema_takes_an_object_or_null(live, documents):
    """The 3.0 check is not lenient: `eta: "soon"` breaks it (neither branch takes it)."""
    job = live.submit("a1", gpus=1)
    client = APIClient()
    client.force_authenticate(SuperUserFactory(username="root"))
    path = f"/api/v1/jobs/{job.pk}/"
    response = exchange(client, path)
    body = {**response.json(), "eta": "soon"}
    broken = httpx.Response(
        200, headers={"content-type": "application/json"}, content=json.dumps(body).encode(),
        request=response.request,
    )  # fmt: skip
    checker = SchemaChecker(documents["3.0"], BASE_URL)
    checker.check(response)
    with pytest.raises(InvalidData):
        checker.check(broken)
