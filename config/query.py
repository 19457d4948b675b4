"""Query-string filters, read one way by every list: the API's and the pages'.

A list's filters are an input serializer (the API documents it as the operation's query
parameters). `read_query` checks a request's query string with it: a malformed value (a
bad date, an unknown choice, an id that is not a whole number) is a DRF ValidationError,
which the API answers with its 400 naming the field (config.api_errors). A page reads
the same serializer with `read_page_query`: its form sends an empty value for "any", so
blanks count as absent there, and a refused value comes back as `FieldError`s that the
page shows beside its form with a 400 (`query_refused`): never a 200 that quietly drops
the filter. A filter the serializer cannot judge (an unknown node) is the selector's
ValidationFailed, which `field_errors` reads the same way.

Every API operation refuses a parameter it does not take (a typo such as `?stat=pending`
once listed every job): a 400 naming each unknown parameter and the ones the operation
accepts (`refuse_unknown_parameters`, called by config.api_views.ApiView, the base of
every API view, with the parameters the operation documents), then reads its query with
`read_api_query`. Pages keep ignoring parameters they do not read (a link may carry
another page's)."""

from __future__ import annotations

import dataclasses
from collections.abc import Collection
from typing import Any

from django.http import QueryDict
from rest_framework import serializers

from config.api_errors import flatten_errors
from config.api_fields import CHOICES_AS_SHOWN
from config.errors import ApplicationError
from config.negotiation import FORMAT_PARAMETER

QUERY_REFUSED = 400


@dataclasses.dataclass(frozen=True)
class FieldError:
    """One refused query parameter: its name and why."""

    field: str
    detail: str


def query_values(
    params: QueryDict, *, multi: Collection[str] = (), blank_is_absent: bool = False
) -> dict[str, Any]:
    """The query string as a serializer's data: the last value of each parameter; a
    parameter in `multi` as the list of its comma-separated values, repeats included."""
    data: dict[str, Any] = {}
    for key, values in params.lists():
        if key in multi:
            data[key] = [v for value in values for v in value.split(",") if v]
        elif not (blank_is_absent and not values[-1].strip()):
            data[key] = values[-1]
    return data


def read_query(
    query_class: type[serializers.Serializer],
    params: QueryDict,
    *,
    multi: Collection[str] = (),
    blank_is_absent: bool = False,
    context: dict[str, Any] | None = None,
) -> serializers.Serializer:
    """`params` checked by `query_class` (a valid, bound serializer, with `context`); a
    refused value raises DRF's ValidationError naming the field (the API's 400)."""
    query = query_class(
        data=query_values(params, multi=multi, blank_is_absent=blank_is_absent),
        context=context or {},
    )
    query.is_valid(raise_exception=True)
    return query


def refuse_unknown_parameters(params: QueryDict, accepted: Collection[str]) -> None:
    """A 400 naming every parameter of `params` outside `accepted` (but `format`, which
    content negotiation reads), with the parameters the operation accepts. Every API
    operation calls it, before it does anything (config.api_views.ApiView)."""
    unknown = [name for name in params if name not in accepted and name != FORMAT_PARAMETER]
    if not unknown:
        return
    takes = ", ".join(sorted(accepted)) or "none"
    raise serializers.ValidationError(
        {
            name[:40]: serializers.ErrorDetail(
                f"Not a query parameter of this operation, which accepts: {takes}.",
                code="unknown_parameter",
            )
            for name in unknown
        }
    )


def read_api_query(query_class: type[serializers.Serializer], request) -> serializers.Serializer:
    """An API operation's query parameters checked by `query_class` (a valid, bound
    serializer; its `multi` class attribute: the parameters that take a list); a refused
    value is a 400 naming it. (A parameter the operation does not take was refused
    before: config.api_views.ApiView.)"""
    return read_query(query_class, request.query_params, multi=getattr(query_class, "multi", ()))


def field_errors(error: serializers.ValidationError | ApplicationError) -> list[FieldError]:
    """What a page shows for a refused query: each field with its reason."""
    if isinstance(error, ApplicationError):
        return [FieldError(error.field or "", error.message)]
    return [FieldError(e["field"], e["detail"]) for e in flatten_errors(error.detail)]


def read_page_query(
    query_class: type[serializers.Serializer], params: QueryDict
) -> tuple[dict[str, Any], list[FieldError]]:
    """A page's filters: (the valid values, no errors) or ({}, every refused field).
    The form's empty "any" values count as absent; a refused choice names the choices as
    the form's select shows them (`CHOICES_AS_SHOWN`)."""
    try:
        query = read_query(
            query_class, params, blank_is_absent=True, context={CHOICES_AS_SHOWN: True}
        )
        return dict(query.validated_data), []
    except serializers.ValidationError as error:
        return {}, field_errors(error)
