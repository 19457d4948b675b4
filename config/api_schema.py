"""OpenAPI: every operation documents its error responses with the one error shape.

`AutoSchema` (set as DRF's DEFAULT_SCHEMA_CLASS) adds, to whatever a view declares:
400 everywhere (a query parameter the operation does not take: config.api_views; a NUL
in any query parameter, known or not, is refused before the view: RejectNulBytesMiddleware;
and input the operation reads), 401 and 403 where
authentication is required, 403 for unsafe methods (CSRF on session requests), 404
where the path has parameters, 406 everywhere (an unknown `?format=` or an Accept
without JSON: config.negotiation), 413 on every write (a body over Django's
DATA_UPLOAD_MAX_MEMORY_SIZE), 414 everywhere (gunicorn refuses request lines over
8 KiB, without a body of the error shape), 415 on every write, 429 where the
view is throttled. Views add the rest (e.g. 409) with `@extend_schema(responses=...)`.
New endpoints get this without doing anything.
"""

from __future__ import annotations

from drf_spectacular.openapi import AutoSchema as SpectacularAutoSchema
from drf_spectacular.plumbing import force_instance, is_basic_serializer
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse
from rest_framework import serializers
from rest_framework.permissions import AllowAny


class FieldErrorSerializer(serializers.Serializer):
    field = serializers.CharField(required=False, help_text="The input, e.g. `changes[0].weight`")
    code = serializers.CharField()
    detail = serializers.CharField()


class ErrorSerializer(serializers.Serializer):
    """The body of every error response (see config/api_errors.py)."""

    code = serializers.CharField(help_text="Machine-readable reason, e.g. `invalid`, `conflict`")
    detail = serializers.CharField(help_text="What went wrong, for a person")
    field = serializers.CharField(required=False, help_text="The offending input, if any")
    errors = FieldErrorSerializer(many=True, required=False, help_text="Every invalid field")
    current_version = serializers.IntegerField(
        required=False, help_text="On a stale-version 409: the tree's current version"
    )
    limit = serializers.IntegerField(
        required=False,
        help_text="On a refusal over a limit (`throttled`): the limit",
    )

    class Meta:
        ref_name = "Error"


# every operation's 400 (config.api_views.ApiView: config.query.refuse_unknown_parameters)
UNKNOWN_PARAMETER = (
    "a query parameter the operation does not take (`errors` names each, and the detail "
    "the parameters it accepts)"
)
ERROR_DESCRIPTIONS = {
    "400": f"Invalid input; `field` names it: {UNKNOWN_PARAMETER}, a malformed or "
    "out-of-range value, or a NUL in a query parameter",
    "401": "Not signed in, or the token is invalid or revoked",
    "403": "Signed in but not allowed (or a session request without a CSRF token)",
    "404": "No such object (the path names none; an unknown object in a query parameter "
    "or the body is a 400 naming it)",
    "406": "A response format the API does not produce: a `format` query parameter other "
    "than `json` (the schema endpoint: `json`, `yaml`) or an Accept header without "
    "application/json; `field` names `format` or `Accept`",
    "409": "Conflicts with the current state (e.g. a stale `base_version`)",
    "413": "The request body is too large (over Django's DATA_UPLOAD_MAX_MEMORY_SIZE, "
    "2.5 MB by default)",
    "414": "The request line (path and query string) is over 8 KiB; gunicorn refuses it",
    "415": "Unsupported content type (send application/json)",
    "429": "Too many requests; retry after the `Retry-After` header's seconds",
    "503": "The database is briefly unreachable; retry after the `Retry-After` header's seconds",
}

NO_NUL_PATTERN = r"^[^\x00]*$"
MAX_ID = 2**63 - 1  # PostgreSQL bigint: every id of the API
UNSAFE_METHODS = {"POST", "PUT", "PATCH", "DELETE"}


def error_response(status: int | str) -> OpenApiResponse:
    """The error shape with `status`'s description (ERROR_DESCRIPTIONS)."""
    return OpenApiResponse(ErrorSerializer, description=ERROR_DESCRIPTIONS[str(status)])


