"""One pagination for every API list: `limit` and `offset`, bounded and checked.

DRF's LimitOffsetPagination falls back to its default on a `limit` it cannot read and
passes any `offset` to the database, where one past bigint is a 500 (issue 30). Here a
value that is not a whole number in range is a 400 naming the parameter, and the schema
documents both parameters with their bounds on every list operation (`PAGE_PARAMETERS`)."""

from __future__ import annotations

from urllib.parse import parse_qs, urlencode, urlsplit, urlunsplit

from drf_spectacular.utils import OpenApiParameter
from rest_framework.pagination import LimitOffsetPagination

from config.errors import ValidationFailed
from config.text import is_id_text

DEFAULT_LIMIT = 100
MAX_LIMIT = 1000
MAX_OFFSET = 1_000_000_000  # far beyond any list here, far below bigint

PAGE_PARAMETERS = [
    OpenApiParameter(
        "limit",
        {"type": "integer", "minimum": 1, "maximum": MAX_LIMIT},
        description=f"Rows per page (default {DEFAULT_LIMIT}, at most {MAX_LIMIT})",
    ),
    OpenApiParameter(
        "offset",
        {"type": "integer", "minimum": 0, "maximum": MAX_OFFSET},
        description="Rows to skip (default 0); `next` and `previous` carry it",
    ),
]


def _bounded(request, name: str, *, default: int, low: int, high: int) -> int:
    raw = request.query_params.get(name)
    if raw is None:
        return default
    value = int(raw) if is_id_text(raw) else None
    if value is None or not low <= value <= high:
        raise ValidationFailed(
            f"{name} must be a whole number from {low} to {high}, got {raw[:40]!r}.", field=name
        )
    return value


class Pagination(LimitOffsetPagination):
    """`limit` 1..1000 (default 100), `offset` 0..10^9; anything else is a 400."""

    default_limit = DEFAULT_LIMIT
    max_limit = MAX_LIMIT

    def get_limit(self, request) -> int:
        return _bounded(
            request, self.limit_query_param, default=DEFAULT_LIMIT, low=1, high=MAX_LIMIT
        )

    def get_offset(self, request) -> int:
        return _bounded(request, self.offset_query_param, default=0, low=0, high=MAX_OFFSET)

    def get_next_link(self) -> str | None:
        if self.offset + self.limit >= self.count:
            return None
        return self._link(self.offset + self.limit)

    def get_previous_link(self) -> str | None:
        if self.offset <= 0:
            return None
        return self._link(self.offset - self.limit if self.offset > self.limit else None)

    def _link(self, offset: int | None) -> str:
        """DRF's link: the request's absolute URL with `limit` set and `offset` set (or,
        None, removed), the query sorted; its URL parsed and encoded once, not twice."""
        scheme, netloc, path, query, fragment = urlsplit(self.request.build_absolute_uri())
        params = parse_qs(query, keep_blank_values=True)
        params[self.limit_query_param] = [str(self.limit)]
        if offset is None:
            params.pop(self.offset_query_param, None)
        else:
            params[self.offset_query_param] = [str(offset)]
        return urlunsplit(
            (scheme, netloc, path, urlencode(sorted(params.items()), doseq=True), fragment)
        )
