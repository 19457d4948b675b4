"""Check HTTP exchanges against the served OpenAPI schema with openapi-core (a strict
OAS 3.1 validator, formats included), for tests that drive the API through clients; and
that every key of a JSON response is documented (a schema without
`additionalProperties: false` lets any undocumented key pass the validator, and a
generated client hides it in `additional_properties`)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from urllib.parse import parse_qsl, urlsplit

import httpx
from openapi_core import OpenAPI
from openapi_core.datatypes import RequestParameters
from werkzeug.datastructures import Headers, ImmutableMultiDict


class _Request:
    def __init__(self, request: httpx.Request):
        url = urlsplit(str(request.url))
        self.host_url = f"{url.scheme}://{url.netloc}"
        self.path = url.path
        self.method = request.method.lower()
        self.body = request.content or None
        self.content_type = request.headers.get("content-type", "")
        self.parameters = RequestParameters(
            query=ImmutableMultiDict(parse_qsl(url.query, keep_blank_values=True)),
            header=Headers(list(request.headers.items())),
            cookie=ImmutableMultiDict(),
        )


class _Response:
    def __init__(self, response: httpx.Response):
        self.status_code = response.status_code
        self.content_type = response.headers.get("content-type", "").split(";")[0]
        self.headers = Headers(list(response.headers.items()))
        self.data = response.read() or None


def undocumented_keys(value, schema: dict, components: dict, where: str = "") -> list[str]:
    """The keys of `value` (a JSON document, at `where`) that `schema` does not document:
    an object's keys outside its `properties`, through `$ref`, `allOf`, `oneOf`/`anyOf`
    (the union of their branches), arrays and maps. A free-form object (no `properties`)
    documents any key."""
    while "$ref" in schema:
        schema = components[schema["$ref"].split("/")[-1]]
    branches = [*schema.get("allOf", []), *schema.get("oneOf", []), *schema.get("anyOf", [])]
    if branches:
        merged: dict = {k: v for k, v in schema.items() if k not in ("allOf", "oneOf", "anyOf")}
        for branch in branches:
            while "$ref" in branch:
                branch = components[branch["$ref"].split("/")[-1]]
            if "properties" in branch:
                merged["properties"] = {**merged.get("properties", {}), **branch["properties"]}
            for key in ("items", "additionalProperties"):
                if key in branch:
                    merged.setdefault(key, branch[key])
        schema = merged
    found: list[str] = []
    if isinstance(value, list) and isinstance(schema.get("items"), dict):
        for i, item in enumerate(value):
            found += undocumented_keys(item, schema["items"], components, f"{where}[{i}]")
    elif isinstance(value, dict) and "properties" in schema:
        for key, item in value.items():
            if key in schema["properties"]:
                found += undocumented_keys(
                    item, schema["properties"][key], components, f"{where}.{key}"
                )
            else:
                found.append(f"{where}.{key}")
    elif isinstance(value, dict) and isinstance(schema.get("additionalProperties"), dict):
        for key, item in value.items():
            found += undocumented_keys(
                item, schema["additionalProperties"], components, f"{where}.{key}"
            )
    return found


class SchemaChecker:
    """`check(response)` raises openapi-core's error when the exchange breaks the schema,
    and an AssertionError naming the keys of a JSON body the schema does not document;
    `checked` counts the exchanges that passed, by operation (method and path)."""

    def __init__(self, schema: dict, base_url: str):
        self.api = OpenAPI.from_dict({**schema, "servers": [{"url": base_url}]})
        self.schema = schema
        self.checked: list[str] = []

    def check(self, response: httpx.Response) -> None:
        request = _Request(response.request)
        self.api.validate_response(request, _Response(response))
        body = _Response(response).data
        if body and response.headers.get("content-type", "").startswith("application/json"):
            documented = self._response_schema(request, response.status_code)
            extra = undocumented_keys(
                json.loads(body), documented, self.schema["components"]["schemas"]
            )
            assert not extra, (request.method, request.path, response.status_code, extra)
        self.checked.append(f"{request.method.upper()} {request.path}")

    def _response_schema(self, request: _Request, status: int) -> dict:
        """The JSON schema the served schema documents for this operation and status."""
        for template, item in self.schema["paths"].items():
            pattern = "[^/]+".join(re.escape(part) for part in re.split(r"\{[^}]+\}", template))
            if re.fullmatch(pattern, request.path):
                responses = item[request.method]["responses"]
                documented = responses.get(str(status)) or responses["default"]
                return documented["content"]["application/json"]["schema"]
        raise AssertionError(f"no documented path for {request.path}")


OPENAPI_BIN = Path(sys.executable).parent
CLIENT_CONFIG = "project_name_override: allot-client\npackage_name_override: allot_client\n"


def generate_client(schema: dict, tmp: Path, *, meta: str, output: str) -> Path:
    """Generate a Python client from `schema` with openapi-python-client
    (`--fail-on-warning`) into `tmp/output`; returns that folder."""
    (tmp / "schema.json").write_text(json.dumps(schema))
    (tmp / "config.yaml").write_text(CLIENT_CONFIG)
    env = {**os.environ, "PATH": f"{OPENAPI_BIN}{os.pathsep}{os.environ.get('PATH', '')}"}
    generated = subprocess.run(
        [str(OPENAPI_BIN / "openapi-python-client"), "generate", "--path", "schema.json",
         "--config", "config.yaml", "--meta", meta, "--output-path", output,
         "--fail-on-warning"],
        cwd=tmp, env=env, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert generated.returncode == 0, generated.stdout + generated.stderr
    return tmp / output
