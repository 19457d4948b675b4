"""Reading GPU metrics (scheduler/adapters/gpu_metrics.py) from a stand-in Prometheus:
the query it sends, the bearer token, and every failure as MetricsUnavailable."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

import pytest

from scheduler.adapters.gpu_metrics import (
    MetricsUnavailable,
    PrometheusSource,
    parse_exposition,
    read_exporter,
    read_prometheus,
)

MATRIX = {
    "status": "success",
    "data": {
        "resultType": "matrix",
        "result": [
            {"metric": {"Hostname": "h000", "gpu": "1"}, "values": [[10, "92"], [11, "NaN"]]},
            {"metric": {"Hostname": "h000"}, "values": [[10, "5"]]},  # no GPU label: skipped
            {"metric": {"instance": "x", "gpu": "0"}, "values": [[10, "5"]]},
        ],
    },
}


@pytest.fixture
def server():
    """A stand-in answering each request with `answer` (status, body); `seen` keeps the
    requests' paths, queries and headers."""
    state = {"answer": (200, json.dumps(MATRIX)), "seen": []}

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802
            parts = urlsplit(self.path)
            state["seen"].append((parts.path, parse_qs(parts.query), dict(self.headers)))
            status, body = state["answer"]
            self.send_response(status)
            self.end_headers()
            self.wfile.write(body.encode())

        def log_message(self, *args):
            pass

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    state["url"] = f"http://127.0.0.1:{httpd.server_address[1]}"
    yield state
    httpd.shutdown()
    httpd.server_close()


def test_query_range_with_the_selector_and_the_token(server):
    source = PrometheusSource(url=server["url"], selector='cluster="a"', bearer_token="t0k")
    samples = read_prometheus(source, 10.0, 20.0, 1.0)
    assert [(s.host, s.gpu, s.at_s, s.util_pct) for s in samples] == [("h000", 1, 10.0, 92.0)]
    path, query, headers = server["seen"][0]
    assert path == "/api/v1/query_range"
    assert query["query"] == ['DCGM_FI_DEV_GPU_UTIL{cluster="a"}']
    assert (query["start"], query["end"], query["step"]) == (["10.0"], ["20.0"], ["1.0"])
    assert headers["Authorization"] == "Bearer t0k"


def test_other_label_names_are_read(server):
    samples = read_prometheus(
        PrometheusSource(url=server["url"], host_label="instance"), 10.0, 20.0, 1.0
    )
    assert [(s.host, s.gpu) for s in samples] == [("x", 0)]


@pytest.mark.parametrize(
    ("answer", "says"),
    [((503, "overloaded"), "answered 503"), ((200, "<html>"), "unreadable"),
     ((200, '{"data": {}}'), "unreadable")],
)  # fmt: skip
def test_failures_are_metrics_unavailable(server, answer, says):
    server["answer"] = answer
    with pytest.raises(MetricsUnavailable, match=says):
        read_prometheus(PrometheusSource(url=server["url"]), 10.0, 20.0, 1.0)


def test_nobody_listening_is_metrics_unavailable():
    with pytest.raises(MetricsUnavailable, match="did not answer"):
        read_prometheus(PrometheusSource(url="http://127.0.0.1:9"), 10.0, 20.0, 1.0)
    with pytest.raises(MetricsUnavailable, match="did not answer"):
        read_exporter("http://127.0.0.1:9/metrics", 5.0)


def test_an_exposition_is_parsed_and_garbage_refused(server):
    text = 'DCGM_FI_DEV_GPU_UTIL{gpu="2",Hostname="n1"} 37\nDCGM_FI_DEV_FB_USED{gpu="2"} 9\n'
    assert [(s.host, s.gpu, s.util_pct) for s in parse_exposition(text, 3.0)] == [("n1", 2, 37.0)]
    server["answer"] = (200, "this is { not metrics")
    with pytest.raises(MetricsUnavailable):
        read_exporter(server["url"] + "/metrics", 5.0)
