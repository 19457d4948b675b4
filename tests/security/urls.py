"""Every URL the project serves, walked from the URL configuration, so that checks over
"every endpoint and page" include the ones added later without editing the tests."""

from __future__ import annotations

import re

from django.urls import URLPattern, URLResolver, get_resolver

_CONVERTER = re.compile(r"<(?:(?P<kind>\w+):)?\w+>")
_SAMPLE = {"int": "1", "slug": "sample", "str": "sample", "path": "sample", "uuid": "0" * 32}


def _route(pattern) -> str | None:
    """A concrete path for a pattern, or None for regex patterns with groups."""
    route = getattr(pattern.pattern, "_route", None)
    if route is not None:
        return _CONVERTER.sub(lambda m: _SAMPLE.get(m.group("kind") or "str", "sample"), route)
    regex = pattern.pattern.regex.pattern
    if "(" in regex:
        return None
    return regex.lstrip("^").rstrip("$").replace("\\", "")


def all_paths(resolver: URLResolver | None = None, prefix: str = "/") -> list[str]:
    """Concrete paths for every URL pattern (regex ones with groups are skipped)."""
    resolver = resolver or get_resolver()
    paths: list[str] = []
    for pattern in resolver.url_patterns:
        route = _route(pattern)
        if route is None:
            continue
        if isinstance(pattern, URLResolver):
            paths.extend(all_paths(pattern, prefix + route))
        elif isinstance(pattern, URLPattern):
            paths.append(prefix + route)
    return sorted(set(paths))
