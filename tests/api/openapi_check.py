"""Check HTTP exchanges against the served OpenAPI schema with openapi-core (a strict
OAS 3.1 validator, formats included), for tests that drive the API through clients."""

from __future__ import annotations

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


class SchemaChecker:
    """`check(response)` raises openapi-core's error when the exchange breaks the schema;
    `checked` counts the exchanges that passed, by operation (method and path)."""

    def __init__(self, schema: dict, base_url: str):
        self.api = OpenAPI.from_dict({**schema, "servers": [{"url": base_url}]})
        self.checked: list[str] = []

    def check(self, response: httpx.Response) -> None:
        request = _Request(response.request)
        self.api.validate_response(request, _Response(response))
        self.checked.append(f"{request.method.upper()} {request.path}")
