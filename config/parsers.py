"""The API's one request parser: JSON, nested at most `MAX_JSON_DEPTH` levels.

DRF's JSONParser turns only a `ValueError` of the decoder into a 400. A body nested
deeper than the interpreter's recursion limit (`[[[[...` ten thousand times, a few
kilobytes) makes the decoder raise `RecursionError` instead, which was a 500; a body
nested a little less deep parsed, and the code after it that walks the data (the
Idempotency-Key's fingerprint, the serializers, the error list) could still hit the
limit. No request of the API nests deeper than a few levels (a job's `spec.env`, a
budget change's `changes[i]`), so deeper bodies are refused here, as a `parse_error`
400 of the error shape, before anything walks them.

A JSON number with a fraction or an exponent is read as a `JsonFloat`: a float that
keeps the text it was written as, which `str()` gives back. A weight is read from that
text (`budgets.rules.parse_weight`), so `1e-400` is refused as a weight with more than 4
decimal places instead of becoming the float 0.0 (a project without budget), and
`2.00000000000000001` instead of becoming 2.
"""

from __future__ import annotations

import codecs
from typing import Any

from rest_framework import parsers
from rest_framework.exceptions import ParseError
from rest_framework.utils import json

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


class JsonFloat(float):
    """A float read from a JSON number, whose `str()` is the number's text as sent."""

    __slots__ = ("text",)

    def __new__(cls, text: str) -> JsonFloat:
        number = super().__new__(cls, text)
        number.text = text
        return number

    def __str__(self) -> str:
        return self.text


class JSONParser(parsers.JSONParser):
    """DRF's, with a bound on nesting and numbers that keep their text (see the
    module's docstring)."""

    def parse(self, stream, media_type=None, parser_context=None):
        too_deep = f"JSON parse error - the body nests deeper than {MAX_JSON_DEPTH} levels."
        encoding = parsers.get_encoding(parser_context or {})
        try:
            data = json.load(
                codecs.getreader(encoding)(stream),
                parse_constant=json.strict_constant if self.strict else None,
                parse_float=JsonFloat,
            )
        except RecursionError:
            raise ParseError(too_deep) from None
        except ValueError as exc:
            raise ParseError(f"JSON parse error - {exc}") from None
        if json_depth_over(data, MAX_JSON_DEPTH):
            raise ParseError(too_deep)
        return data
