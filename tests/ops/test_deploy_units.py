"""The production recipe, run: the command lines of the systemd units (deploy/systemd/,
through deploy/allot-run) with production settings, as a non-root user, on the real
PostgreSQL, a Redis of the test's own and a simulated cluster process.

- a job goes from submission to success through the web, worker, background and beat
  units;
- two web instances and a worker share one metrics directory: restarting an instance
  loses no count (theirs, its own, or the worker's), and adds no file;
- killing beat makes /healthz 503 naming beat within 3 cycle periods; restarting it, 200;
- stopping the background worker makes /healthz "degraded" naming it.

One deployment, in one test, goes through them in turn: starting one (a migration, the
simulated cluster, two gunicorn instances of two workers, the workers and beat) was most of
each of three tests' time."""

from __future__ import annotations

import json
import signal
import time
from pathlib import Path

import pytest

from ops.models import Heartbeat
from scheduler.adapters.simcluster.process import answers
from scheduler.services.clusters import cluster_create
from tests.ops.deploy import (
    Deployment,
    http,
    remove_tree,
    runtime_user,
    secret_key,
    shared_tempdir,
    shared_tempdir_root,
    wait_until,
)
from tests.support.ports import free_port
from tests.support.workers import RedisServer
from tests.support.workers import test_database_url as database_url_of_tests

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]


@pytest.fixture
def deployment(tmp_path):
    """Units' commands as the runtime user, against the test database and a Redis of the
    test's own; every process is stopped afterwards."""
    venv_dir = shared_tempdir_root()
    user, foreign = runtime_user(venv_dir)
    var_dir = shared_tempdir(user)
    redis = RedisServer(free_port(), tmp_path).start()
    base_env = {
        "ALLOT_VENV": str(user.venv),
        "ALLOT_VAR_DIR": str(var_dir),
        "DATABASE_URL": database_url_of_tests(),
        "ALLOT_MIGRATE_DATABASE_URL": database_url_of_tests(),
        "ALLOT_DB_RUNTIME_ROLE": "",  # the test database has one role
        "REDIS_URL": redis.url,
        "SECRET_KEY": secret_key(),
        "ALLOWED_HOSTS": "127.0.0.1,localhost",
        "ALLOT_SIMCLUSTER_URL": f"http://127.0.0.1:{free_port()}",
        "ALLOT_HEARTBEAT_S": "1",
        "ALLOT_CYCLE_TICK_S": "1",
        "WEB_CONCURRENCY": "2",
    }
    if foreign:  # the compiled engine was built for .venv's interpreter
        base_env["ALLOT_NATIVE"] = "0"
    deployed = Deployment(user=user, logs=var_dir, base_env=base_env)
    try:
        yield deployed
    finally:
        deployed.stop_all()
        redis.stop()
        remove_tree(var_dir)
        remove_tree(venv_dir)


def start_scheduling(deployment: Deployment, *, cycle_s: int, web_ports: list[int]):
    """Migrate (the one-shot unit), then the simulated cluster, a cluster in it, the web
    instances, worker 1 (ALLOT_WORKER_QUEUES=celery in the environment file), background
    worker 1 and beat; returns the cluster once the web answers."""
    migrate = deployment.run("allot-migrate.service")
    assert migrate.returncode == 0, migrate.stdout + migrate.stderr
    url = deployment.base_env["ALLOT_SIMCLUSTER_URL"]
    deployment.start("simcluster", "allot-simcluster.service")
    wait_until(
        lambda: answers(url), timeout_s=30, what="the simulated cluster", deployment=deployment
    )
    cluster = cluster_create(
        name="prod", hosts=2, gpus_per_host=8, speed=60, cycle_s=cycle_s, adapter_url=url
    )
    for port in web_ports:
        deployment.start(f"web-{port}", "allot-web@.service", str(port))
    deployment.start("worker", "allot-worker@.service", "1")
    deployment.start("background", "allot-background@.service", "1")
    deployment.start("beat", "allot-beat.service")
    for port in web_ports:
        wait_until(
            lambda p=port: http(p, "/healthz/web")[0] == 200,
            timeout_s=60,
            what=f"the web instance on port {port}",
            deployment=deployment,
        )
    return cluster


