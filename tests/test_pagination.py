"""The API lists' next and previous links (config.pagination builds them itself, issue
28) are DRF's, whatever the query holds."""

from __future__ import annotations

import pytest
from rest_framework.pagination import LimitOffsetPagination
from rest_framework.request import Request
from rest_framework.test import APIRequestFactory

from config.pagination import Pagination

QUERIES = [
    "",
    "cluster=bench&limit=50",
    "limit=50&offset=100&cluster=a%20b&mine=true",
    "offset=30&limit=20&state=pending&state=running&kind=",
    "z=1&flag&x=%E2%9C%93+y&offset=10&limit=10",
    "limit=7&offset=3&q=%ZZ&q=2",
]


@pytest.mark.parametrize("query", QUERIES)
@pytest.mark.parametrize(
    ("count", "offset", "limit"),
    [(500, 0, 50), (500, 100, 50), (120, 110, 50), (30, 10, 10), (30, 3, 7)],
)
def test_the_links_are_drfs(query: str, count: int, offset: int, limit: int):
    request = Request(APIRequestFactory().get(f"/api/v1/queue/?{query}"))
    ours, drfs = Pagination(), LimitOffsetPagination()
    for paginator in (ours, drfs):
        paginator.count, paginator.offset, paginator.limit = count, offset, limit
        paginator.request = request
    assert ours.get_next_link() == drfs.get_next_link()
    assert ours.get_previous_link() == drfs.get_previous_link()
