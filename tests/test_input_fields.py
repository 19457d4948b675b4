"""config.api_fields: an input serializer's fields are shallow copies of ones built once
per class, copied without `copy.copy`'s generic path; the copies are what `copy.copy`
gives, for every field of every API input (issue 28)."""

from __future__ import annotations

import copy

from django.urls import get_resolver

from config.api_fields import InputSerializer, _shallow_copy


def subclasses(cls: type) -> list[type]:
    found = []
    for sub in cls.__subclasses__():
        found += [sub, *subclasses(sub)]
    return found


def test_the_fields_copies_are_copy_copys():
    get_resolver().url_patterns  # noqa: B018 (imports every view and its inputs)
    inputs = [cls for cls in subclasses(InputSerializer) if cls._declared_fields]
    assert len(inputs) > 20
    for cls in inputs:
        for name, field in cls().get_fields().items():
            if "child" in vars(field):
                continue
            ours, theirs = _shallow_copy(field), copy.copy(field)
            assert type(ours) is type(theirs), (cls, name)
            assert vars(ours) == vars(theirs), (cls, name)
            assert vars(ours) is not vars(field), (cls, name)
