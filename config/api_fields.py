"""Input fields for the API that take only the JSON types the schema documents.

DRF's CharField turns a number into text (`"reason": 0` became the reason "0"), so a
request the schema calls invalid was accepted (schemathesis found it). These fields
refuse other JSON types with a 400 that names the field."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers


class TextField(serializers.CharField):
    """A CharField that accepts only a JSON string."""

    default_error_messages = {"invalid": "Must be text (a JSON string)."}

    def to_internal_value(self, data: Any) -> str:
        if not isinstance(data, str):
            self.fail("invalid")
        return super().to_internal_value(data)


@extend_schema_field({"oneOf": [{"type": "number"}, {"type": "string"}]})
class NumberOrTextField(serializers.Field):
    """A number, or a number written as a JSON string (weights: `5`, `"2.5"`); the
    service parses it by its own rule. Other JSON types are refused."""

    default_error_messages = {"invalid": "Not a number or a numeric string."}

    def to_internal_value(self, data: Any) -> int | float | str:
        if isinstance(data, bool) or not isinstance(data, (int, float, str)):
            self.fail("invalid")
        return data

    def to_representation(self, value: Any) -> Any:
        return value


# A request body that refuses fields it does not know (400 naming the first one), nested
# objects included: a misspelt optional field is an error, never ignored. The schema says
# the same (`additionalProperties: false` on every request body). A comment, not a
# docstring: the schema would show a docstring as every input's description.
class StrictInput(serializers.Serializer):
    default_error_messages = {"unknown": "Unknown field; the fields are {fields}."}

    def to_internal_value(self, data: Any) -> Any:
        if isinstance(data, dict):
            unknown = sorted(str(key) for key in data if key not in self.fields)
            if unknown:
                names = ", ".join(self.fields)
                raise serializers.ValidationError(
                    {unknown[0]: [self.error_messages["unknown"].format(fields=names)]},
                    code="unknown",
                )
        return super().to_internal_value(data)


class NamedChoicesMixin:
    """A refused choice names every valid value (`"foo" is not a valid choice; choose one
    of: pending, running.`), so a client need not read the schema to correct it."""

    default_error_messages = {
        "invalid_choice": '"{input}" is not a valid choice; choose one of: {choices}.'
    }

    def fail(self, key: str, **kwargs: Any):
        if key == "invalid_choice":
            kwargs.setdefault("choices", ", ".join(str(value) for value in self.choices))  # type: ignore[attr-defined]
        return super().fail(key, **kwargs)  # type: ignore[misc]


class ChoiceField(NamedChoicesMixin, serializers.ChoiceField):
    """DRF's ChoiceField whose error names the valid values (every API choice uses it)."""


class MultipleChoiceField(NamedChoicesMixin, serializers.MultipleChoiceField):
    """DRF's MultipleChoiceField whose error names the valid values."""
