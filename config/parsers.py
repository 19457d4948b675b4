"""The API's one request parser: JSON, nested at most `MAX_JSON_DEPTH` levels.

DRF's JSONParser turns only a `ValueError` of the decoder into a 400. A body nested
deeper than the interpreter's recursion limit (`[[[[...` ten thousand times, a few
kilobytes) makes the decoder raise `RecursionError` instead, which was a 500; a body
nested a little less deep parsed, and the code after it that walks the data (the
Idempotency-Key's fingerprint, the serializers, the error list) could still hit the
limit. No request of the API nests deeper than a few levels (a job's `spec.env`, a
budget change's `changes[i]`), so deeper bodies are refused here, as a `parse_error`
400 of the error shape, before anything walks them.
"""

from __future__ import annotations

from typing import Any

from rest_framework import parsers
from rest_framework.exceptions import ParseError

MAX_JSON_DEPTH = 32


def json_depth_over(data: Any, limit: int) -> bool:
    """Whether `data` (parsed JSON) nests lists and objects deeper than `limit` levels;
    walked without recursion."""
    pending = [(data, 1)]
    while pending:
        value, depth = pending.pop()
        if isinstance(value, dict):
            children = value.values()
        elif isinstance(value, list):
            children = value
        else:
            continue
        if depth > limit:
            return True
        pending.extend((child, depth + 1) for child in children)
    return False


class JSONParser(parsers.JSONParser):
    """DRF's, with a bound on nesting (see the module's docstring)."""

    def parse(self, stream, media_type=None, parser_context=None):
        too_deep = f"JSON parse error - the body nests deeper than {MAX_JSON_DEPTH} levels."
        try:
            data = super().parse(stream, media_type, parser_context)
        except RecursionError:
            raise ParseError(too_deep) from None
        if json_depth_over(data, MAX_JSON_DEPTH):
            raise ParseError(too_deep)
        return data
