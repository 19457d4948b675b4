"""Structured logs (config/logs.py): timestamp, level, logger, request id and cycle id,
as text or one JSON object per line."""

import json
import logging
import re

import pytest

from config import logs

pytestmark = pytest.mark.django_db


class Capture(logging.Handler):
    """The lines a console handler configured like settings.LOGGING would write."""

    def __init__(self, log_format: str) -> None:
        super().__init__()
        config = logs.handler_config(log_format)
        self.setFormatter(config["formatters"][log_format]["()"]())
        self.addFilter(logs.ContextFilter())
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(self.format(record))


@pytest.fixture
def capture():
    handlers = []

    def attach(log_format: str, logger: str = "") -> Capture:
        handler = Capture(log_format)
        logging.getLogger(logger).addHandler(handler)
        handlers.append((logger, handler))
        return handler

    yield attach
    for logger, handler in handlers:
        logging.getLogger(logger).removeHandler(handler)


def test_a_json_line_has_time_level_logger_message_and_the_ids():
    record = logging.LogRecord("scheduler.x", logging.WARNING, __file__, 1, "%s GPUs", (8,), None)
    record.cluster = "h100"  # an `extra` field
    logs.ContextFilter().filter(record)
    with logs.cycle_scope(42):
        logs.ContextFilter().filter(record)
    entry = json.loads(logs.JsonFormatter().format(record))
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", entry["ts"])
    assert entry["level"] == "WARNING" and entry["logger"] == "scheduler.x"
    assert entry["message"] == "8 GPUs" and entry["cycle_id"] == "42"
    assert entry["cluster"] == "h100" and "request_id" not in entry


def test_every_request_has_an_id_in_its_response_and_its_log_lines(client, capture):
    lines = capture("text", "django.request").lines
    response = client.get("/no-such-page/")
    request_id = response["X-Request-ID"]
    assert re.fullmatch(r"[0-9a-f]{32}", request_id)
    assert any(f"[request={request_id}]" in line and " WARNING " in line for line in lines)
    assert client.get("/healthz/web")["X-Request-ID"] != request_id


def test_a_trusted_proxys_request_id_is_kept_and_a_clients_is_not(client, settings):
    import ipaddress

    settings.ALLOT_TRUSTED_PROXIES = 1
    settings.ALLOT_PROXY_NETWORKS = [ipaddress.ip_network("127.0.0.1/32")]
    given = "edge-7f3a9c21"
    proxied = client.get("/healthz/web", REMOTE_ADDR="127.0.0.1", HTTP_X_REQUEST_ID=given)
    assert proxied["X-Request-ID"] == given
    direct = client.get("/healthz/web", REMOTE_ADDR="203.0.113.1", HTTP_X_REQUEST_ID=given)
    assert direct["X-Request-ID"] != given


def test_a_cycles_log_lines_carry_its_id(live, capture):
    lines = capture("json", "scheduler").lines
    live.submit(gpus=8)
    record = live.cycle()
    summary = [json.loads(line) for line in lines if "starts" in line]
    assert summary and summary[-1]["cycle_id"] == str(record.pk)
    assert summary[-1]["logger"] == "scheduler.cycle.run"


def test_the_log_format_is_checked_at_start():
    with pytest.raises(ValueError, match="ALLOT_LOG_FORMAT must be one of text, json"):
        logs.handler_config("xml")
