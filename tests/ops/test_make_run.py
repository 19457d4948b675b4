"""`make run` (config/launch.py) with its state outside the repository: beat starts and
cycles run; when the web server, a worker, beat or the simulated cluster dies, it stops
everything and exits non-zero naming the process; a busy background worker (a what-if
preview) does not hold up the cycles."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import redis as redis_lib
from celery import Celery
from django.conf import settings

from scheduler.models import CycleRecord
from scheduler.services.clusters import cluster_create
from tests.ops.deploy import wait_until
from tests.support.ports import free_port
from tests.support.workers import RedisServer
from tests.support.workers import test_database_url as database_url_of_tests

ROOT = Path(__file__).resolve().parents[2]
pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]

# what each child's command line contains, and the name `make run` reports
CHILDREN = {
    "web": ("runserver", "the web server"),
    "worker": ("-Q celery ", "the Celery worker"),
    "background": ("-Q background ", "the background worker"),
    "beat": (" beat", "Celery beat"),
    "simcluster": ("scheduler.adapters.simcluster", "the simulated cluster"),
}


def _children(pid: int) -> dict[int, str]:
    """Command lines of `pid`'s child processes."""
    found = {}
    # not Path.glob: a process that exits while /proc is listed makes it raise
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            fields = Path("/proc", name, "stat").read_text().rsplit(")", 1)[1].split()
            if int(fields[1]) == pid:
                cmdline = Path("/proc", name, "cmdline").read_bytes()
                found[int(name)] = cmdline.replace(b"\0", b" ").decode()
        except (OSError, IndexError, ValueError):
            continue
    return found


