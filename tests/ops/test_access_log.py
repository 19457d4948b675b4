"""config/access_log.py: gunicorn's access lines, their atoms computed on demand, are the
lines gunicorn's own logger writes, for the configured format and any other."""

from __future__ import annotations

import datetime as dt
import logging
from pathlib import Path

import pytest
from gunicorn.config import Config
from gunicorn.glogging import Logger

from config.access_log import AccessLogger

ROOT = Path(__file__).resolve().parents[2]


def configured_format() -> str:
    namespace = {"__file__": "config/gunicorn.py"}
    source = (ROOT / "config" / "gunicorn.py").read_text()
    exec(compile(source, "gunicorn.py", "exec"), namespace)
    assert namespace["logger_class"] == "config.access_log.AccessLogger"
    return namespace["access_log_format"]


class Captured(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


def line(logger_class, log_format: str, resp, req, environ) -> str:
    cfg = Config()
    cfg.set("accesslog", "-")
    cfg.set("access_log_format", log_format)
    logger = logger_class(cfg)
    captured = Captured()
    logger.access_log.addHandler(captured)
    try:
        logger.access(resp, req, environ, dt.timedelta(seconds=1, microseconds=234_567))
    finally:
        logger.access_log.removeHandler(captured)
    assert len(captured.lines) == 1
    return captured.lines[0]


class Resp:
    def __init__(self, status, sent, headers) -> None:
        self.status, self.sent, self.headers = status, sent, headers


class Req:
    def __init__(self, headers) -> None:
        self.headers = headers


ENVIRON = {
    "REMOTE_ADDR": "10.0.0.7",
    "REQUEST_METHOD": "POST",
    "RAW_URI": '/api/v1/jobs/?q="x"',
    "PATH_INFO": "/api/v1/jobs/",
    "QUERY_STRING": 'q="x"',
    "SERVER_PROTOCOL": "HTTP/1.1",
    "HTTP_USER_AGENT": 'curl "8"',
}
REQ = Req([("HOST", "localhost"), ("USER-AGENT", 'curl "8"'), ("X-Thing", "a")])
CASES = [
    Resp("201 Created", 812, [("Content-Type", "application/json"), ("X-Request-ID", "ab12")]),
    Resp("404 Not Found", None, [("X-Other", '"q"'), ("X-Other", "last")]),
    Resp(500, 0, []),
]
OTHER_FORMAT = (
    '%(h)s %(l)s %(u)s "%(r)s" %(s)s %(b)s %(B)s "%(f)s" "%(a)s" %(m)s %(U)s %(q)s %(H)s '
    "%(T)s %(D)s %(M)s %(L)s %(p)s %({x-thing}i)s %({X-Other}o)s %({missing}o)s "
    "%({request_method}e)s %(nothing)s"
)


@pytest.mark.parametrize("resp", CASES)
@pytest.mark.parametrize("which", ["configured", "other"])
def test_the_lines_are_gunicorns(resp, which):
    log_format = configured_format() if which == "configured" else OTHER_FORMAT
    ours = line(AccessLogger, log_format, resp, REQ, dict(ENVIRON))
    assert ours == line(Logger, log_format, resp, REQ, dict(ENVIRON))
    if which == "configured" and resp.status == "201 Created":
        assert (
            ours == '10.0.0.7 "POST /api/v1/jobs/?q=\\"x\\" HTTP/1.1" 201 812 1234ms request=ab12'
        )
