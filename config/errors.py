"""The domain's error family. Services raise these; the API and pages map them to 4xx."""

from __future__ import annotations

from typing import Any


class ApplicationError(Exception):
    """A request the domain refuses. `field` names the offending input where there is one."""

    status_code = 400
    code = "invalid"

    def __init__(
        self, message: str, *, field: str | None = None, extra: dict[str, Any] | None = None
    ):
        super().__init__(message)
        self.message = message
        self.field = field
        self.extra = extra or {}
        self.headers: dict[str, str] = {}  # response headers, e.g. Retry-After

    def as_dict(self) -> dict[str, Any]:
        body: dict[str, Any] = {"code": self.code, "detail": self.message}
        if self.field:
            body["field"] = self.field
        body.update(self.extra)
        return body


class ValidationFailed(ApplicationError):
    status_code = 400
    code = "invalid"


class NothingToChange(ValidationFailed):
    """The request would change nothing; it is refused so the audit trail stays meaningful."""

    code = "no_change"


class PermissionDenied(ApplicationError):
    status_code = 403
    code = "permission_denied"


class NotFound(ApplicationError):
    status_code = 404
    code = "not_found"


class Conflict(ApplicationError):
    status_code = 409
    code = "conflict"


class Throttled(ApplicationError):
    """Too many at once or too often; set `headers["Retry-After"]` to the seconds to wait."""

    status_code = 429
    code = "throttled"


class NotAcceptable(ApplicationError):
    """A response format the API does not produce (`?format=xml`, `Accept: text/html`)."""

    status_code = 406
    code = "not_acceptable"
