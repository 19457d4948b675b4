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
            status, body = state["answer"][0], state["answer"][1]
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


def _series(metric_values):
    return json.dumps(
        {
            "status": "success",
            "data": {
                "resultType": "matrix",
                "result": [
                    {"metric": {"Hostname": "h000", "gpu": str(gpu)}, "values": values}
                    for gpu, values in metric_values
                ],
            },
        }
    )


def test_sm_activity_and_memory_come_with_the_samples_where_published(server):
    """SM active (a 0-1 ratio) becomes a percentage and memory used stays MiB, at the same
    GPU and time as the utilization; a GPU or time without them has them unknown (None),
    and an optional metric that cannot be read leaves them unknown, not the read failed."""
    answers = {
        "DCGM_FI_DEV_GPU_UTIL": (200, _series([(0, [[10, "90"], [11, "80"]]), (1, [[10, "5"]])])),
        "DCGM_FI_PROF_SM_ACTIVE": (200, _series([(0, [[10, "0.75"]])])),
        "DCGM_FI_DEV_FB_USED": (200, _series([(0, [[10, "40000"], [11, "41000"]])])),
    }

    class ByQuery:
        def __getitem__(self, index):
            query = server["seen"][-1][1]["query"][0]
            return answers[query.split("{")[0]][index]

    server["answer"] = ByQuery()
    samples = read_prometheus(PrometheusSource(url=server["url"]), 10.0, 11.0, 1.0)
    assert [(s.gpu, s.at_s, s.util_pct, s.sm_active_pct, s.fb_used_mib) for s in samples] == [
        (0, 10.0, 90.0, 75.0, 40000.0),
        (0, 11.0, 80.0, None, 41000.0),
        (1, 10.0, 5.0, None, None),
    ]
    assert [q["query"][0] for _, q, _ in server["seen"]] == [
        "DCGM_FI_DEV_GPU_UTIL", "DCGM_FI_PROF_SM_ACTIVE", "DCGM_FI_DEV_FB_USED",
    ]  # fmt: skip
    answers["DCGM_FI_PROF_SM_ACTIVE"] = (500, "profiling off")
    answers["DCGM_FI_DEV_FB_USED"] = (200, "<html>")
    samples = read_prometheus(PrometheusSource(url=server["url"]), 10.0, 11.0, 1.0)
    assert [(s.util_pct, s.sm_active_pct, s.fb_used_mib) for s in samples][0] == (90.0, None, None)


def test_an_exposition_carries_sm_activity_and_memory_of_the_same_gpu():
    text = (
        'DCGM_FI_DEV_GPU_UTIL{gpu="2",Hostname="n1"} 37\n'
        'DCGM_FI_DEV_GPU_UTIL{gpu="3",Hostname="n1"} 0\n'
        'DCGM_FI_PROF_SM_ACTIVE{gpu="2",Hostname="n1"} 0.5\n'
        'DCGM_FI_DEV_FB_USED{gpu="2",Hostname="n1"} 1024\n'
        'DCGM_FI_DEV_FB_USED{gpu="9",Hostname="n1"} 7\n'  # no utilization: no sample
    )
    found = [(s.gpu, s.util_pct, s.sm_active_pct, s.fb_used_mib) for s in parse_exposition(text, 1)]
    assert found == [(2, 37.0, 50.0, 1024.0), (3, 0.0, None, None)]
