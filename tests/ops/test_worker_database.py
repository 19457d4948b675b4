"""A worker that cannot use its database takes no task (ops/worker_database.py), with real
worker processes: one whose DATABASE_URL points at a closed port exits non-zero naming
DATABASE_URL and leaves the task in the queue for a good worker (one whose REDIS_URL
does, naming REDIS_URL); one whose database goes
away while it runs hands the task back once the database is back instead of failing it."""

from __future__ import annotations

import datetime as dt
import os
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
import redis
from django.conf import settings
from django.db import connection
from django.utils import timezone

from config.celery import app
from ops.worker_database import DATABASE_UNREACHABLE_EXIT
from scheduler.models import IdempotencyKey
from tests.factories import UserFactory
from tests.support.relay import Outage, closed_port
from tests.support.workers import stop_process

pytestmark = [
    pytest.mark.django_db(transaction=True),
    # the tests send to the real broker on purpose (a worker process takes the task);
    # the settings' eager mode, which send_task ignores, is for the in-process tests
    pytest.mark.filterwarnings("ignore::celery.exceptions.AlwaysEagerIgnored"),
]
ROOT = Path(__file__).resolve().parents[2]
TASK = "scheduler.prune_idempotency_keys"  # quick; its effect: stale keys deleted


def stale_key() -> None:
    """A submission key 2 days old, which TASK deletes when it runs."""
    IdempotencyKey.objects.create(
        user=UserFactory(),
        key=uuid.uuid4().hex,
        fingerprint="f",
        created_at=timezone.now() - dt.timedelta(days=2),
    )


def wait_until_run(worker: Worker, timeout_s: float = 90) -> None:
    """Until TASK ran: no stale key left."""
    deadline = time.monotonic() + timeout_s
    while IdempotencyKey.objects.exists():
        assert worker.popen.poll() is None, worker.text()
        assert time.monotonic() < deadline, f"the task did not run:\n{worker.text()}"
        time.sleep(0.2)


def database_url(host: str, port: int | str) -> str:
    db = connection.settings_dict
    password = f":{db['PASSWORD']}" if db.get("PASSWORD") else ""
    return f"postgres://{db['USER']}{password}@{host}:{port}/{db['NAME']}"


class Worker:
    """A real `celery worker` of queue `queue`, its output in `log`."""

    def __init__(self, queue: str, url: str, log: Path, redis_url: str = "") -> None:
        self.log = log
        env = dict(
            os.environ,
            DJANGO_SETTINGS_MODULE="config.settings.test",
            DATABASE_URL=url,
            REDIS_URL=redis_url or settings.REDIS_URL,
            LOG_LEVEL="INFO",
            PYTHONUNBUFFERED="1",
        )
        command = [sys.executable, "-m", "celery", "--quiet", "-A", "config", "worker"]
        command += ["--pool", "solo", "-Q", queue, "-n", f"{queue}@%h"]
        with log.open("w") as out:
            self.popen = subprocess.Popen(command, cwd=ROOT, env=env, stdout=out, stderr=out)

    def text(self) -> str:
        return self.log.read_text()

    def wait_for(self, text: str, timeout_s: float = 90) -> None:
        deadline = time.monotonic() + timeout_s
        while text not in self.text():
            assert self.popen.poll() is None, self.text()
            assert time.monotonic() < deadline, f"no {text!r} in:\n{self.text()}"
            time.sleep(0.2)

    def stop(self) -> None:
        stop_process(self.popen)


@pytest.fixture
def queue():
    """A queue of this test's own in the test's Redis, removed afterwards."""
    name = f"dbcheck-{uuid.uuid4().hex[:8]}"
    client = redis.Redis.from_url(settings.REDIS_URL)
    yield name, client
    client.delete(name)


@pytest.fixture
def workers():
    started: list[Worker] = []
    yield started
    for worker in started:
        worker.stop()


def test_a_worker_that_cannot_reach_its_database_exits_and_leaves_the_task(
    queue, workers, tmp_path
):
    name, broker = queue
    stale_key()
    app.send_task(TASK, queue=name)
    bad = Worker(name, database_url("127.0.0.1", closed_port()), tmp_path / "bad.log")
    workers.append(bad)
    assert bad.popen.wait(90) == DATABASE_UNREACHABLE_EXIT, bad.text()
    said = bad.text()
    assert "DATABASE_URL" in said and "Connection refused" in said, said
    assert "takes no task" in said
    assert broker.llen(name) == 1  # the task waits for a worker that can run it

    good = Worker(name, database_url(*_host_port()), tmp_path / "good.log")
    workers.append(good)
    wait_until_run(good)
    assert broker.llen(name) == 0


def test_a_worker_that_cannot_reach_its_broker_exits_naming_redis_url(workers, tmp_path):
    """Celery retried an unreachable broker for ever, the unit "active" and nothing
    consumed; the worker's start check now exits 69 naming REDIS_URL (no password)."""
    port = closed_port()
    url = f"redis://:s3cret-not-shown@127.0.0.1:{port}/0"
    bad = Worker("dbcheck-nobroker", database_url(*_host_port()), tmp_path / "bad.log", url)
    workers.append(bad)
    assert bad.popen.wait(90) == DATABASE_UNREACHABLE_EXIT, bad.text()
    said = bad.text()
    critical = [line for line in said.splitlines() if "CRITICAL" in line]
    assert len(critical) == 1, said
    assert f"REDIS_URL (redis://:**@127.0.0.1:{port}/0)" in critical[0], said
    assert "Connection refused" in critical[0] and "takes no task" in critical[0]
    assert "s3cret-not-shown" not in said


def _host_port() -> tuple[str, str]:
    db = connection.settings_dict
    return db["HOST"] or "127.0.0.1", str(db["PORT"] or 5432)


def test_a_task_that_meets_the_database_gone_waits_and_goes_back_to_its_queue(
    queue, workers, tmp_path
):
    name, broker = queue
    host, port = _host_port()
    relay = Outage(host, int(port))
    worker = Worker(name, database_url("127.0.0.1", relay.port), tmp_path / "worker.log")
    workers.append(worker)
    worker.wait_for(" ready.")
    stale_key()
    app.send_task(TASK, queue=name)
    wait_until_run(worker)  # its connection is open, through the relay

    relay.down()
    stale_key()
    app.send_task(TASK, queue=name)
    worker.wait_for("the database went away")
    time.sleep(2)  # a few seconds of outage: the worker waits, failing nothing
    assert IdempotencyKey.objects.exists() and " raised " not in worker.text()
    relay.up()
    wait_until_run(worker)
    said = worker.text()
    assert "handed back to its queue" in said and " raised " not in said, said
    assert worker.popen.poll() is None  # a short outage is survived
    assert broker.llen(name) == 0