class AutoSchema(SpectacularAutoSchema):
    def _error_statuses(self) -> list[str]:
        # any operation: a query parameter it does not take (config.api_views.ApiView),
        # a NUL in any query parameter (RejectNulBytesMiddleware; GET /api/v1/tree/?x=%00
        # was an undocumented 400); a write without a body also refuses one with a field
        statuses = ["400"]
        public = all(isinstance(p, AllowAny) for p in self.view.get_permissions())
        if self.view.get_authenticators():
            statuses.append("401")  # also for a bad token sent to a public endpoint
        if not public or self.method in UNSAFE_METHODS:
            statuses.append("403")
        if "{" in self.path:
            statuses.append("404")
        statuses.append("406")  # any operation: ?format=xml (config.negotiation)
        if self.method in UNSAFE_METHODS:
            statuses.append("413")  # a body over DATA_UPLOAD_MAX_MEMORY_SIZE (config.api_errors)
        statuses.append("414")  # any URL: gunicorn's limit_request_line, before Django
        if self.method in UNSAFE_METHODS:
            statuses.append("415")  # a body that is not JSON, even where none is taken
        if self.view.get_throttles() or getattr(self.view, "documents_throttling", False):
            statuses.append("429")
        statuses.append("503")  # the database is briefly unreachable (config.api_errors)
        return statuses

    def _get_parameters(self):
        parameters = super()._get_parameters()
        for parameter in parameters:
            if parameter.get("in") == "path" and parameter.get("schema") == {"type": "integer"}:
                # an object's id: a bigint key (a larger one names nothing: the documented 404)
                parameter["schema"] = {"type": "integer", "minimum": 1, "maximum": MAX_ID}
            if parameter.get("in") == "query" and "schema" in parameter:
                # RejectNulBytesMiddleware answers 400 to a NUL in any query parameter,
                # before authentication; the schema says so, so no client takes it as valid
                parameter["schema"] = _without_nul(parameter["schema"])
        return parameters

    def _get_response_bodies(self, direction="response"):
        responses = super()._get_response_bodies(direction)
        if direction != "response":
            return responses
        for status in self._error_statuses():
            if status == "414":  # gunicorn's own page, not the API's error shape
                responses.setdefault(status, {"description": ERROR_DESCRIPTIONS[status]})
            elif status not in responses:
                responses[status] = self._get_response_for_code(
                    error_response(status), status, direction=direction
                )
        return responses


def documented_query_parameters(view, method: str) -> set[str]:
    """The query parameters `view`'s operation for `method` documents: those of its
    `@extend_schema(parameters=...)` (an `OpenApiParameter` in the query, each writable
    field of a serializer), read as drf-spectacular reads them for the schema."""
    handler = getattr(view, method.lower(), None)
    schema_class = getattr(handler, "kwargs", {}).get("schema")
    if schema_class is None:
        return set()
    schema = schema_class()
    schema.view, schema.method = view, method.upper()
    names = set()
    for parameter in schema.get_override_parameters():
        if isinstance(parameter, OpenApiParameter):
            if parameter.location == OpenApiParameter.QUERY and not parameter.response:
                names.add(parameter.name)
        elif is_basic_serializer(parameter):
            fields = force_instance(parameter).fields
            names.update(name for name, field in fields.items() if not field.read_only)
    return names


def _without_nul(schema: dict) -> dict:
    """A copy of a query parameter's schema whose free-text strings, alone or as a branch
    of `oneOf`/`anyOf` (an id or a name), exclude NUL (the field's own dict may be shared
    with request bodies, so it is not changed)."""
    schema = dict(schema)
    if schema.get("type") == "string" and not {"enum", "format"} & set(schema):
        schema.setdefault("pattern", NO_NUL_PATTERN)
    for key in ("oneOf", "anyOf"):
        if key in schema:
            schema[key] = [_without_nul(branch) for branch in schema[key]]
    return schema


def paginated(
    serializer_class: type[serializers.Serializer],
    name: str,
    extra: dict[str, serializers.Field] | None = None,
) -> type:
    """The limit/offset page of `serializer_class`, as LimitOffsetPagination returns it,
    with the `extra` fields beside `count` (such as the window the rows cover)."""
    return type(
        name,
        (serializers.Serializer,),
        {
            "count": serializers.IntegerField(),
            "next": serializers.URLField(allow_null=True),
            "previous": serializers.URLField(allow_null=True),
            **(extra or {}),
            "results": serializer_class(many=True),
        },
    )


# ---------------------------------------------------------------- the published contract

