"""The `live_server` answers without Nagle's delay (TCP_NODELAY on every connection it
accepts). A plugin of tests/conftest.py.

Why: Django's test server (wsgiref's handler) writes a response's headers and its body in
two sends. With Nagle's algorithm on, the body waits until the client acknowledges the
headers, and the client delays that acknowledgement (40 ms on Linux): every response of
the live server took 40-50 ms more than the server's own work. The schema fuzzer's
coverage phase sends ~1,000 requests a part, one after another: 52 s of the first
part's 58 were those waits (the server's work was 9 s, the fuzzer's CPU 6 s), 16 s with
this. Browsers and the CLI tests wait on the same server."""

from __future__ import annotations

import pytest
from django.test.testcases import QuietWSGIRequestHandler


@pytest.fixture(autouse=True, scope="session")
def _live_server_without_nagle():
    # socketserver.StreamRequestHandler.setup sets TCP_NODELAY when this is true
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(QuietWSGIRequestHandler, "disable_nagle_algorithm", True)
        yield