@pytest.fixture
def make_run(tmp_path):
    """`python -m config.launch` on the test database, a Redis of its own, and
    ALLOT_VAR_DIR outside the repository; stopped afterwards."""
    redis = RedisServer(free_port(), tmp_path).start()
    var_dir = tmp_path / "elsewhere" / "var"
    log_path = tmp_path / "make-run.log"
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "config.settings.dev",
        "DATABASE_URL": database_url_of_tests(),
        "REDIS_URL": redis.url,
        "ALLOT_VAR_DIR": str(var_dir),
        "ALLOT_DEMO": "off",
        "ALLOT_PORT": str(free_port()),
        "ALLOT_SIMCLUSTER_URL": f"http://127.0.0.1:{free_port()}",
        "ALLOT_CYCLE_TICK_S": "1",
        "PYTHONUNBUFFERED": "1",
    }
    with log_path.open("wb") as log:
        launch = subprocess.Popen(
            [sys.executable, "-m", "config.launch"],
            cwd=ROOT,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    try:
        wait_until(
            lambda: (
                b"Allot is running" in log_path.read_bytes()
                and len(_children(launch.pid)) == len(CHILDREN)
            ),
            timeout_s=120,
            what=f"make run to start; see {log_path}",
        )
        yield launch, env, var_dir, log_path
    finally:
        if launch.poll() is None:
            launch.send_signal(signal.SIGINT)
            launch.wait(60)
        redis.stop()


def _kill_and_expect_exit(launch: subprocess.Popen, log_path: Path, dies: str) -> None:
    """SIGKILL `make run`'s child `dies`: `make run` exits 1 naming it, and no child of
    it is left running."""
    marker, name = CHILDREN[dies]
    children = _children(launch.pid)
    (victim,) = [pid for pid, cmd in children.items() if marker in cmd]
    os.kill(victim, signal.SIGKILL)
    assert launch.wait(60) == 1
    output = log_path.read_text(errors="replace")
    assert f"Allot: {name} exited (status -9)" in output
    assert not [pid for pid in children if Path(f"/proc/{pid}").exists()]  # all stopped


# Beat (the process whose death went unnoticed), the worker and the background worker
# (at the end of the busy-background test, on its `make run`) are killed under a real
# `make run`; the web server and the simulated cluster are watched by the same loop
# (`_watch`), checked for every name with stand-in processes in test_launch_watch.py.
@pytest.mark.parametrize("dies", ["beat", "worker"])
def test_make_run_exits_non_zero_naming_the_process_that_died(make_run, dies):
    launch, env, var_dir, log_path = make_run
    cluster = cluster_create(
        name="run", hosts=1, gpus_per_host=8, cycle_s=1, adapter_url=env["ALLOT_SIMCLUSTER_URL"]
    )
    # beat keeps its schedule under ALLOT_VAR_DIR, and asks for cycles the worker runs
    wait_until(
        lambda: CycleRecord.objects.filter(cluster=cluster).count() >= 2,
        timeout_s=60,
        what=f"cycles asked for by beat; see {log_path}",
    )
    assert list(var_dir.glob("celerybeat-schedule*"))
    _kill_and_expect_exit(launch, log_path, dies)


def test_cycles_go_on_while_the_background_worker_is_busy_and_its_death_stops_all(make_run):
    """The background worker stopped (SIGSTOP: as busy as with a 30-s preview): the
    previews and ETA refreshes asked for wait in its queue, and cycles still run. Once it
    has taken them, it is killed: `make run` exits non-zero naming it (on this test's
    `make run`, not one of its own: a start of `make run` is most of such a test)."""
    launch, env, _var_dir, log_path = make_run
    cluster = cluster_create(
        name="run", hosts=1, gpus_per_host=8, cycle_s=1, adapter_url=env["ALLOT_SIMCLUSTER_URL"]
    )
    wait_until(
        lambda: CycleRecord.objects.filter(cluster=cluster).exists(),
        timeout_s=60,
        what=f"a first cycle; see {log_path}",
    )
    marker, _name = CHILDREN["background"]
    (busy,) = [pid for pid, cmd in _children(launch.pid).items() if marker in cmd]
    os.kill(busy, signal.SIGSTOP)
    try:
        broker = redis_lib.Redis.from_url(env["REDIS_URL"])
        with Celery("allot", broker=env["REDIS_URL"], set_as_current=False) as app:
            app.conf.task_routes = settings.CELERY_TASK_ROUTES
            for name in ("scheduler.preview_run", "scheduler.refresh_etas"):
                app.send_task(name, (0,))
        # waiting for the busy worker (which holds one, prefetched, or beat's tasks)
        assert broker.llen(settings.BACKGROUND_QUEUE) >= 1
        seen = CycleRecord.objects.filter(cluster=cluster).count()
        wait_until(
            lambda: CycleRecord.objects.filter(cluster=cluster).count() >= seen + 3,
            timeout_s=30,
            what=f"cycles while the background worker is busy; see {log_path}",
        )
    finally:
        os.kill(busy, signal.SIGCONT)
    wait_until(
        lambda: broker.llen(settings.BACKGROUND_QUEUE) == 0,
        timeout_s=60,
        what=f"the background worker to take its tasks once free; see {log_path}",
    )
    _kill_and_expect_exit(launch, log_path, "background")


def test_a_database_that_does_not_exist_stops_make_run_with_a_message(tmp_path):
    """DATABASE_URL naming a database that does not exist: `make run` exits 1 with a
    message naming DATABASE_URL, and stops the simulated cluster it had started (its port
    is free again), instead of a traceback from the clean-up."""
    sim_port = free_port()
    base = database_url_of_tests().rsplit("/", 1)[0]
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "config.settings.dev",
        "DATABASE_URL": f"{base}/allot_no_such_database",
        "REDIS_URL": "redis://127.0.0.1:1/0",
        "ALLOT_VAR_DIR": str(tmp_path / "var"),
        "ALLOT_PORT": str(free_port()),
        "ALLOT_SIMCLUSTER_URL": f"http://127.0.0.1:{sim_port}",
    }
    done = subprocess.run(
        [sys.executable, "-m", "config.launch"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 1, done.stderr[-2000:]
    assert "cannot use the database (DATABASE_URL)" in done.stderr
    assert "allot_no_such_database" in done.stderr
    assert "Traceback" not in done.stderr, done.stderr[-2000:]
    assert free_port_is(sim_port), "the simulated cluster was left running"


def free_port_is(port: int) -> bool:
    """Whether nothing listens on 127.0.0.1:`port`."""
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) != 0
