"""`config.negotiation.StrictContentNegotiation` answers what DRF's own negotiation
answers for the Accept headers it decides without DRF's parsing (none, `*/*`, the one
media type offered), and leaves every other header to DRF."""

from __future__ import annotations

import pytest
from django.test import RequestFactory
from rest_framework.negotiation import DefaultContentNegotiation
from rest_framework.renderers import BrowsableAPIRenderer, JSONRenderer
from rest_framework.request import Request

from config.errors import NotAcceptable
from config.negotiation import StrictContentNegotiation


def request(accept: str | None, query: str = "") -> Request:
    headers = {} if accept is None else {"HTTP_ACCEPT": accept}
    return Request(RequestFactory().get(f"/api/v1/jobs/{query}", **headers))


@pytest.mark.parametrize(
    "accept",
    [
        None,
        "*/*",
        "application/json",
        "application/json; indent=4",
        "application/*",
        "text/html,*/*;q=0.8",
        "application/json;q=0.9, */*;q=0.1",
    ],
)
@pytest.mark.parametrize("renderers", [[JSONRenderer()], [JSONRenderer(), BrowsableAPIRenderer()]])
def test_the_answer_is_drfs(accept, renderers):
    ours = StrictContentNegotiation().select_renderer(request(accept), renderers)
    drfs = DefaultContentNegotiation().select_renderer(request(accept), renderers)
    assert ours == drfs


def test_a_header_without_json_and_an_unknown_format_are_still_refused():
    with pytest.raises(NotAcceptable):
        StrictContentNegotiation().select_renderer(request("text/html"), [JSONRenderer()])
    with pytest.raises(NotAcceptable):
        StrictContentNegotiation().select_renderer(request("*/*", "?format=xml"), [JSONRenderer()])
