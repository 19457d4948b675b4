"""Beat and the web server fail loudly (ops/heartbeat.py, config/gunicorn.py), with real
processes started by the units' command lines (`deploy/allot-run beat|web`, production
settings), a Redis of the test's own and the test database:

- at start, a beat whose database or broker cannot be used exits with status 69 and one
  line naming the variable (never its password), having sent nothing;
- while it runs, a beat whose database or broker goes away keeps running, but its
  heartbeat stops: `/healthz` answers 503 naming beat; once they are back it beats again
  and `/healthz` no longer names it;
- a web server whose database cannot be used starts, says so in one line naming
  DATABASE_URL, and its `/healthz/web` answers 503 naming the database.
(A worker's own: tests/ops/test_worker_database.py.)"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest
import redis
from django.db import connection
from django.test import Client

from ops.models import Heartbeat, ProcessKind
from ops.worker_database import DATABASE_UNREACHABLE_EXIT
from tests.ops.deploy import http, secret_key
from tests.support.ports import free_port
from tests.support.relay import Outage, closed_port
from tests.support.workers import RedisServer, stop_process

pytestmark = pytest.mark.django_db(transaction=True)
ROOT = Path(__file__).resolve().parents[2]
PASSWORD = "s3cret-not-shown"
QUEUE = "celery"  # where beat sends the due-cycles task every ALLOT_CYCLE_TICK_S


class Process:
    """`deploy/allot-run ROLE` (beat unless `role` says) with `env` over the test's, its
    output in `log`."""

    def __init__(self, tmp_path: Path, role: str = "beat", **env: str) -> None:
        self.log = tmp_path / f"{role}.log"
        base = {k: v for k, v in os.environ.items() if not k.startswith(("CELERY_", "PYTEST"))}
        base.update(
            DJANGO_SETTINGS_MODULE="config.settings.production",
            ALLOT_VENV=str(Path(sys.executable).parent.parent),
            ALLOT_VAR_DIR=str(tmp_path / "var"),
            SECRET_KEY=secret_key(),
            LOG_LEVEL="INFO",
            ALLOT_HEARTBEAT_S="1",
            ALLOT_CYCLE_TICK_S="1",
        )
        base.update(env)
        with self.log.open("w") as out:
            self.popen = subprocess.Popen(
                [str(ROOT / "deploy" / "allot-run"), role],
                cwd=ROOT,
                env=base,
                stdout=out,
                stderr=out,
            )

    def text(self) -> str:
        return self.log.read_text()

    def stop(self) -> None:
        stop_process(self.popen)


@pytest.fixture
def broker(tmp_path):
    server = RedisServer(free_port(), tmp_path).start()
    yield server
    server.stop()


@pytest.fixture
def processes():
    started: list[Process] = []
    yield started
    for process in started:
        process.stop()


def with_password(url: str) -> str:
    """`url` (postgres:// or redis://) with PASSWORD as its password."""
    scheme, rest = url.split("://", 1)
    user = rest.split("@", 1)[0].split(":", 1)[0] if "@" in rest else ""
    return f"{scheme}://{user}:{PASSWORD}@{rest.split('@', 1)[-1]}"


def database_url(port: int | None = None, name: str | None = None) -> str:
    """The test database's URL, at `port` of 127.0.0.1 and named `name` when given."""
    db = connection.settings_dict
    password = f":{db['PASSWORD']}" if db.get("PASSWORD") else ""
    host = "127.0.0.1" if port else db["HOST"] or "127.0.0.1"
    return (
        f"postgres://{db['USER']}{password}@{host}:{port or db['PORT'] or 5432}/"
        f"{name or db['NAME']}"
    )


def exits_69_saying(beat: Process, *said: str) -> str:
    """Beat's one CRITICAL line, after asserting it exited 69 with `said` on that line
    and nowhere its password."""
    assert beat.popen.wait(120) == DATABASE_UNREACHABLE_EXIT, beat.text()
    text = beat.text()
    critical = [line for line in text.splitlines() if " CRITICAL " in line]
    assert len(critical) == 1, text
    assert all(part in critical[0] for part in said), text
    assert PASSWORD not in text
    return critical[0]


@pytest.mark.parametrize(
    ("url", "said"),
    [
        (lambda: with_password(database_url(port=closed_port())), "Connection refused"),
        (lambda: database_url(name="allot_no_such_database"), "does not exist"),
    ],
    ids=["closed port", "no such database"],
)
def test_beat_that_cannot_use_its_database_exits_69_naming_database_url(
    tmp_path, broker, processes, url: Callable[[], str], said: str
):
    beat = Process(tmp_path, DATABASE_URL=url(), REDIS_URL=broker.url)
    processes.append(beat)
    line = exits_69_saying(beat, "DATABASE_URL (postgres://", said, "exits with status 69")
    assert "beat asks for no task" in line
    assert redis.Redis.from_url(broker.url).llen(QUEUE) == 0  # it sent nothing


@pytest.mark.parametrize("variable", ["REDIS_URL", "CELERY_BROKER_URL"])
def test_beat_that_cannot_use_its_broker_exits_69_naming_the_variable(
    tmp_path, processes, variable
):
    port = closed_port()
    env = {"DATABASE_URL": database_url(), "REDIS_URL": f"redis://127.0.0.1:{port}/0"}
    if variable == "CELERY_BROKER_URL":
        env["REDIS_URL"] = f"redis://127.0.0.1:{free_port()}/0"  # the cache's: not checked
    env[variable] = with_password(f"redis://127.0.0.1:{port}/0")
    beat = Process(tmp_path, **env)
    processes.append(beat)
    exits_69_saying(beat, f"{variable} (redis://:**@127.0.0.1:{port}/0)", "Connection refused")
    assert not Heartbeat.objects.filter(kind=ProcessKind.BEAT).exists()


def healthz_names_beat(settings) -> bool:
    """Whether `/healthz` answers 503 naming beat (its heartbeat 3 periods old)."""
    settings.ALLOT_HEARTBEAT_S = 1.0
    response = Client().get("/healthz")
    stale = response.json()["stale"]
    return response.status_code == 503 and "beat" in stale


def wait_for(condition: Callable[[], bool], process: Process, what: str, timeout_s: float) -> float:
    """Seconds until `condition()` held; fails naming `what` after `timeout_s` or when
    `process` exited."""
    started = time.monotonic()
    while not condition():
        said = process.text()
        assert process.popen.poll() is None, f"exited waiting for {what}:\n{said}"
        assert time.monotonic() - started < timeout_s, f"no {what} in {timeout_s} s:\n{said}"
        time.sleep(0.2)
    return time.monotonic() - started


def test_beat_whose_database_goes_away_keeps_sending_and_healthz_names_it(
    tmp_path, broker, processes, settings
):
    db = connection.settings_dict
    relay = Outage(db["HOST"] or "127.0.0.1", int(db["PORT"] or 5432))
    beat = Process(tmp_path, DATABASE_URL=database_url(port=relay.port), REDIS_URL=broker.url)
    processes.append(beat)
    queue = redis.Redis.from_url(broker.url)
    wait_for(lambda: not healthz_names_beat(settings), beat, "a fresh heartbeat", 120)

    relay.down()
    sent_before = queue.llen(QUEUE)
    # 3 heartbeat periods, and the 2 s of the last connection attempt's refusal or timeout
    assert wait_for(lambda: healthz_names_beat(settings), beat, "/healthz naming beat", 20) < 8
    wait_for(lambda: queue.llen(QUEUE) > sent_before, beat, "tasks sent meanwhile", 10)
    lines = beat.text().splitlines()
    warnings = [line for line in lines if "could not record a heartbeat" in line]
    assert warnings and all("Connection refused" in line for line in warnings), beat.text()
    assert all(line.startswith("20") for line in lines), beat.text()  # a line per entry

    relay.up()
    wait_for(lambda: not healthz_names_beat(settings), beat, "a fresh heartbeat again", 30)
    assert beat.popen.poll() is None


def test_beat_whose_broker_goes_away_stops_beating_until_it_is_back(
    tmp_path, broker, processes, settings
):
    beat = Process(tmp_path, DATABASE_URL=database_url(), REDIS_URL=broker.url)
    processes.append(beat)
    queue = redis.Redis.from_url(broker.url)
    wait_for(lambda: not healthz_names_beat(settings), beat, "a fresh heartbeat", 120)
    # connected: a send then fails after Celery's publish retries (a second or two) and
    # beat goes on ticking; before its first send it would wait for the broker instead
    wait_for(lambda: queue.llen(QUEUE) > 0, beat, "a task sent", 30)

    broker.stop()
    assert wait_for(lambda: healthz_names_beat(settings), beat, "/healthz naming beat", 30) < 15
    # named all along: no heartbeat while nothing can be sent (a failed send takes 1-2 s
    # of retries, so a beat that beat after each tick would be fresh again at once)
    looked_until = time.monotonic() + 6
    while time.monotonic() < looked_until:
        assert healthz_names_beat(settings), beat.text()[-3000:]
        time.sleep(0.25)

    broker.start()
    wait_for(lambda: not healthz_names_beat(settings), beat, "a fresh heartbeat again", 60)
    assert queue.llen(QUEUE) > 0  # it sends again (the restarted Redis started empty)
    assert beat.popen.poll() is None


def test_a_web_server_without_its_database_says_so_and_healthz_web_names_it(
    tmp_path, broker, processes
):
    port = free_port()
    url = with_password(database_url(port=closed_port()))
    # two workers, the first of which checks the database (gunicorn.py's default, 2 x
    # cores + 1, started a Django application in each of five or more, ~2 CPU-s each)
    env = {"DATABASE_URL": url, "REDIS_URL": broker.url, "WEB_CONCURRENCY": "2"}
    web = Process(tmp_path, "web", ALLOT_PORT=str(port), **env)
    processes.append(web)
    said = "DATABASE_URL (postgres://"
    wait_for(lambda: said in web.text(), web, "a line naming DATABASE_URL", 120)
    line = next(line for line in web.text().splitlines() if said in line)
    assert " ERROR " in line and "Connection refused" in line and "503" in line, line
    status, body, _ = http(port, "/healthz/web")
    assert (status, body["status"], body["stale"]) == (503, "unavailable", ["database"])
    assert web.popen.poll() is None and PASSWORD not in web.text()
