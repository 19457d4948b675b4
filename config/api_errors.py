"""One error shape for every API response that is not a success.

Every 4xx (and the rare 5xx) body is an object with:

- `code`: a stable machine-readable reason (`invalid`, `not_authenticated`,
  `authentication_failed`, `permission_denied`, `not_found`, `conflict`,
  `method_not_allowed`, `not_acceptable`, `unsupported_media_type`, `parse_error`,
  `throttled`, `too_large`, ...);
- `detail`: a sentence for a person;
- `field` (optional): the input that caused it, as a path such as `changes[0].weight`;
- `errors` (optional, validation only): every invalid field, each `{field, code, detail}`;
- extra keys that a specific error documents (e.g. `current_version` on a stale 409).

Domain errors (`config.errors.ApplicationError`) and DRF's own exceptions are both
turned into it here; `config.api_schema` documents it for every operation.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.exceptions import PermissionDenied as DjangoPermissionDenied
from django.core.exceptions import RequestDataTooBig
from django.http import Http404
from rest_framework import exceptions
from rest_framework.response import Response
from rest_framework.views import exception_handler as drf_exception_handler

from config.errors import ApplicationError


def flatten_errors(detail: Any, path: str = "") -> list[dict[str, str]]:
    """DRF's nested validation detail as a flat list of {field, code, detail}."""
    if isinstance(detail, dict):
        out: list[dict[str, str]] = []
        for key, value in detail.items():
            name = "" if key == "non_field_errors" else str(key)
            out.extend(flatten_errors(value, f"{path}.{name}" if path and name else path or name))
        return out
    if isinstance(detail, list):
        if all(isinstance(item, exceptions.ErrorDetail | str) for item in detail):
            return [
                {"field": path, "code": getattr(item, "code", "invalid"), "detail": str(item)}
                for item in detail
            ]
        out = []
        for i, item in enumerate(detail):
            out.extend(flatten_errors(item, f"{path}[{i}]"))
        return out
    return [{"field": path, "code": getattr(detail, "code", "invalid"), "detail": str(detail)}]


def error_body(exc: exceptions.APIException) -> dict[str, Any]:
    """The documented error object for a DRF exception."""
    if isinstance(exc, exceptions.ValidationError):
        errors = flatten_errors(exc.detail) or [
            {"field": "", "code": "invalid", "detail": "Invalid."}
        ]
        first = errors[0]
        body: dict[str, Any] = {"code": "invalid", "detail": first["detail"]}
        if first["field"]:
            body["field"] = first["field"]
            body["detail"] = f"{first['field']}: {first['detail']}"
        body["errors"] = [{k: v for k, v in e.items() if v or k != "field"} for e in errors]
        return body
    code = exc.get_codes() if isinstance(exc.get_codes(), str) else exc.default_code
    return {"code": code, "detail": str(exc.detail)}


def too_large_body() -> dict[str, str]:
    """The 413's body: a request body over Django's DATA_UPLOAD_MAX_MEMORY_SIZE (it was
    Django's HTML 400 page, not the error shape)."""
    limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
    return {"code": "too_large", "detail": f"The request body is over {limit:,} bytes."}


def exception_handler(exc: Exception, context: dict[str, Any]) -> Response | None:
    if isinstance(exc, ApplicationError):
        return Response(exc.as_dict(), status=exc.status_code, headers=exc.headers or None)
    if isinstance(exc, RequestDataTooBig):
        return Response(too_large_body(), status=413)
    if isinstance(exc, Http404):
        exc = exceptions.NotFound()
    elif isinstance(exc, DjangoPermissionDenied):
        exc = exceptions.PermissionDenied()
    response = drf_exception_handler(exc, context)
    if response is not None and isinstance(exc, exceptions.APIException):
        response.data = error_body(exc)
    return response


def _api_or_page(request, status: int, code: str, detail: str, page_handler):
    from django.http import JsonResponse

    if request.path.startswith("/api/"):
        return JsonResponse({"code": code, "detail": detail}, status=status)
    return page_handler(request)


def handler404(request, exception=None):
    """JSON for unknown API paths (the error shape), Django's page otherwise."""
    from django.views.defaults import page_not_found

    return _api_or_page(
        request,
        404,
        "not_found",
        f"There is no API endpoint at {request.path}.",
        lambda r: page_not_found(r, exception),
    )


def handler500(request):
    """500 for bugs; 503 with Retry-After when the database cannot be reached (a
    restart or a failover is not a bug: clients retry)."""
    import sys

    from django.db import InterfaceError, OperationalError
    from django.views.defaults import server_error

    if isinstance(sys.exc_info()[1], OperationalError | InterfaceError):
        response = _api_or_page(
            request,
            503,
            "unavailable",
            "The database is not reachable right now; retry in a few seconds.",
            _unavailable_page,
        )
        response["Retry-After"] = str(DATABASE_RETRY_AFTER_S)
        return response
    return _api_or_page(
        request, 500, "server_error", "Internal error; it has been logged.", server_error
    )


DATABASE_RETRY_AFTER_S = 5


def _unavailable_page(request):
    from django.http import HttpResponse

    return HttpResponse(
        "Allot is briefly unavailable (its database is not reachable). "
        "Please retry in a few seconds.",
        status=503,
        content_type="text/plain; charset=utf-8",
    )
