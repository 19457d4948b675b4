"""Input fields for the API that take only the JSON types the schema documents.

DRF's CharField turns a number into text (`"reason": 0` became the reason "0"), so a
request the schema calls invalid was accepted (schemathesis found it). These fields
refuse other JSON types with a 400 that names the field."""

from __future__ import annotations

import copy
import datetime as dt
from typing import Any

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from config.clock import EARLIEST, LATEST, NOT_A_TIME, read_time
from config.errors import ValidationFailed


@extend_schema_field({"type": "number", "format": "double", "deprecated": True})
class DeprecatedFloatField(serializers.FloatField):
    """A figure kept under its old name for one API version after a rename, marked
    `deprecated` in the schema so that a generated client says so instead of breaking
    silently when the alias goes. Its help text names the new field."""


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


_FIELD_TEMPLATES: dict[type, dict[str, serializers.Field]] = {}


def _flat(field: serializers.Field) -> bool:
    """Whether a shallow copy of `field` is a field of its own: it holds no nested
    serializer or child field that its parent binds."""
    return not isinstance(field, serializers.BaseSerializer) and "child" not in vars(field)


# A comment, not a docstring (the schema would show it as every input's description):
# a serializer whose fields are copied from ones built once per class. DRF deep-copies
# the declared fields for every instance, which builds each field again (its validators,
# its error messages) and cost most of validating a request's few values; a shallow copy
# of an unbound field is as good (the copy is bound, never the built one; fields with a
# nested serializer or child are still deep-copied).
class InputSerializer(serializers.Serializer):
    def get_fields(self) -> dict[str, serializers.Field]:
        built = _FIELD_TEMPLATES.get(type(self))
        if built is None:
            built = _FIELD_TEMPLATES[type(self)] = copy.deepcopy(self._declared_fields)
        return {
            name: _shallow_copy(field) if _flat(field) else copy.deepcopy(field)
            for name, field in built.items()
        }


def _shallow_copy(field: serializers.Field) -> serializers.Field:
    """`copy.copy(field)` without its generic path (`__reduce_ex__`, `_reconstruct`):
    what it does for an object with a `__dict__` and no `__copy__`, `__reduce__`,
    `__getstate__` or slots of its own (DRF's fields), a third of its cost."""
    copied = type(field).__new__(type(field))
    copied.__dict__.update(field.__dict__)
    return copied


# A request body that refuses fields it does not know (400 naming the first one), nested
# objects included: a misspelt optional field is an error, never ignored. The schema says
# the same (`additionalProperties: false` on every request body). A comment, not a
# docstring: the schema would show a docstring as every input's description.
class StrictInput(InputSerializer):
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


def refuse_any_field(data: Any) -> None:
    """For a request that takes no fields (a job's cancellation): a body with any is a
    400 naming the first, never ignored, as `StrictInput` refuses an unknown field. No
    body, `{}` and `null` are accepted."""
    if data is None or data == {}:
        return
    first = sorted(str(key) for key in data)[0] if isinstance(data, dict) else None
    raise ValidationFailed("This request takes no fields; send no body (or {}).", field=first)


TIME_HELP = (
    "An ISO 8601 time, e.g. 2026-11-01T09:00:00Z (without an offset: UTC), or a date "
    f"alone for its midnight UTC; from {EARLIEST:%Y-%m-%d} to {LATEST:%Y-%m-%d}"
)


class TimeField(serializers.DateTimeField):
    """A time as every API input takes it (`TIME_HELP`, `config.clock.read_time`): a 400
    naming the field and saying why for anything else; the value an aware time in UTC."""

    def __init__(self, **kwargs: Any) -> None:
        help_text = kwargs.pop("help_text", "")
        kwargs["help_text"] = f"{help_text}. {TIME_HELP}" if help_text else TIME_HELP
        super().__init__(**kwargs)

    def to_internal_value(self, value: Any) -> dt.datetime:
        if not isinstance(value, (str, dt.datetime)):
            raise serializers.ValidationError(NOT_A_TIME, code="invalid")
        try:
            return read_time(value)
        except ValueError as exc:
            raise serializers.ValidationError(str(exc), code="invalid") from None


# The serializer context key with which a page reads a query (`config.query.read_page_query`)
CHOICES_AS_SHOWN = "choices_as_shown"


class NamedChoicesMixin:
    """A refused choice names every valid value (`"foo" is not a valid choice; choose one
    of: pending, running.`), so a client need not read the schema to correct it. Read
    for a page (context CHOICES_AS_SHOWN), each as its select shows it, with the value
    the URL takes: `Weights changed (applied)`."""

    default_error_messages = {
        "invalid_choice": '"{input}" is not a valid choice; choose one of: {choices}.'
    }

    def fail(self, key: str, **kwargs: Any):
        if key == "invalid_choice":
            shown = self.context.get(CHOICES_AS_SHOWN)  # type: ignore[attr-defined]
            kwargs.setdefault(
                "choices",
                ", ".join(
                    f"{label} ({value})" if shown and str(label) != str(value) else str(value)
                    for value, label in self.choices.items()  # type: ignore[attr-defined]
                ),
            )
        return super().fail(key, **kwargs)  # type: ignore[misc]


class ChoiceField(NamedChoicesMixin, serializers.ChoiceField):
    """DRF's ChoiceField whose error names the valid values (every API choice uses it)."""


class MultipleChoiceField(NamedChoicesMixin, serializers.MultipleChoiceField):
    """DRF's MultipleChoiceField whose error names the valid values."""