def process_owner(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("Uid:"):
            return int(line.split()[1])
    raise AssertionError(f"no Uid line for {pid}")


def command_line(pid: int) -> str:
    return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()


def test_the_units_run_a_job_restart_losing_no_count_and_healthz_names_what_died(deployment, tree):
    """One deployment (its start is most of such a test), two web instances: a job to
    success through the units run as a non-root user, their structured logs; then a web
    instance and the worker restarted, losing no count; then beat killed, named by
    /healthz within three cycle periods, and restarted; then the background worker
    stopped, /healthz degraded naming it; then SIGTERM stops each process (the restarted
    ones) cleanly."""
    first, second, cycle_s = free_port(), free_port(), 4
    cluster = start_scheduling(deployment, cycle_s=cycle_s, web_ports=[first, second])
    _a_job_to_success_as_a_non_root_user(deployment, tree, first)
    _restarting_a_web_instance_or_the_worker_loses_no_count(deployment, cluster, first, second)
    _kill_beat_and_see_healthz_name_it(deployment, first, cycle_s)
    # the background worker stopped: cycles go on, /healthz is 200 "degraded" naming it
    assert deployment.stop("background") == 0
    health = wait_until(
        lambda: (r := http(first, "/healthz"))[0] == 200 and r[1]["status"] == "degraded" and r[1],
        timeout_s=30,
        what="/healthz degraded naming the background worker",
        deployment=deployment,
    )
    assert health["stale"] == ["background worker"], health
    # SIGTERM reaches gunicorn and Celery, which finish and exit cleanly
    for name in (f"web-{first}", f"web-{second}", "worker", "beat"):
        assert deployment.stop(name) == 0, name


def _a_job_to_success_as_a_non_root_user(deployment: Deployment, tree, port: int) -> None:
    from accounts.services import token_create

    token = token_create(user=tree.user("ann"), name="deploy-test")[1]
    status, job, _ = http(
        port,
        "/api/v1/jobs/",
        method="POST",
        token=token,
        body={
            "project": "org/prog-a/a1",
            "cluster": "prod",
            "gpus": 8,
            "min_runtime_s": 60,
            "duration_s": 120,  # two wall seconds at the cluster's 60x speed
        },
    )
    assert status == 201, job
    job_id = job["jobs"][0]["id"]

    def state() -> str:
        return http(port, f"/api/v1/jobs/{job_id}/", token=token)[1]["state"]

    wait_until(
        lambda: state() == "succeeded",
        timeout_s=120,
        what="the job's success",
        deployment=deployment,
    )
    health = wait_until(
        lambda: (r := http(port, "/healthz"))[0] == 200 and r[1],
        timeout_s=30,
        what="/healthz ok",
        deployment=deployment,
    )
    assert health["status"] == "ok" and health["stale"] == [], health

    # the unit's process is the program itself (exec), run by the unprivileged user
    programs = [(f"web-{port}", "gunicorn"), ("worker", "celery"), ("background", "celery")]
    for name, program in [*programs, ("beat", "celery")]:
        pid = deployment.processes[name].popen.pid
        assert program in command_line(pid)
        assert process_owner(pid) == deployment.user.uid
        assert deployment.user.uid != 0
    # each worker's heartbeat names its queues: what tells the two apart in /healthz
    workers = dict(Heartbeat.objects.filter(kind="worker").values_list("name", "queues"))
    assert sorted(q for _, q in workers.items()) == ["background", "celery"], workers
    assert {name.split("@")[0] for name in workers} == {"worker-1", "background-1"}
    # structured logs (ALLOT_LOG_FORMAT=json in the environment file): every line of
    # every process is one JSON object (Celery's start-up banners were plain text)
    for name in ("worker", "background", "beat", f"web-{port}"):
        for line in deployment.processes[name].log().splitlines():
            assert not line.strip() or line.startswith("{"), (name, line)
    worker_lines = [
        json.loads(line)
        for line in deployment.processes["worker"].log().splitlines()
        if line.startswith("{")
    ]
    assert any(
        line["logger"] == "scheduler.cycle.run" and line.get("cycle_id") for line in worker_lines
    )
    web_lines = [
        json.loads(line)
        for line in deployment.processes[f"web-{port}"].log().splitlines()
        if line.startswith("{")
    ]
    assert any(
        line["logger"] == "gunicorn.access" and line.get("request_id") and line["ts"].endswith("Z")
        for line in web_lines
    )


def _kill_beat_and_see_healthz_name_it(deployment: Deployment, port: int, cycle_s: int) -> None:
    """Killing beat makes /healthz 503 naming beat within three cycle periods; a restarted
    beat makes it 200 again."""
    wait_until(
        lambda: http(port, "/healthz")[0] == 200,
        timeout_s=60,
        what="/healthz ok",
        deployment=deployment,
    )
    deployment.stop("beat", sig=signal.SIGKILL)
    killed = time.monotonic()
    status, body, _ = wait_until(
        lambda: (r := http(port, "/healthz"))[0] == 503 and r,
        timeout_s=3 * cycle_s,
        what="/healthz 503 within 3 cycle periods of beat's death",
        deployment=deployment,
    )
    assert time.monotonic() - killed <= 3 * cycle_s + 1
    assert "beat" in body["stale"], body
    deployment.restart("beat")
    wait_until(  # a fresh beat process: as long as the first start may take (load)
        lambda: http(port, "/healthz")[0] == 200,
        timeout_s=60,
        what="/healthz ok after beat restarted",
        deployment=deployment,
    )


def _counts(port: int) -> dict[str, float]:
    """Counter and histogram-count samples of /metrics, by their full sample name."""
    status, text, _ = http(port, "/metrics", client="127.0.0.1")  # a scraper on the host
    assert status == 200
    samples = {}
    for line in text.splitlines():
        if line.startswith(("allot_http_requests_total{", "allot_cycle_duration_seconds_count{")):
            name, value = line.rsplit(" ", 1)
            samples[name] = float(value)
    return samples


def _slot_of(file_name: str) -> str:
    """The metrics slot of a multiprocess file (`counter_web-h-8000-0.db` -> `web-h-8000-0`)."""
    return file_name.split("_", 1)[1].removesuffix(".db")


def _restarting_a_web_instance_or_the_worker_loses_no_count(
    deployment: Deployment, cluster, first: int, second: int
) -> None:
    route = 'allot_http_requests_total{method="GET",route="/api/v1/jobs/",status="401"}'
    cycles = f'allot_cycle_duration_seconds_count{{cluster="{cluster.name}"}}'
    for port, requests in ((first, 5), (second, 3)):
        for _ in range(requests):
            assert http(port, "/api/v1/jobs/")[0] == 401
    before = wait_until(
        lambda: (c := _counts(second)).get(cycles, 0) >= 2 and c,
        timeout_s=60,
        what="the worker's cycles in /metrics",
        deployment=deployment,
    )
    assert before[route] == 8
    metrics_dir = Path(deployment.base_env["ALLOT_VAR_DIR"]) / "prometheus"
    files = sorted(p.name for p in metrics_dir.iterdir())

    deployment.restart(f"web-{first}")
    wait_until(
        lambda: http(first, "/healthz/web")[0] == 200, timeout_s=60, what="the restarted instance"
    )
    for _ in range(2):
        assert http(first, "/api/v1/jobs/")[0] == 401
    for port in (first, second):  # either instance reports every process's counts
        after = _counts(port)
        assert after[route] == 10
        assert after[cycles] >= before[cycles]
        for name, value in before.items():
            assert after.get(name, 0) >= value, name
    # the same slots' files: the restarted instance's workers write where the earlier ones
    # did (which of its two workers took a request decides which slots have files yet)
    now_files = sorted(p.name for p in metrics_dir.iterdir())
    assert set(files) <= set(now_files)
    ports = {str(first), str(second)}
    _assert_web_files_in_slots(now_files, ports)

    # the worker restarts: its cycles so far stay counted, and it goes on counting there
    counted = _counts(second)[cycles]
    deployment.restart("worker")
    wait_until(
        lambda: _counts(first)[cycles] >= counted + 2,
        timeout_s=60,
        what="the restarted worker's cycles counted on top of the earlier ones",
        deployment=deployment,
    )
    assert _counts(second)[route] == 10
    # the restarted worker writes into its files of before: no file of another process
    # appears (a web instance's worker may add its slot's file when it takes its first
    # request - /metrics is scraped from either of an instance's two workers)
    final = sorted(p.name for p in metrics_dir.iterdir())
    assert set(now_files) <= set(final)
    assert _not_web(final) == _not_web(now_files), final
    _assert_web_files_in_slots(final, ports)


def _not_web(names: list[str]) -> set[str]:
    return {name for name in names if "_web-" not in name}


def _assert_web_files_in_slots(names: list[str], ports: set[str]) -> None:
    """Every web instance's file is in one of its two workers' slots."""
    for name in names:
        if "_web-" in name:
            port, slot = _slot_of(name).rsplit("-", 2)[1:]
            assert port in ports and slot in ("0", "1"), names