HEADERS = {
    "Retry-After": {
        "schema": {"type": "integer", "minimum": 0},
        "description": "Seconds to wait before retrying",
    },
    "X-Request-ID": {
        "schema": {"type": "string", "minLength": 1},
        "description": "This request's id, in the server's log lines about it (a trusted "
        "proxy's own X-Request-ID when it sent one); quote it when reporting a problem",
    },
    "WWW-Authenticate": {
        "schema": {"type": "string", "enum": ["Token"]},
        "description": "The scheme to sign in with: `Authorization: Token <token>` "
        "(`Bearer <token>` works too)",
    },
    "Idempotent-Replayed": {
        "schema": {"type": "string", "enum": ["true"]},
        "description": "Present when an Idempotency-Key retry answered with the first "
        "request's jobs (`replayed: true`); nothing new was created",
    },
}
_ACTIONS = {"post": "create", "patch": "partial_update", "put": "update", "delete": "destroy"}


def operation_id(path: str, method: str, operation: dict) -> str:
    """One style for every operation: `<resource>_<action>` from the path without its
    `/api/v1/` prefix and parameters (`jobs_list`, `jobs_retrieve`, `jobs_create`,
    `jobs_cancel`, `budget_changes_partial_update`, `auth_tokens_destroy_all`)."""
    parts = [p for p in path.removeprefix("/api/v1/").strip("/").split("/")]
    names = [p.replace("-", "_") for p in parts if not p.startswith("{")]
    if len(names) > 1 and not parts[-1].startswith("{") and "{" in path:
        return "_".join(names)  # an action on one object: jobs/{id}/cancel/
    ok = operation.get("responses", {}).get("200", {})
    schema = ok.get("content", {}).get("application/json", {}).get("schema", {})
    ref = schema.get("$ref", "")
    if method == "get":
        many = schema.get("type") == "array" or ref.split("/")[-1].startswith("Paginated")
        action = "list" if many or ref.endswith("QueuePageOutput") else "retrieve"
    elif method == "delete" and not parts[-1].startswith("{"):
        action = "destroy_all"
    else:
        action = _ACTIONS[method]
    return "_".join([*names, action])


def _nullable_to_31(node):
    """OAS 3.1 has no `nullable`: `{..., "nullable": true}` becomes a type list, or a
    `oneOf` with `{"type": "null"}` for a reference (strict 3.1 validators accept both)."""
    if isinstance(node, list):
        return [_nullable_to_31(item) for item in node]
    if not isinstance(node, dict):
        return node
    node = {key: _nullable_to_31(value) for key, value in node.items()}
    if node.pop("nullable", False):
        kind = node.get("type")
        if isinstance(kind, str):
            node["type"] = [kind, "null"]
            if "enum" in node and None not in node["enum"]:
                node["enum"] = [*node["enum"], None]
        elif isinstance(kind, list) and "null" not in kind:
            node["type"] = [*kind, "null"]
        elif "allOf" in node and len(node["allOf"]) == 1:
            node["oneOf"] = [node.pop("allOf")[0], {"type": "null"}]
        elif "oneOf" in node or "anyOf" in node:
            key = "oneOf" if "oneOf" in node else "anyOf"
            node[key] = [*node[key], {"type": "null"}]
        else:
            node = {"oneOf": [node, {"type": "null"}]}
    return node


def postprocess(result, generator, request, public):
    """drf-spectacular's last step: one operationId style, every response header
    documented, request bodies closed (`additionalProperties: false`, as `StrictInput`
    enforces) and OAS 3.1 nullability (the bearer scheme: accounts.authentication)."""
    for path, item in result.get("paths", {}).items():
        for method, operation in item.items():
            if not isinstance(operation, dict) or "responses" not in operation:
                continue
            operation["operationId"] = operation_id(path, method, operation)
            for status, response in operation["responses"].items():
                if status == "414":  # gunicorn's own answer, before Django
                    continue
                headers = response.setdefault("headers", {})
                headers["X-Request-ID"] = HEADERS["X-Request-ID"]
                if status in ("429", "503"):
                    headers["Retry-After"] = HEADERS["Retry-After"]
                if status == "401":
                    headers["WWW-Authenticate"] = HEADERS["WWW-Authenticate"]
                if operation["operationId"] == "jobs_create" and status == "201":
                    headers["Idempotent-Replayed"] = HEADERS["Idempotent-Replayed"]
    components = result.setdefault("components", {})
    for name, schema in components.get("schemas", {}).items():
        if name.endswith("Request") and schema.get("type") == "object":
            schema["additionalProperties"] = False
    return _nullable_to_31(result)
